"""Mixing autoreg into torch.nn built-ins: ``class MyLinear(autoreg.AutoRegisterMixin, nn.Linear)``.

Each mixed class must be indistinguishable from the original: same outputs, parameters, buffers
and state_dict (same seed), before and after a training step and a dtype move, in the default mode
and in strict mode (built-ins register everything they hold, so strict never trips).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils._pytree import tree_leaves

import autoreg


@dataclass(frozen=True)
class Case:
    base: type[nn.Module]
    build: Callable[[type[nn.Module]], nn.Module]
    inputs: Callable[[torch.dtype], tuple[Any, ...]]
    through: Callable[[nn.Module, tuple[Any, ...]], Any] | None = None  # how to call it

    def call(self, module: nn.Module, xs: tuple[Any, ...]) -> Any:
        return self.through(module, xs) if self.through else module(*xs)


def _randn(*shape: int) -> Callable[[torch.dtype], tuple[torch.Tensor, ...]]:
    def make(dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
        generator = torch.Generator().manual_seed(1)
        return (torch.randn(*shape, generator=generator, dtype=dtype),)

    return make


def _through_list(module: nn.Module, xs: tuple[Any, ...]) -> torch.Tensor:
    x = xs[0]
    for layer in module:  # type: ignore[attr-defined]
        x = layer(x)
    return x


def _attention_inputs(dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 3, 8, generator=generator, dtype=dtype) for _ in range(3))
    return q, k, v


CASES = {
    "Linear": Case(nn.Linear, lambda cls: cls(4, 3), _randn(2, 4)),
    "Sequential": Case(
        nn.Sequential,
        lambda cls: cls(nn.Linear(4, 4), nn.ReLU(), nn.BatchNorm1d(4), nn.Linear(4, 2)),
        _randn(5, 4),
    ),
    "ModuleList": Case(
        nn.ModuleList,
        lambda cls: cls([nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 2)]),
        _randn(5, 4),
        _through_list,
    ),
    "LSTM": Case(nn.LSTM, lambda cls: cls(4, 5, num_layers=2, batch_first=True), _randn(2, 3, 4)),
    "MultiheadAttention": Case(
        nn.MultiheadAttention, lambda cls: cls(8, 2, batch_first=True), _attention_inputs
    ),
    "TransformerEncoderLayer": Case(
        nn.TransformerEncoderLayer,
        lambda cls: cls(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True),
        _randn(2, 3, 8),
    ),
    "BatchNorm2d": Case(nn.BatchNorm2d, lambda cls: cls(3), _randn(2, 3, 4, 4)),
    "Embedding": Case(
        nn.Embedding,
        lambda cls: cls(10, 4, padding_idx=0),
        lambda dtype: (torch.tensor([[1, 0, 9], [3, 3, 2]]),),
    ),
}


def _mixed(base: type[nn.Module], strict: bool) -> type[nn.Module]:
    """``class Auto<Base>(autoreg.AutoRegisterMixin, Base, strict=...)``."""
    return type(f"Auto{base.__name__}", (autoreg.AutoRegisterMixin, base), {}, strict=strict)


MIXED = {
    (name, strict): _mixed(case.base, strict)
    for name, case in CASES.items()
    for strict in (False, True)
}

BUILTINS = pytest.mark.parametrize("name", list(CASES))
MODES = pytest.mark.parametrize("strict", [False, True], ids=["default", "strict"])


def _pair(name: str, strict: bool) -> tuple[nn.Module, nn.Module]:
    case = CASES[name]
    torch.manual_seed(0)
    auto = case.build(MIXED[name, strict])
    torch.manual_seed(0)
    original = case.build(case.base)
    return auto, original


def _assert_same_state(auto: nn.Module, original: nn.Module) -> None:
    assert [n for n, _ in auto.named_parameters()] == [n for n, _ in original.named_parameters()]
    assert [n for n, _ in auto.named_buffers()] == [n for n, _ in original.named_buffers()]
    auto_state, original_state = auto.state_dict(), original.state_dict()
    assert list(auto_state) == list(original_state)
    for key in auto_state:
        assert auto_state[key].dtype == original_state[key].dtype, key
        assert torch.equal(auto_state[key], original_state[key]), key


def _assert_same_outputs(got: Any, expected: Any) -> None:
    got_leaves, expected_leaves = tree_leaves(got), tree_leaves(expected)
    assert len(got_leaves) == len(expected_leaves)
    for a, b in zip(got_leaves, expected_leaves, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


@BUILTINS
@MODES
def test_mixed_builtin_is_indistinguishable_from_the_original(name: str, strict: bool) -> None:
    case = CASES[name]
    auto, original = _pair(name, strict)
    _assert_same_state(auto, original)
    # Every name the built-in's own code assigned is the built-in's (row 4): nn.Module's rules.
    roles = {key: role for key, role in vars(auto).items() if key.startswith("_autoreg_role_")}
    assert set(roles.values()) <= {"framework"}, roles

    for train in (True, False):  # training (BatchNorm updates its stats), then inference
        auto.train(train)
        original.train(train)
        xs = case.inputs(torch.float32)
        _assert_same_outputs(case.call(auto, xs), case.call(original, xs))
        _assert_same_state(auto, original)


@BUILTINS
@MODES
def test_mixed_builtin_after_double_and_a_backward_step(name: str, strict: bool) -> None:
    case = CASES[name]
    auto, original = _pair(name, strict)

    for module in (auto, original):
        module.double()
        out = case.call(module, case.inputs(torch.float64))
        sum(leaf.sum() for leaf in tree_leaves(out) if leaf.is_floating_point()).backward()

    _assert_same_state(auto, original)
    for (n, a), (_, b) in zip(auto.named_parameters(), original.named_parameters(), strict=True):
        assert a.dtype == torch.float64, n
        torch.testing.assert_close(a.grad, b.grad, rtol=0, atol=0, msg=n)


@MODES
def test_lstm_apply_override_still_rebuilds_flat_weights(strict: bool) -> None:
    auto, _ = _pair("LSTM", strict)

    auto.double()

    names = auto._flat_weights_names
    assert len(auto._flat_weights) == len(names) == 8
    for weight_name, weight in zip(names, auto._flat_weights, strict=True):
        assert weight is getattr(auto, weight_name)  # the converted parameter, not a copy
        assert weight.dtype == torch.float64
    output, _ = auto(torch.randn(2, 3, 4, dtype=torch.float64))
    assert output.dtype == torch.float64


def test_autoreg_still_works_on_a_mixed_builtin() -> None:
    linear = MIXED["Linear", False](4, 3)

    linear.offset = torch.ones(3)  # after construction: carried
    linear.double()

    assert linear.offset.dtype == torch.float64
    assert "offset" not in linear.state_dict()


def test_strict_mixed_builtin_still_refuses_undeclared_tensors() -> None:
    linear = MIXED["Linear", True](4, 3)

    with pytest.raises(autoreg.UnregisteredTensorError, match=r"AutoLinear\.offset"):
        linear.offset = torch.ones(3)
