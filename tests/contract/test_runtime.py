"""Row 11: tensors first assigned after construction are carried, never module state."""

from __future__ import annotations

from collections.abc import Callable
from copy import deepcopy

import pytest
import torch
from torch import nn

import autoreg
from autoreg._carry import carried
from tests.support import role


class Recurrent(autoreg.Module):
    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.Linear(3, 3)
        self.state = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            previous = torch.zeros_like(x) if self.state is None else self.state
            self.state = torch.tanh(self.cell(x) + previous)
        return self.state


def stepped() -> Recurrent:
    model = Recurrent()
    model(torch.ones(2, 3))
    return model


def test_a_runtime_tensor_is_carried_not_registered() -> None:
    model = stepped()
    assert "state" in vars(model)  # a plain attribute: read at __dict__ speed
    assert dict(model.named_buffers()) == {}
    assert model.state_dict().keys() == {"cell.weight", "cell.bias"}


MOVES: list[tuple[str, Callable[[nn.Module], nn.Module], torch.dtype, str]] = [
    ("to_float64", lambda m: m.to(torch.float64), torch.float64, "cpu"),
    ("double", lambda m: m.double(), torch.float64, "cpu"),
    ("half", lambda m: m.half(), torch.float16, "cpu"),
    ("bfloat16", lambda m: m.bfloat16(), torch.bfloat16, "cpu"),
    ("to_meta", lambda m: m.to("meta"), torch.float32, "meta"),
    ("to_empty_meta", lambda m: m.to_empty(device="meta"), torch.float32, "meta"),
    ("cpu", lambda m: m.cpu(), torch.float32, "cpu"),
]


@pytest.mark.parametrize(
    ("move", "dtype", "device"), [pytest.param(*m[1:], id=m[0]) for m in MOVES]
)
def test_carried_tensors_move_like_buffers(
    move: Callable[[nn.Module], nn.Module], dtype: torch.dtype, device: str
) -> None:
    model = stepped()
    model.ints = torch.arange(3)  # integer runtime state keeps its dtype, as a buffer would
    model.register_buffer("twin", model.state.clone(), persistent=False)
    move(model)
    assert (model.state.dtype, model.state.device.type) == (dtype, device)
    assert (model.state.dtype, model.state.device) == (model.twin.dtype, model.twin.device)
    assert model.ints.dtype == torch.int64
    assert model.ints.device.type == device


def test_updating_in_every_forward_keeps_it_carried() -> None:
    model = stepped()
    for _ in range(3):
        model(torch.ones(2, 3))
    model.double()
    assert model.state.dtype == torch.float64
    assert model(torch.ones(2, 3, dtype=torch.float64)).dtype == torch.float64


def test_assigned_from_outside_after_construction() -> None:
    model = nn.Sequential(Recurrent())
    model[0].extra = torch.zeros(2)
    model.half()
    assert model[0].extra.dtype == torch.float16
    assert dict(model.named_buffers()) == {}


def test_a_fresh_model_loads_the_state_dict_of_a_used_one() -> None:
    used = stepped()
    fresh = Recurrent()
    assert fresh.load_state_dict(used.state_dict(), strict=True).missing_keys == []
    assert fresh.state is None


def test_none_keeps_a_carried_name_carried() -> None:
    """A state reset (``self.state = None``) keeps the name carried: ``.to()`` passes over the
    None, and the next tensor stored there is carried, as it would be anyway. The mark is what
    compiled code reads (tests/torch/test_compile.py: a reset between compiled calls recompiled).
    Any other value that is not carried (an int here) takes the mark away."""
    model = stepped()
    model.state = None
    assert carried(model, "state")
    clone = deepcopy(model)
    assert carried(clone, "state")
    model.double()
    assert model.state is None
    model(torch.ones(2, 3, dtype=torch.float64))
    assert role(model, "state") == "carried"
    model.state = 3
    assert not carried(model, "state")


def test_deleting_a_carried_tensor_forgets_it() -> None:
    model = stepped()
    del model.state
    assert "state" not in vars(model)
    model.double()  # nothing left to convert, nothing raised
    assert not hasattr(model, "state")


def test_a_carried_name_deleted_and_stored_again_at_run_time_is_carried() -> None:
    """``del`` frees carried state as ``self.state = None`` does: the next tensor stored there is
    carried, whoever stores it (compiled code reads nothing new, test_compile)."""
    model = stepped()
    del model.state
    model.state = torch.ones(3)
    assert role(model, "state") == "carried"
    assert model.double().state.dtype == torch.float64


@pytest.mark.parametrize("emptied", ["None", "del"])
def test_an_nn_buffer_takes_over_a_carried_name_that_holds_nothing(emptied: str) -> None:
    """Row 1 over a carried name gives the name up, then does what nn.Module does with a free
    name: an ``nn.Buffer`` is registered, also when the carried state was reset to None or
    deleted (both keep the mark). (The reference model of test_model_based took None over a
    carried name for a plain attribute, over which nn.Module raises KeyError.)"""
    model = stepped()
    if emptied == "None":
        model.state = None
    else:
        del model.state
    model.state = nn.Buffer(torch.zeros(3))
    assert role(model, "state") == "persistent buffer"
    assert not carried(model, "state")
    assert model.double().state.dtype == torch.float64


class Resettable(autoreg.Module):
    """A construction method (``reset_buffers``) that builds ``state`` again."""

    def __init__(self) -> None:
        super().__init__()
        self.reset_buffers()

    def reset_buffers(self) -> None:
        self.state = torch.zeros(3)


def test_a_carried_name_deleted_then_built_by_a_construction_method_is_a_buffer_only() -> None:
    """Carried, deleted, then assigned by ``reset_buffers()``: a buffer, converted once by
    ``.to()`` (as the twin's), and no longer carried (the audits read that mark)."""
    model = Resettable()
    del model.state  # the buffer
    model.state = torch.zeros(3)  # run time: carried
    del model.state
    model.reset_buffers()
    assert role(model, "state") == "non-persistent buffer"
    assert not carried(model, "state")
    seen: list[int] = []

    def record(tensor: torch.Tensor) -> torch.Tensor:
        seen.append(id(tensor))
        return tensor

    state = model.state
    model._apply(record)
    assert seen.count(id(state)) == 1


def test_a_carried_name_deleted_then_registered_by_hand_is_a_buffer_only() -> None:
    """``del self.state; self.register_buffer("state", t)``: nn.Module's buffer, converted once,
    and no longer carried for the audits, though autoreg kept the name's mark through the
    ``del`` (so that the next tensor stored there is carried without a new mark)."""
    model = stepped()
    del model.state
    model.register_buffer("state", torch.zeros(3), persistent=False)
    assert role(model, "state") == "non-persistent buffer"
    assert not carried(model, "state")
    model.double()
    assert model.state.dtype == torch.float64
    model.state = torch.ones(3)  # an update of the buffer (row 3)
    assert role(model, "state") == "non-persistent buffer"
    assert model.float().state.dtype == torch.float32


def test_the_same_tensor_carried_twice_is_converted_once() -> None:
    model = stepped()
    model.alias = model.state
    model.double()
    assert model.alias is model.state


def test_a_carried_alias_of_a_buffer_follows_the_buffer() -> None:
    class WithBuffer(autoreg.Module):
        def __init__(self) -> None:
            super().__init__()
            self.table = torch.zeros(3)

    model = WithBuffer()
    model.view_of_table = model.table  # runtime alias of a registered buffer
    model.double()
    assert model.view_of_table is model.table
    assert model.table.dtype == torch.float64


def test_a_carried_alias_of_a_tensor_registered_as_two_buffers_follows_the_first() -> None:
    """nn.Module converts a tensor registered as two buffers into two tensors; a carried alias of
    it becomes the one registered first (the contract says which)."""

    class TwoNames(autoreg.Module):
        def __init__(self) -> None:
            super().__init__()
            self.first = torch.zeros(3)
            self.second = self.first  # the same tensor, a second buffer

    model = TwoNames()
    model.alias = model.first  # run time: carried
    model.double()
    assert model.first is not model.second
    assert model.alias is model.first


def test_nn_module_leaves_the_runtime_tensor_behind() -> None:
    """The bug, on the nn.Module twin, so that the tests above are known to be able to fail."""

    class PlainRecurrent(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.state = torch.zeros(3)

    model = PlainRecurrent().double()
    assert model.state.dtype == torch.float32


def test_a_carried_alias_of_another_modules_buffer_is_converted_as_a_buffer_registered_there() -> (
    None
):
    """Row 11, across modules: each module converts what it carries where nn.Module converts its
    buffers (a child before its parent, a sibling in order), so a tensor held by two modules is
    converted by each, as a buffer registered in both is on nn.Module: equal values, a tensor
    each, whatever the order. (Identity across modules used to be kept under an autoreg root
    only: contract, "What one .to() does".)"""

    class Child(autoreg.Module):
        pass

    class Parent(autoreg.Module):
        def __init__(self) -> None:
            super().__init__()
            self.table = torch.zeros(3)
            self.child = Child()
            self.sibling = Child()

    model = Parent()
    model.child.view = model.table
    model.sibling.rows = [model.table, model.child.view]
    model.double()
    assert model.table.dtype == model.child.view.dtype == torch.float64
    assert model.sibling.rows[0] is model.sibling.rows[1]  # one tensor within the sibling
    for copy in (model.child.view, model.sibling.rows[0]):
        assert copy is not model.table
        assert copy.dtype == torch.float64
        assert torch.equal(copy, model.table)


class Encoder(nn.Module):
    """A plain torch module with a buffer, registered before the autoreg module that holds it."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("table", torch.zeros(3))


class AutoEncoder(autoreg.Module):
    def __init__(self) -> None:
        super().__init__()
        self.table = torch.zeros(3)  # a buffer


@pytest.mark.parametrize("encoder", [Encoder, AutoEncoder], ids=["plain module", "autoreg module"])
def test_a_buffer_converted_before_the_module_that_carries_it_is_converted_again_there(
    encoder: Callable[[], nn.Module],
) -> None:
    """The sibling registered first is converted before the decoder's own _apply runs; the
    decoder then converts what it carries, the old table, as a buffer of its own would be."""

    class Decoder(autoreg.Module):
        pass

    class Model(autoreg.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = encoder()
            self.decoder = Decoder()

    model = Model()
    model.decoder.cache = model.encoder.table  # run time: carried by the decoder
    model.double()
    assert model.encoder.table.dtype == model.decoder.cache.dtype == torch.float64
    assert torch.equal(model.decoder.cache, model.encoder.table)


def test_the_conversion_passed_down_reads_as_the_callers_own() -> None:
    """While carried tensors are converted with the tree, an _apply override further down sees a
    function that reads as the one .half() made (torchmetrics' Metric._apply tests str(fn))."""
    seen: list[str] = []

    class Inspecting(nn.Module):
        def _apply(self, fn, recurse=True):  # type: ignore[no-untyped-def]
            seen.append(f"{fn} {fn.__qualname__}")
            return super()._apply(fn, recurse)

    class Parent(autoreg.Module):
        def __init__(self) -> None:
            super().__init__()
            self.child = Inspecting()

    model = Parent()
    model.state = torch.zeros(2)  # carried: the tree's .to() converts it along
    model.half()
    assert len(seen) == 1
    assert "Module.half.<locals>.<lambda>" in seen[0]
    assert model.state.dtype == torch.float16


class _Elsewhere(nn.Module):
    """A framework base whose ``__setattr__`` keeps None in a side dict, not in ``__dict__``."""

    def __setattr__(self, name: str, value: object) -> None:
        if value is None and name in self.__dict__:
            del self.__dict__[name]
            self.__dict__.setdefault("_side", {})[name] = None
            return
        super().__setattr__(name, value)


class _ElsewhereCell(autoreg.AutoRegisterMixin, _Elsewhere):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.state = x * 2
        return x


def test_none_a_base_keeps_elsewhere_takes_the_mark_away() -> None:
    """The mark stays only where the None landed in ``__dict__`` under the name: a base that put
    it elsewhere left nothing there for ``.to()`` or compiled code to read as carried."""
    cell = _ElsewhereCell()
    cell(torch.ones(2))
    assert carried(cell, "state")
    cell.state = None
    assert "state" not in vars(cell)
    assert not carried(cell, "state")
    cell.double()  # nothing carried, nothing raised
    cell(torch.ones(2, dtype=torch.float64))
    assert carried(cell, "state")
    assert cell.state.dtype == torch.float64


def test_a_reset_state_under_a_plain_root_is_carried_again() -> None:
    """The twin's behaviour under nn.Sequential: after a reset and a move, the next state is
    stored in the new dtype and moves with the next .to()."""
    model = nn.Sequential(stepped())
    model[0].state = None
    model.double()
    model[0](torch.ones(2, 3, dtype=torch.float64))
    model.float()
    assert model[0].state.dtype == torch.float32
