"""Row 6: a leaf tensor that requires grad (a weight) is neither registered nor carried; an autograd
result (a non-leaf) is runtime state like any tensor, and moves (rows 10 and 11).

Property 6 of the contract's design: only leaves that require grad keep row 6's treatment. The
``test_property_6_*`` tests check it here; torch's own utilities (prune, weight_norm,
spectral_norm, parametrize, functional_call) are checked against the twin in
``tests/torch/test_torch_utils.py`` and over the module catalogue."""

from __future__ import annotations

import pytest
import torch
import torch.nn.utils.prune
from torch import nn

import autoreg
from tests.support import role


class Holder(autoreg.Module):
    def __init__(self, value: torch.Tensor | None = None) -> None:
        super().__init__()
        if value is not None:
            self.held = value


def test_an_autograd_result_built_in_init_is_carried_never_a_buffer() -> None:
    """Row 10: a buffer with grad history would break state_dict; carried, it still moves."""
    weight = torch.ones(2, requires_grad=True)
    module = Holder(weight * 2)  # a stored activation, a tensor derived from a weight
    assert dict(module.named_buffers()) == {}
    assert role(module, "held") == "carried"
    module.double()
    assert module.held.dtype == torch.float64


def test_property_6_recurrent_state_computed_with_grad_moves_like_a_buffer() -> None:
    """Row 11: ``self.h = self.cell(x, self.h)`` in a training forward stores a non-leaf tensor
    that requires grad; after .double() the next forward runs, as with a hand-registered buffer
    (it failed with "mat1 and mat2 must have the same dtype" when such state stayed behind)."""

    class Recurrent(autoreg.Module):
        def __init__(self) -> None:
            super().__init__()
            self.cell = nn.RNNCell(3, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.h = self.cell(x, getattr(self, "h", None))
            return self.h

    class Twin(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.cell = nn.RNNCell(3, 3)
            self.register_buffer("h", None, persistent=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.h = self.cell(x, self.h)
            return self.h

    torch.manual_seed(0)
    ours = Recurrent()
    torch.manual_seed(0)
    twin = Twin()
    x = torch.ones(2, 3)
    for module in (ours, twin):
        module(x)
        assert module.h.requires_grad
        assert not module.h.is_leaf
        module.double()
        assert module.h.dtype == torch.float64
    assert torch.equal(ours(x.double()), twin(x.double()))


def test_warn_mode_says_an_autograd_result_is_carried() -> None:
    class Loud(autoreg.Module, warn=True):
        pass

    module = Loud()
    with pytest.warns(autoreg.AutoRegisterWarning, match=r"was carried as runtime state"):
        module.h = torch.ones(2, requires_grad=True) * 2
    assert role(module, "h") == "carried"


def test_a_leaf_that_requires_grad_warns_once_and_suggests_a_parameter() -> None:
    with pytest.warns(autoreg.AutoRegisterWarning, match=r"self\.held = nn\.Parameter\(value\)"):
        Holder(torch.ones(2, requires_grad=True))
    # The same class and name again: silent (warnings are errors in this test suite).
    module = Holder(torch.ones(2, requires_grad=True))
    assert "held" in vars(module)
    assert dict(module.named_buffers()) == {}


def test_the_warning_names_class_attribute_and_tensor() -> None:
    class Weighted(autoreg.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scale = torch.ones(3, requires_grad=True)

    with pytest.warns(autoreg.AutoRegisterWarning) as record:
        Weighted()
    message = str(record[0].message)
    assert message.startswith(
        "Weighted.scale = Tensor(shape=(3,), dtype=torch.float32, device='cpu', "
        "requires_grad=True) is a leaf tensor that requires grad"
    )
    assert record[0].filename == __file__


def test_property_6_a_leaf_requiring_grad_at_run_time_is_a_quiet_plain_attribute() -> None:
    """Only construction builds weights: at run time a leaf that requires grad (an input kept for
    attribution, torch.func.functional_call's temporary swap) is nn.Module's plain attribute."""
    module = Holder()
    module.saved = torch.ones(3, requires_grad=True)
    assert role(module, "saved") == "plain"


def test_strict_raises_on_a_leaf_that_requires_grad_built_in_init() -> None:
    class Strict(autoreg.Module, strict=True):
        def __init__(self, value: torch.Tensor) -> None:
            super().__init__()
            self.w = value

    with pytest.raises(autoreg.UnregisteredTensorError, match=r"Strict\.w = .* is a leaf tensor"):
        Strict(torch.ones(1, requires_grad=True))
    with pytest.raises(autoreg.UnregisteredTensorError, match=r"Strict is strict .* 'w' is not"):
        Strict(torch.ones(1, requires_grad=True) * 2)  # not a leaf: an undeclared tensor


def test_plain_silences_the_warning() -> None:
    class Pinned(autoreg.Module):
        trainable: autoreg.Plain

    module = Pinned()
    module.trainable = torch.ones(1, requires_grad=True)  # no warning: it is declared plain
    assert "trainable" in vars(module)


def test_a_carried_name_keeps_moving_whatever_tensor_it_holds() -> None:
    module = autoreg.Module()
    module.state = torch.zeros(2)
    module.state = torch.zeros(2, requires_grad=True) * 1  # an autograd result: still carried
    assert module.double().state.dtype == torch.float64
    module.state = torch.zeros(2, requires_grad=True)  # a weight: left where it is
    assert module.double().state.dtype == torch.float32


def test_a_grad_tensor_assigned_to_a_buffer_stays_a_buffer_as_in_nn_module() -> None:
    class M(autoreg.Module):
        def __init__(self) -> None:
            super().__init__()
            self.table = torch.zeros(2)

    module = M()
    module.table = torch.ones(2, requires_grad=True) * 2
    assert "table" in module._buffers


@pytest.mark.parametrize(
    "apply",
    [
        pytest.param(
            lambda m: torch.nn.utils.prune.l1_unstructured(m, "weight", amount=0.5), id="prune"
        ),
        pytest.param(
            lambda m: torch.nn.utils.weight_norm(m),
            id="weight_norm",
            marks=pytest.mark.filterwarnings("ignore:`torch.nn.utils.weight_norm` is deprecated"),
        ),
        pytest.param(lambda m: torch.nn.utils.spectral_norm(m), id="spectral_norm"),
    ],
)
def test_derived_weights_never_become_buffers(apply) -> None:
    class MyLinear(autoreg.AutoRegisterMixin, nn.Linear):
        pass

    torch.manual_seed(0)
    ours = MyLinear(3, 3)
    torch.manual_seed(0)
    theirs = nn.Linear(3, 3)
    for module in (ours, theirs):
        apply(module)
        module(torch.ones(1, 3))
        with torch.no_grad():
            module.eval()(torch.ones(1, 3))
    assert ours.state_dict().keys() == theirs.state_dict().keys()
    assert dict(ours.named_buffers()).keys() == dict(theirs.named_buffers()).keys()


class _LoggingBase(nn.Module):
    """A framework base with a ``__setattr__`` of its own (the mixin then calls past it)."""

    def __setattr__(self, name: str, value: object) -> None:
        super().__setattr__(name, value)


def _grad_values() -> dict[str, torch.Tensor]:
    return {
        "plain": torch.ones(2),
        "leaf": torch.ones(2, requires_grad=True),
        "result": torch.ones(2, requires_grad=True) * 2,
    }


def _outcome(module: nn.Module, name: str, value: torch.Tensor) -> object:
    """What assigning ``value`` to ``module.name`` did: where it landed, or what was raised."""
    try:
        setattr(module, name, value)
    except Exception as error:  # noqa: BLE001 - the twin's error is the expected outcome
        return type(error), str(error)
    return (
        module._buffers.get(name) is value,
        module._parameters.get(name) is value,
        module.__dict__.get(name) is value,
        name in module._non_persistent_buffers_set,
    )


@pytest.mark.parametrize("base", [nn.Module, _LoggingBase], ids=["module", "base-setattr"])
def test_a_tensor_assigned_to_a_registered_name_lands_as_on_the_twin_whatever_its_grad(
    base: type[nn.Module],
) -> None:
    """Rows 1 to 3 never read whether a tensor requires grad (``situation`` reads it only for a
    name no registry holds): a plain tensor, a leaf requiring grad and an autograd result,
    assigned in turn to a buffer's and a parameter's name, land as on the hand-written twin;
    then a new name still tells them apart (row 6 keeps a leaf requiring grad a plain
    attribute, row 11 carries the rest)."""

    class Twin(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("table", torch.zeros(2), persistent=False)
            self.weight = nn.Parameter(torch.zeros(2))

    class Auto(autoreg.AutoRegisterMixin, base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            self.table = torch.zeros(2)
            self.weight = nn.Parameter(torch.zeros(2))

    twin, auto = Twin(), Auto()
    for name in ("table", "weight"):
        for kind, value in _grad_values().items():
            expected = _outcome(twin, name, value)
            assert _outcome(auto, name, value) == expected, (name, kind)
    for kind, value in _grad_values().items():
        auto.fresh = value
        assert "fresh" not in auto._buffers
        assert (role(auto, "fresh") == "carried") is (kind != "leaf"), kind
        del auto.fresh
