"""Rule 8: a name autoreg owns that later receives a non-tensor becomes a plain attribute."""

from __future__ import annotations

import pytest
import torch

import autoreg


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
    assert "auto" not in vars(model)["_autoreg_owned"]
    model.double()  # nothing stale left to convert


def test_a_carried_tensor_becomes_a_plain_attribute() -> None:
    model = Model()
    model.state = torch.zeros(1)
    model.state = "reset"
    assert vars(model)["state"] == "reset"
    assert "state" not in vars(model)["_autoreg_owned"]


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
    assert vars(model)["_autoreg_owned"]["auto"] == "carried"
    assert model.double().auto.dtype == torch.float64


def test_register_buffer_makes_an_auto_buffer_explicit() -> None:
    model = Model()
    model.register_buffer("auto", torch.ones(2), persistent=False)
    assert "auto" not in vars(model)["_autoreg_owned"]
    with pytest.raises(TypeError, match=r"cannot assign 'int' as buffer 'auto'"):
        model.auto = 3


def test_register_buffer_takes_over_a_carried_name() -> None:
    model = Model()
    model.state = torch.zeros(1)
    model.register_buffer("state", torch.ones(1))
    assert model.state_dict().keys() == {"explicit", "state"}
    assert "state" not in vars(model)


def test_a_failed_register_buffer_leaves_the_carried_tensor_in_place() -> None:
    model = Model()
    model.state = torch.zeros(1)
    with pytest.raises(TypeError, match=r"cannot assign 'int' object to buffer 'state'"):
        model.register_buffer("state", 3)  # type: ignore[arg-type]
    assert vars(model)["_autoreg_owned"]["state"] == "carried"
    assert torch.equal(vars(model)["state"], torch.zeros(1))
