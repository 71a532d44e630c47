"""torch.nn.utils, torch.func and global hooks on autoreg modules, compared with nn.Module twins.

prune, weight_norm and spectral_norm write a derived weight onto the module with ``setattr``; it
must never become a buffer: ``named_buffers()`` and ``state_dict()`` keys equal the twin's.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from torch import nn
from torch.func import functional_call
from torch.nn.modules.module import register_module_buffer_registration_hook
from torch.nn.utils import parametrizations, parametrize, prune

import autoreg
from tests.support import role

# torch 2.13 deprecates the hook-based weight_norm in favour of the parametrization.
OLD_WEIGHT_NORM = pytest.mark.filterwarnings(
    r"ignore:`torch\.nn\.utils\.weight_norm` is deprecated:FutureWarning"
)


class AutoNet(autoreg.Module):
    stats: autoreg.Persistent
    late: torch.Tensor  # declared, first assigned after construction

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.stats = torch.arange(3.0)
        self.scale = torch.tensor([1.0, 2.0, 3.0])  # non-persistent by default

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) * self.scale + self.stats + self.offset


class TwinNet(nn.Module):
    forward = AutoNet.forward

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.register_buffer("stats", torch.arange(3.0))
        self.register_buffer("scale", torch.tensor([1.0, 2.0, 3.0]), persistent=False)


def _pair() -> tuple[nn.Module, nn.Module]:
    torch.manual_seed(0)
    auto = AutoNet()
    torch.manual_seed(0)
    twin = TwinNet()
    auto.offset = torch.full((3,), 0.5)  # carried
    twin.offset = torch.full((3,), 0.5)
    return auto, twin


def _roles(module: nn.Module) -> dict[str, str]:
    return {name: role(module, name) for name in ("stats", "scale", "offset")}


# --- load_state_dict(assign=True) ------------------------------------------------------------


def test_load_state_dict_assign_matches_the_twin() -> None:
    auto, twin = _pair()
    source = {key: value.clone() + 1 for key, value in TwinNet().state_dict().items()}
    auto_state = {key: value.clone() for key, value in source.items()}
    twin_state = {key: value.clone() for key, value in source.items()}

    auto.load_state_dict(auto_state, assign=True)
    twin.load_state_dict(twin_state, assign=True)

    assert auto.stats is auto_state["stats"]  # assigned, not copied
    assert (twin.stats is twin_state["stats"]) is True
    assert auto.lin.weight.data_ptr() == auto_state["lin.weight"].data_ptr()
    assert list(auto._buffers) == list(twin._buffers) == ["stats", "scale"]
    assert _roles(auto) == {
        "stats": "persistent buffer",
        "scale": "non-persistent buffer",
        "offset": "carried",
    }
    x = torch.randn(2, 3)
    torch.testing.assert_close(auto(x), twin(x), rtol=0, atol=0)
    auto.double()
    assert {auto.stats.dtype, auto.scale.dtype, auto.offset.dtype} == {torch.float64}


# --- parametrize ------------------------------------------------------------------------------


class _Double(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


class _Symmetric(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.triu() + x.triu(1).transpose(-1, -2)


@pytest.mark.parametrize(
    ("path", "name", "parametrization"),
    [("", "scale", _Double), ("lin", "weight", _Symmetric)],
    ids=["auto-registered-buffer", "parameter"],
)
def test_parametrize_matches_the_twin(
    path: str, name: str, parametrization: Callable[[], nn.Module]
) -> None:
    auto, twin = _pair()
    x = torch.randn(2, 3)

    for module in (auto, twin):
        parametrize.register_parametrization(module.get_submodule(path), name, parametrization())

    assert list(auto.state_dict()) == list(twin.state_dict())
    assert [n for n, _ in auto.named_buffers()] == [n for n, _ in twin.named_buffers()]
    torch.testing.assert_close(auto(x), twin(x), rtol=0, atol=0)
    auto.double()
    assert auto(x.double()).dtype == torch.float64  # the carried offset moved too

    for module in (auto, twin):
        parametrize.remove_parametrizations(module.get_submodule(path), name)
    assert list(auto.state_dict()) == list(twin.state_dict())
    assert [n for n, _ in auto.named_buffers()] == [n for n, _ in twin.named_buffers()]


class AutoParametrizedInInit(autoreg.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.ones(3)
        parametrize.register_parametrization(self, "scale", _Double())
        self.after = torch.zeros(3)  # still under construction: a buffer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale + self.after


def test_parametrize_during_construction() -> None:
    module = AutoParametrizedInInit()

    assert type(module).__name__ == "ParametrizedAutoParametrizedInInit"
    assert list(module._buffers) == ["after"]
    assert list(module.state_dict()) == ["parametrizations.scale.original"]
    module.runtime = torch.ones(3)  # construction is over: carried
    assert "runtime" not in module._buffers
    torch.testing.assert_close(module(torch.ones(3)), torch.full((3,), 2.0))


# --- derived weights: prune, weight_norm, spectral_norm ----------------------------------------


class AutoLinear(autoreg.AutoRegisterMixin, nn.Linear, persistent=True):
    """persistent=True: a derived weight registered by mistake would show in state_dict."""


def _prune(module: nn.Module) -> None:
    prune.l1_unstructured(module, "weight", amount=0.5)


def _weight_norm(module: nn.Module) -> None:
    parametrizations.weight_norm(module)


def _spectral_norm(module: nn.Module) -> None:
    parametrizations.spectral_norm(module)


def _old_weight_norm(module: nn.Module) -> None:
    torch.nn.utils.weight_norm(module)


def _old_spectral_norm(module: nn.Module) -> None:
    torch.nn.utils.spectral_norm(module)


UTILITIES = pytest.mark.parametrize(
    "utility",
    [
        _prune,
        _weight_norm,
        _spectral_norm,
        pytest.param(_old_weight_norm, marks=OLD_WEIGHT_NORM),
        _old_spectral_norm,
    ],
    ids=["prune", "weight_norm", "spectral_norm", "old-weight_norm", "old-spectral_norm"],
)


def _in_init(base: type[nn.Linear], utility: Callable[[nn.Module], None]) -> nn.Linear:
    """``base(4, 3)`` whose ``__init__`` applies ``utility`` to itself."""

    class Applied(base):  # type: ignore[valid-type, misc]
        def __init__(self) -> None:
            super().__init__(4, 3)
            utility(self)

    return Applied()


def _after_init(base: type[nn.Linear], utility: Callable[[nn.Module], None]) -> nn.Linear:
    module = base(4, 3)
    utility(module)
    return module


def _train_then_infer(module: nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    """A training forward (the derived weight requires grad), then an inference one (it doesn't)."""
    module.train()
    outputs = [module(x)]
    module.eval()
    with torch.no_grad():
        outputs.append(module(x))
    return outputs


@UTILITIES
@pytest.mark.parametrize("when", [_after_init, _in_init], ids=["after-init", "in-init"])
def test_derived_weights_never_become_buffers(
    utility: Callable[[nn.Module], None],
    when: Callable[[type[nn.Linear], Callable[[nn.Module], None]], nn.Linear],
) -> None:
    torch.manual_seed(0)
    auto = when(AutoLinear, utility)
    torch.manual_seed(0)
    twin = when(nn.Linear, utility)
    x = torch.randn(2, 4)

    assert "weight" not in auto._buffers
    for step in range(2):  # after construction, after a training and an inference forward
        assert [n for n, _ in auto.named_buffers()] == [n for n, _ in twin.named_buffers()]
        assert list(auto.state_dict()) == list(twin.state_dict())
        auto_out, twin_out = _train_then_infer(auto, x), _train_then_infer(twin, x)
        torch.testing.assert_close(auto_out, twin_out, rtol=0, atol=0, msg=f"step {step}")
        assert "weight" not in auto._buffers

    fresh = when(AutoLinear, utility)
    fresh.load_state_dict(twin.state_dict())  # strict: the twin's checkpoint fits
    auto.double()
    assert auto(x.double()).dtype == torch.float64


@UTILITIES
def test_derived_weight_written_in_init_under_no_grad_with_a_plain_declaration(
    utility: Callable[[nn.Module], None],
) -> None:
    """Built under no_grad, a derived weight does not require grad: the utility's code tells it
    apart (tests/contract/test_derived_weights.py), and a ``weight: autoreg.Plain`` declaration,
    once the advice here, keeps working."""

    class Declared(AutoLinear):
        weight: autoreg.Plain

        def __init__(self) -> None:
            super().__init__(4, 3)
            utility(self)

    class Twin(nn.Linear):
        def __init__(self) -> None:
            super().__init__(4, 3)
            utility(self)

    with torch.no_grad():
        torch.manual_seed(0)
        auto = Declared()
        torch.manual_seed(0)
        twin = Twin()

    assert [n for n, _ in auto.named_buffers()] == [n for n, _ in twin.named_buffers()]
    assert list(auto.state_dict()) == list(twin.state_dict())
    x = torch.randn(2, 4)
    torch.testing.assert_close(auto(x), twin(x), rtol=0, atol=0)


def test_prune_remove_restores_the_parameter() -> None:
    auto = AutoLinear(4, 3)
    _prune(auto)
    with torch.no_grad():
        auto(torch.randn(2, 4))  # the derived weight, without grad: carried at most

    prune.remove(auto, "weight")

    assert isinstance(auto.weight, nn.Parameter)
    assert list(auto.state_dict()) == ["bias", "weight"]  # as for nn.Linear: re-registered last
    assert not auto._buffers
    assert role(auto, "weight") == "parameter"


# --- torch.func.functional_call ----------------------------------------------------------------


def test_functional_call_matches_the_twin_and_restores_the_module() -> None:
    auto, twin = _pair()
    before = {name: getattr(auto, name) for name in ("stats", "scale", "offset")}
    replacements = {
        "lin.weight": torch.eye(3),
        "stats": torch.ones(3),  # persistent buffer
        "scale": torch.full((3,), 10.0),  # auto-registered, non-persistent buffer
        "offset": torch.full((3,), -1.0),  # carried tensor
    }
    x = torch.randn(2, 3)

    out = functional_call(auto, replacements, (x,))

    torch.testing.assert_close(out, functional_call(twin, replacements, (x,)), rtol=0, atol=0)
    torch.testing.assert_close(out, (x + auto.lin.bias) * 10 + 1 - 1)
    assert all(getattr(auto, name) is tensor for name, tensor in before.items())
    assert _roles(auto) == {
        "stats": "persistent buffer",
        "scale": "non-persistent buffer",
        "offset": "carried",
    }


def test_functional_call_composes_with_grad() -> None:
    auto, _ = _pair()
    params = {name: p.detach() for name, p in auto.named_parameters()}

    def loss(p: dict[str, torch.Tensor]) -> torch.Tensor:
        return functional_call(auto, p, (torch.ones(1, 3),)).sum()

    grads = torch.func.grad(loss)(params)

    torch.testing.assert_close(grads["lin.bias"], auto.scale)


# --- global buffer registration hooks ----------------------------------------------------------


@pytest.fixture
def hook_calls() -> Iterator[list[tuple[str, str]]]:
    """Record (class, name) of every global buffer registration; add 100 to ``stats``."""
    calls: list[tuple[str, str]] = []

    def hook(module: nn.Module, name: str, buffer: torch.Tensor | None) -> torch.Tensor | None:
        calls.append((type(module).__name__.removeprefix("Auto").removeprefix("Twin"), name))
        return buffer + 100 if name == "stats" and buffer is not None else None

    handle = register_module_buffer_registration_hook(hook)
    yield calls
    handle.remove()


def test_global_buffer_hook_fires_as_for_the_twin(hook_calls: list[tuple[str, str]]) -> None:
    auto = AutoNet()
    auto_construction = list(hook_calls)
    hook_calls.clear()
    TwinNet()
    twin_construction = list(hook_calls)

    assert auto_construction == twin_construction == [("Net", "stats"), ("Net", "scale")]
    torch.testing.assert_close(auto.stats, torch.arange(3.0) + 100)  # the hook's tensor
    assert auto._buffers["stats"] is auto.stats


def test_global_buffer_hook_sees_declared_and_reassigned_not_carried(
    hook_calls: list[tuple[str, str]],
) -> None:
    auto, twin = AutoNet(), TwinNet()
    hook_calls.clear()

    auto.offset = torch.zeros(3)  # carried: not a buffer, no hook
    auto.late = torch.zeros(3)  # declared: registered
    auto.scale = torch.zeros(3)  # reassigned buffer
    auto_calls = list(hook_calls)
    hook_calls.clear()
    twin.offset = torch.zeros(3)
    twin.register_buffer("late", torch.zeros(3), persistent=False)
    twin.scale = torch.zeros(3)

    assert auto_calls == hook_calls == [("Net", "late"), ("Net", "scale")]


def test_functional_call_over_a_carried_tensor_with_a_weight_says_nothing() -> None:
    """torch's temporary swap of a carried tensor for one that requires grad is torch's, not a
    weight the model forgot to wrap: no warning (it once warned as row 6 did at any time)."""
    auto, _ = _pair()
    x = torch.randn(2, 3)
    offset = torch.full((3,), 2.0, requires_grad=True)
    out = functional_call(auto, {"offset": offset}, (x,))  # warnings are errors in this suite
    out.sum().backward()
    assert offset.grad is not None
    assert role(auto, "offset") == "carried"


class Offset(autoreg.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if getattr(self, "offset", None) is None:
            self.offset = torch.randn(3)  # carried: made on the first call
        return self.lin(x) + self.offset


def test_an_ensemble_of_models_with_carried_state_runs_with_it_passed_by_name() -> None:
    """torch's ensembling recipe: stack_module_state stacks parameters and buffers, not carried
    tensors (docs/compatibility.md); passed stacked in functional_call's dicts too, the ensemble
    computes what each model computes."""
    from torch.func import stack_module_state, vmap

    models = [Offset() for _ in range(3)]
    x = torch.randn(4, 3)
    for model in models:
        model(x)
    params, buffers = stack_module_state(models)
    carried = {"offset": torch.stack([model.offset for model in models])}
    base = copy.deepcopy(models[0]).to("meta")

    def call(p: Any, b: Any, c: Any, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = functional_call(base, (p, b, c), (x,))
        return out

    outputs = vmap(call, in_dims=(0, 0, 0, None))(params, buffers, carried, x)
    for output, model in zip(outputs, models, strict=True):
        torch.testing.assert_close(output, model(x))


class Remembering(autoreg.Module):
    scale: torch.Tensor
    last: autoreg.Carried

    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.full((3,), 2.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.last = x * self.scale  # under vmap: a batched tensor that outlives the call
        return self.last.sum()


@pytest.mark.parametrize("warn", [False, True], ids=["register", "warn"])
def test_state_a_vmapped_forward_leaves_behind_is_left_by_to_as_on_the_twin(warn: bool) -> None:
    """A forward under ``torch.func.vmap`` that stores its batched intermediate on the module
    leaves a tensor torch can no longer convert (it escaped vmap). nn.Module keeps it as a plain
    attribute, which ``.double()`` never touches; autoreg carries it, cannot convert it, and
    leaves it too: ``.double()`` converts everything else and the module runs on, and warn mode
    says what was left and why."""
    from torch.func import vmap

    cls = type("Remembering", (Remembering,), {}, warn=warn)
    model = cls()
    x = torch.ones(4, 3)
    torch.testing.assert_close(vmap(model)(x), torch.full((4,), 6.0))
    if warn:
        with pytest.warns(autoreg.AutoRegisterWarning, match=r"Remembering\.last"):
            model.double()
    else:
        model.double()
    assert model.scale.dtype == torch.float64
    assert model.last.dtype == torch.float32  # left, as the twin leaves its plain attribute
    torch.testing.assert_close(model(x[0].double()), torch.tensor(6.0, dtype=torch.float64))
    assert model.last.dtype == torch.float64
