"""List, tuple and dict attributes of an autoreg module: their tensors move with .to().

Parameters and buffers held in such a container are neither duplicated nor left stale: after
``.to()`` the container holds the module's own (converted) parameter or buffer. The container keeps
its type; deepcopy and pickle keep working.
"""

from __future__ import annotations

import copy
import pickle
from collections import OrderedDict, defaultdict
from collections.abc import Callable
from typing import Any, NamedTuple

import pytest
import torch
from torch import nn

import autoreg
from autoreg._walk import iter_tensors
from tests.support import role


class Pair(NamedTuple):
    first: Any
    second: Any


def everything(value: object) -> list[torch.Tensor]:
    return [tensor for _, tensor in iter_tensors(value)]


CONTAINERS = pytest.mark.parametrize(
    "make",
    [
        lambda: [torch.ones(2), torch.ones(3)],
        lambda: (torch.ones(2), torch.ones(3)),
        lambda: {"k": torch.ones(2), "v": torch.ones(3)},
        lambda: OrderedDict(k=torch.ones(2), v=torch.ones(3)),
        lambda: Pair(torch.ones(2), torch.ones(3)),
        lambda: defaultdict(list, k=[torch.ones(2)]),
        lambda: torch.max(torch.ones(2, 3), dim=0),
        lambda: {"k": [torch.ones(2), (torch.ones(1), {"deep": torch.ones(3)})]},
    ],
    ids=[
        "list",
        "tuple",
        "dict",
        "OrderedDict",
        "namedtuple",
        "defaultdict",
        "structseq",
        "nested",
    ],
)

MOVES = pytest.mark.parametrize(
    ("move", "dtype", "device"),
    [
        (lambda m: m.to(torch.float64), torch.float64, "cpu"),
        (lambda m: m.half(), torch.float16, "cpu"),
        (lambda m: m.to("meta"), None, "meta"),
        (lambda m: m.to_empty(device="meta"), None, "meta"),
    ],
    ids=["to-float64", "half", "to-meta", "to_empty"],
)


class Holder(autoreg.Module):
    def __init__(self, value: object = None) -> None:
        super().__init__()
        self.linear = nn.Linear(2, 2)
        self.table = torch.ones(3)  # a buffer
        if value is not None:
            self.items = value


# Module-level, so that instances pickle.
class Registry(autoreg.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(2, 2)
        self.table = torch.ones(3)
        self.items = [torch.ones(1), self.linear.weight, {"table": self.table}]
        self.pair = Pair(self.table, torch.ones(2))


@CONTAINERS
@MOVES
@pytest.mark.parametrize("when", ["construction", "runtime"])
def test_no_tensor_in_a_container_stays_behind(
    make: Callable[[], object],
    move: Callable[[nn.Module], nn.Module],
    dtype: torch.dtype | None,
    device: str,
    when: str,
) -> None:
    if when == "construction":
        model = Holder(make())
    else:
        model = Holder()
        model.items = make()
    before = type(model.items)
    count = len(everything(model.items))
    move(model)
    tensors = everything(model.items)
    assert len(tensors) == count
    assert {t.device.type for t in tensors} == {device}
    if dtype is not None:
        assert {t.dtype for t in tensors if t.is_floating_point()} == {dtype}
    assert type(model.items) is before


def test_integer_tensors_keep_their_dtype_as_buffers_do() -> None:
    model = Holder([torch.arange(3), torch.ones(1)])
    model.to(torch.float64)
    assert [t.dtype for t in model.items] == [torch.int64, torch.float64]
    model.half()
    assert [t.dtype for t in model.items] == [torch.int64, torch.float16]


def test_lists_and_dicts_are_updated_in_place_and_tuples_rebuilt() -> None:
    inner = [torch.ones(1)]
    table = {"inner": inner}
    model = Holder(table)
    model.pair = Pair(torch.ones(1), inner)
    model.to(torch.float64)
    assert model.items is table
    assert table["inner"] is inner
    assert inner[0].dtype == torch.float64
    assert isinstance(model.pair, Pair)
    assert model.pair.second is inner


def test_a_container_mutated_after_assignment_moves_as_it_is_now() -> None:
    model = Holder([torch.ones(1)])
    model.items.append(torch.ones(2))
    model.items.append({"late": torch.ones(3)})
    model.to(torch.float64)
    assert {t.dtype for t in everything(model.items)} == {torch.float64}


@MOVES
def test_parameters_and_buffers_in_containers_are_the_modules_own_after_to(
    move: Callable[[nn.Module], nn.Module], dtype: torch.dtype | None, device: str
) -> None:
    model = Registry()
    model.child = Holder()
    model.cache = {"child_table": model.child.table, "child_weight": model.child.linear.weight}
    move(model)
    assert model.items[1] is model.linear.weight
    assert model.items[2]["table"] is model.table
    assert model.pair.first is model.table
    assert model.cache["child_weight"] is model.child.linear.weight
    # Another module's buffer: converted by the module that carries it, as a buffer registered
    # in two modules is (a tensor each; contract, "What one .to() does").
    assert model.cache["child_table"].device == model.child.table.device
    assert model.cache["child_table"].dtype == model.child.table.dtype
    assert model.table.device.type == device
    assert len(list(model.buffers())) == 2  # nothing was registered twice


def test_the_same_tensor_in_two_containers_is_converted_once() -> None:
    shared = torch.ones(2)
    model = Holder([shared])
    model.other = {"again": shared}
    model.alias = shared  # carried too
    model.to(torch.float64)
    assert model.items[0] is model.other["again"] is model.alias
    assert model.items[0].dtype == torch.float64


def test_weights_stay_where_they_are_autograd_results_move() -> None:
    """Row 6 inside a container: a leaf that requires grad is a weight, not autoreg's to move;
    an autograd result is runtime state and moves (as it would in a buffer)."""
    weight = torch.ones(2, requires_grad=True)
    activation = weight * 2
    model = Holder([weight, activation, torch.ones(1)])
    model.to(torch.float64)
    assert model.items[0] is weight
    assert model.items[1].dtype == model.items[2].dtype == torch.float64
    assert [f.path for f in autoreg.find_unregistered(model)] == ["items[0]"]


def test_containers_are_not_module_state() -> None:
    model = Registry()
    assert list(model.state_dict()) == ["linear.weight", "linear.bias"]
    assert role(model, "items") == "carried"


@pytest.mark.parametrize(
    "clone",
    [copy.deepcopy, lambda m: pickle.loads(pickle.dumps(m))],
    ids=["deepcopy", "pickle"],
)
def test_deepcopy_and_pickle_keep_containers_carried_and_linked(
    clone: Callable[[nn.Module], nn.Module],
) -> None:
    model = Registry()
    copied = clone(model)
    assert copied.items[1] is copied.linear.weight
    assert copied.items[2]["table"] is copied.table
    assert copied.pair.first is copied.table
    assert copied.items[0] is not model.items[0]
    copied.to(torch.float64)
    assert copied.items[0].dtype == torch.float64
    assert copied.items[2]["table"] is copied.table
    assert model.items[0].dtype == torch.float32


def test_a_container_reassigned_to_a_non_container_is_forgotten() -> None:
    model = Holder([torch.ones(1)])
    model.items = "plain"
    assert role(model, "items") == "plain"
    model.to(torch.float64)
    assert model.items == "plain"
