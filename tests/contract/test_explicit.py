"""Rows 1 and 3: Parameters, nn.Buffers, modules and registered names take nn.Module's own path."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch import nn

import autoreg


class Twin(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(2))
        self.child = nn.Linear(1, 1)
        self.register_buffer("explicit", torch.zeros(2))


class AutoTwin(autoreg.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(2))
        self.child = nn.Linear(1, 1)
        self.register_buffer("explicit", torch.zeros(2))


def outcome(cls: type[nn.Module], action: Callable[[nn.Module], None]) -> object:
    """What ``action`` does to a fresh instance: the exception, or the resulting registries."""
    module = cls()
    try:
        action(module)
    except Exception as error:  # noqa: BLE001 - the point is to compare whatever happens
        return type(error), str(error)
    return (
        sorted(module._parameters),
        sorted(module._buffers),
        sorted(module._non_persistent_buffers_set),
        sorted(module._modules),
        sorted(module.state_dict()),
    )


ACTIONS: dict[str, Callable[[nn.Module], None]] = {
    "parameter": lambda m: setattr(m, "p", nn.Parameter(torch.ones(1))),
    "buffer-non-persistent": lambda m: setattr(m, "b", nn.Buffer(torch.ones(1), persistent=False)),
    "buffer-persistent": lambda m: setattr(m, "b", nn.Buffer(torch.ones(1), persistent=True)),
    "module": lambda m: setattr(m, "sub", nn.ReLU()),
    "tensor-to-buffer": lambda m: setattr(m, "explicit", torch.ones(3)),
    "none-to-buffer": lambda m: setattr(m, "explicit", None),
    "int-to-buffer": lambda m: setattr(m, "explicit", 3),
    "tensor-to-parameter": lambda m: setattr(m, "weight", torch.ones(2)),
    "int-to-parameter": lambda m: setattr(m, "weight", 1),
    "none-to-parameter": lambda m: setattr(m, "weight", None),
    "tensor-to-module": lambda m: setattr(m, "child", torch.ones(1)),
    "none-to-module": lambda m: setattr(m, "child", None),
    "parameter-over-buffer": lambda m: setattr(m, "explicit", nn.Parameter(torch.ones(1))),
    "module-over-parameter": lambda m: setattr(m, "weight", nn.ReLU()),
    "buffer-over-plain-attribute": lambda m: [
        setattr(m, "plain", 1),
        setattr(m, "plain", nn.Buffer(torch.ones(1))),
    ],
    "register-buffer-over-buffer": lambda m: m.register_buffer("explicit", torch.ones(1), False),
    "delete-buffer": lambda m: delattr(m, "explicit"),
    "delete-parameter": lambda m: delattr(m, "weight"),
}


@pytest.mark.parametrize("action", ACTIONS.values(), ids=ACTIONS.keys())
def test_same_outcome_as_nn_module(action: Callable[[nn.Module], None]) -> None:
    assert outcome(AutoTwin, action) == outcome(Twin, action)


def test_the_outcomes_differ_between_actions() -> None:
    """The comparison above is not vacuous: the actions do different things."""
    outcomes = {repr(outcome(Twin, action)) for action in ACTIONS.values()}
    assert len(outcomes) > len(ACTIONS) // 2


def test_parameter_before_module_init_raises_as_in_nn_module() -> None:
    class TooEarly(autoreg.Module):
        def __init__(self) -> None:
            self.w = nn.Parameter(torch.zeros(1))
            super().__init__()

    with pytest.raises(AttributeError, match=r"cannot assign parameters before Module.__init__"):
        TooEarly()


@pytest.mark.parametrize(
    "explicit",
    [
        pytest.param(lambda: nn.Parameter(torch.ones(1)), id="parameter"),
        pytest.param(lambda: nn.Buffer(torch.ones(1), persistent=False), id="buffer"),
        pytest.param(nn.ReLU, id="module"),
    ],
)
def test_an_explicit_value_takes_over_a_carried_name(explicit: Callable[[], object]) -> None:
    module = autoreg.Module()
    module.state = torch.zeros(1)  # carried
    module.state = explicit()
    assert "state" not in vars(module)
    registries = (module._parameters, module._buffers, module._modules)
    assert sum("state" in registry for registry in registries) == 1


def test_an_explicit_buffer_is_no_longer_autoregs_to_forget() -> None:
    class M(autoreg.Module):
        def __init__(self) -> None:
            super().__init__()
            self.table = torch.zeros(1)
            self.table = nn.Buffer(torch.ones(1), persistent=True)

    module = M()
    assert module.state_dict().keys() == {"table"}
    with pytest.raises(TypeError, match=r"cannot assign 'int' as buffer 'table'"):
        module.table = 5
