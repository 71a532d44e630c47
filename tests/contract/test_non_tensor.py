"""Rows 2 and 12: a buffer autoreg registered, or a carried name, that later receives a non-tensor
holds it as a plain attribute."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import autoreg
from tests.support import role


class Model(autoreg.Module):
    def __init__(self) -> None:
        super().__init__()
        self.auto = torch.zeros(2)
        self.register_buffer("explicit", torch.zeros(2))


@pytest.mark.parametrize("value", [3, "text", 1.5], ids=["int", "str", "float"])
def test_an_auto_buffer_becomes_a_plain_attribute(value: object) -> None:
    model = Model()
    model.auto = value
    assert model.auto == value
    assert "auto" not in model._buffers
    assert "auto" not in model._non_persistent_buffers_set
    assert role(model, "auto") == "plain"
    model.double()  # nothing stale left to convert


def test_a_carried_tensor_becomes_a_plain_attribute() -> None:
    model = Model()
    model.state = torch.zeros(1)
    model.state = "reset"
    assert vars(model)["state"] == "reset"
    assert role(model, "state") == "plain"


def test_an_explicit_buffer_keeps_nn_modules_type_error() -> None:
    model = Model()
    with pytest.raises(TypeError, match=r"cannot assign 'int' as buffer 'explicit'"):
        model.explicit = 3
    assert "explicit" in model._buffers


def test_none_keeps_an_auto_buffer_registered_with_its_persistence() -> None:
    class Saved(autoreg.Module, persistent=True):
        def __init__(self) -> None:
            super().__init__()
            self.auto = torch.zeros(2)

    model = Saved()
    model.auto = None
    assert "auto" in model._buffers
    assert model.state_dict() == {}  # None buffers are not saved, as in nn.Module
    model.auto = torch.ones(2)
    assert model.state_dict().keys() == {"auto"}


def test_a_tensor_after_the_plain_value_is_carried_again() -> None:
    model = Model()
    model.auto = 3
    model.auto = torch.zeros(2)  # after construction: runtime state now
    assert role(model, "auto") == "carried"
    assert model.double().auto.dtype == torch.float64


def test_an_nn_buffer_takes_an_auto_buffer_over() -> None:
    """Row 1: an explicit nn.Buffer makes the name nn.Module's: no more row 2 for it."""
    model = Model()
    model.auto = nn.Buffer(torch.ones(2), persistent=True)
    assert role(model, "auto") == "persistent buffer"
    assert model.state_dict().keys() == {"auto", "explicit"}
    with pytest.raises(TypeError, match=r"cannot assign 'int' as buffer 'auto'"):
        model.auto = 3


def test_register_buffer_is_nn_modules_own() -> None:
    """register_buffer is not autoreg's: over an auto buffer it replaces it, with the persistence
    it is given, as nn.Module's would; the name stays autoreg's (row 2 still applies)."""
    model = Model()
    model.register_buffer("auto", torch.ones(2), persistent=True)
    assert model.state_dict().keys() == {"auto", "explicit"}
    model.auto = 3
    assert model.auto == 3
    assert "auto" not in model._buffers


@pytest.mark.parametrize("base", [nn.Module, autoreg.Module], ids=["nn.Module", "autoreg"])
def test_register_buffer_over_a_runtime_attribute_raises_as_in_nn_module(
    base: type[nn.Module],
) -> None:
    """A carried tensor is a plain attribute (row 11): register_buffer refuses the name, exactly
    as it does for nn.Module's plain attribute, and nothing is lost."""
    model = base()
    model.state = torch.zeros(1)
    with pytest.raises(KeyError, match=r"attribute 'state' already exists"):
        model.register_buffer("state", torch.ones(1))
    assert torch.equal(vars(model)["state"], torch.zeros(1))
    assert "state" not in model._buffers


def test_an_nn_buffer_takes_a_carried_name_over() -> None:
    """Row 1 over a carried name: the buffer replaces the runtime tensor."""
    model = Model()
    model.state = torch.zeros(1)
    model.state = nn.Buffer(torch.ones(1))
    assert model.state_dict().keys() == {"explicit", "state"}
    assert "state" not in vars(model)
    assert role(model, "state") == "persistent buffer"
