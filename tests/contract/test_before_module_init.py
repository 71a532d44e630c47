"""Row 10: a tensor assigned before ``nn.Module.__init__`` ran is a buffer as soon as it can be one.

A dataclass (or attrs) module assigns its fields in the ``__init__`` the decorator writes, before
``__post_init__`` calls ``super().__init__()``: nn.Module has no registries yet, so the tensor waits
as a plain attribute. It must be a buffer once ``nn.Module.__init__`` has made them, not only when
construction returns: ``self.to(...)`` or loading the model's own checkpoint at the end of
``__post_init__`` must see it (main: ``.to()`` missed it, ``load_state_dict`` raised).
"""

from __future__ import annotations

import dataclasses
import gc
import weakref
from typing import Any

import attrs
import pytest
import torch
from torch import nn

import autoreg
from tests.support import role

CHECKPOINT = {"table": torch.full((2,), 7.0)}


@dataclasses.dataclass(eq=False)
class Moved(autoreg.Module):
    table: torch.Tensor = dataclasses.field(default_factory=lambda: torch.ones(2))

    def __post_init__(self) -> None:
        super().__init__()
        self.to(torch.float64)  # at the end of construction, as a model may do


@dataclasses.dataclass(eq=False)
class Loaded(autoreg.Module, persistent=True):
    table: torch.Tensor = dataclasses.field(default_factory=lambda: torch.zeros(2))

    def __post_init__(self) -> None:
        super().__init__()
        self.load_state_dict(CHECKPOINT)  # strict: its own checkpoint


@attrs.define(eq=False, slots=False)
class AttrsMoved(autoreg.Module):
    table: torch.Tensor = attrs.field(factory=lambda: torch.ones(2))

    def __attrs_post_init__(self) -> None:
        super().__init__()
        self.to(torch.float64)


class ByHand(autoreg.Module):
    """Assigns before ``super().__init__()``, which nn.Module accepts for a plain tensor."""

    def __init__(self) -> None:
        self.table = torch.ones(2)
        super().__init__()
        self.to(torch.float64)


@pytest.mark.parametrize("cls", [Moved, AttrsMoved, ByHand], ids=["dataclass", "attrs", "by-hand"])
def test_to_at_the_end_of_construction_moves_a_field_assigned_before_module_init(
    cls: type[nn.Module],
) -> None:
    module = cls()
    assert role(module, "table") == "non-persistent buffer"
    assert module.table.dtype == torch.float64  # main: float32, registered after .to()


def test_the_models_own_checkpoint_loads_at_the_end_of_construction() -> None:
    module = Loaded()  # main: load_state_dict raised (missing key 'table')
    assert role(module, "table") == "persistent buffer"
    torch.testing.assert_close(module.table, CHECKPOINT["table"])


@dataclasses.dataclass(eq=False)
class Inspected(autoreg.Module):
    table: torch.Tensor = dataclasses.field(default_factory=lambda: torch.ones(2))

    def __post_init__(self) -> None:
        super().__init__()
        self.seen = [name for name, _ in self.named_buffers()]
        self.attributes = sorted(k for k in vars(self) if not k.startswith("_"))


def test_nothing_of_autoregs_is_left_once_module_init_ran() -> None:
    module = Inspected()
    assert module.seen == ["table"]
    assert "call_super_init" not in module.attributes
    assert "_autoreg_pending" not in vars(module)
    assert type(module).call_super_init is False


class StrayArguments(autoreg.Module):
    def __init__(self) -> None:
        self.table = torch.ones(2)
        super().__init__(3, extra=4)  # nn.Module raises for arguments it does not take


class TwinStrayArguments(nn.Module):
    def __init__(self) -> None:
        self.table = torch.ones(2)
        super().__init__(3, extra=4)


def test_nn_modules_type_error_for_arguments_it_does_not_take_still_raises() -> None:
    with pytest.raises(TypeError):
        TwinStrayArguments()
    with pytest.raises(TypeError):
        StrayArguments()


class Cooperative(nn.Module):
    call_super_init = True  # nn.Module.__init__ calls the next __init__ of the MRO


class After:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.after_called = True


class WithCooperativeBase(autoreg.AutoRegisterMixin, Cooperative, After):
    def __init__(self) -> None:
        self.table = torch.ones(2)
        super().__init__()


def test_a_class_whose_module_init_calls_the_next_init_still_does() -> None:
    module = WithCooperativeBase()
    assert module.after_called
    assert role(module, "table") == "non-persistent buffer"


class NeverInitialized(autoreg.Module):
    def __init__(self) -> None:
        self.table = torch.ones(2)  # and nn.Module.__init__ never runs


def test_without_module_init_the_tensor_stays_plain_and_nothing_is_kept_alive() -> None:
    module = NeverInitialized()
    assert vars(module)["table"].dtype == torch.float32
    assert "call_super_init" not in vars(module)
    ref = weakref.ref(module)
    del module
    gc.collect()
    assert ref() is None


def test_thousands_of_dataclass_modules_are_freed() -> None:
    refs = [weakref.ref(Moved()) for _ in range(2000)]
    gc.collect()
    assert not any(ref() is not None for ref in refs)
