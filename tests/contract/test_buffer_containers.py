"""BufferList and BufferDict: containers whose tensors are buffers - they move and serialise."""

from __future__ import annotations

import copy
import pickle
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torch.nn.modules.module import register_module_buffer_registration_hook

import autoreg
from autoreg import BufferKeyError, BufferTypeError


def ones(*shape: int) -> torch.Tensor:
    return torch.ones(*shape)


class InAutoreg(autoreg.Module):
    def __init__(self, persistent: bool = False) -> None:
        super().__init__()
        self.anchors = autoreg.BufferList([ones(1), ones(2)], persistent=persistent)
        self.tables = autoreg.BufferDict({"sin": ones(3), "cos": ones(4)}, persistent=persistent)


class InPlain(nn.Module):
    def __init__(self, persistent: bool = False) -> None:
        super().__init__()
        self.anchors = autoreg.BufferList([ones(1), ones(2)], persistent=persistent)
        self.tables = autoreg.BufferDict({"sin": ones(3), "cos": ones(4)}, persistent=persistent)


HOSTS = pytest.mark.parametrize("host", [InAutoreg, InPlain], ids=["autoreg", "nn.Module"])


# --- BufferList as a list --------------------------------------------------------------------


def test_a_buffer_list_reads_like_a_list() -> None:
    a, b, c = ones(1), ones(2), ones(3)
    buffers = autoreg.BufferList([a, b, c])
    assert len(buffers) == 3
    assert list(buffers) == [a, b, c]
    assert buffers[0] is a
    assert buffers[-1] is c
    sliced = buffers[1:]
    assert isinstance(sliced, autoreg.BufferList)
    assert list(sliced) == [b, c]
    assert list(buffers._buffers) == ["0", "1", "2"]


def test_a_buffer_list_edits_like_a_list() -> None:
    a, b, c, d = ones(1), ones(2), ones(3), ones(4)
    buffers = autoreg.BufferList()
    assert buffers.append(a) is buffers
    assert buffers.extend([b, c]) is buffers
    buffers.insert(1, d)
    assert list(buffers) == [a, d, b, c]
    assert buffers.pop() is c
    assert buffers.pop(0) is a
    buffers[0] = c
    assert list(buffers) == [c, b]
    buffers += [a]
    del buffers[1]
    assert list(buffers) == [c, a]
    del buffers[:]
    assert len(buffers) == 0
    assert buffers._buffers == {}


@st.composite
def list_operations(draw: st.DrawFn) -> list[tuple[str, int]]:
    names = ["append", "insert", "pop", "set", "del", "del-slice"]
    return draw(st.lists(st.tuples(st.sampled_from(names), st.integers(-4, 4)), max_size=12))


@settings(max_examples=60, deadline=None)
@given(list_operations())
def test_a_buffer_list_behaves_as_a_python_list_of_the_same_tensors(
    operations: list[tuple[str, int]],
) -> None:
    buffers, reference = autoreg.BufferList(persistent=True), []
    for operation, index in operations:
        new = torch.full((1,), float(index))
        for target in (buffers, reference):
            try:
                if operation == "append":
                    target.append(new)
                elif operation == "insert":
                    target.insert(index, new)
                elif operation == "pop":
                    target.pop(index)
                elif operation == "set":
                    target[index] = new
                elif operation == "del":
                    del target[index]
                else:
                    del target[index:]
            except IndexError:
                if target is buffers:
                    with pytest.raises(IndexError):
                        reference.pop(index) if operation == "pop" else reference[index]
                break
        assert [id(t) for t in buffers] == [id(t) for t in reference]
        assert list(buffers.state_dict()) == [str(i) for i in range(len(reference))]


@pytest.mark.parametrize(
    ("operation", "error", "message"),
    [
        (lambda b: b[2], IndexError, r"^BufferList index 2 is out of range \(2 entries\)$"),
        (lambda b: b.__setitem__(-3, ones(1)), IndexError, "index -3 is out of range"),
        (
            lambda b: b.append(3),
            BufferTypeError,
            r"^cannot put 'int' into BufferList at index 2: a BufferList holds tensors only\.\n"
            r"Use nn.ModuleList / nn.ModuleDict for modules; keep other values in a plain "
            r"attribute\.$",
        ),
        (lambda b: b.append(None), BufferTypeError, "cannot put 'NoneType' into BufferList"),
        (
            lambda b: b.append(nn.Linear(1, 1)),
            BufferTypeError,
            "Use nn.ModuleList / nn.ModuleDict for modules",
        ),
        (
            lambda b: b.append(nn.Parameter(ones(1))),
            BufferTypeError,
            r"it is an nn.Parameter, and a buffer is not trained.\nUse nn.ParameterList",
        ),
        (
            lambda b: b.append(nn.Buffer(ones(1))),
            BufferTypeError,
            r"^cannot put nn.Buffer\(..., persistent=True\) into BufferList at index 2: this "
            r"BufferList was created with persistent=False, which applies to every entry\.\n"
            r"Put the plain tensor, or create the container with "
            r"BufferList\(..., persistent=True\)\.$",
        ),
        (
            lambda b: b.extend(ones(1, 2)),
            BufferTypeError,
            r"^BufferList.extend\(\) takes an iterable of tensors, got Tensor\(shape=\(1, 2\), "
            r"dtype=torch.float32, device='cpu'\)\.\nTo add one tensor, use "
            r"BufferList.append\(tensor\)\.$",
        ),
        (lambda b: b.extend(5), BufferTypeError, r"takes an iterable of tensors, got 'int'"),
    ],
    ids=[
        "index",
        "set-index",
        "int",
        "None",
        "module",
        "parameter",
        "buffer-persistence",
        "extend-tensor",
        "extend-int",
    ],
)
def test_a_buffer_list_refuses_what_it_cannot_hold(
    operation: Callable[[autoreg.BufferList], Any], error: type[Exception], message: str
) -> None:
    buffers = autoreg.BufferList([ones(1), ones(2)])
    with pytest.raises(error, match=message) as caught:
        operation(buffers)
    if error is BufferTypeError:
        assert isinstance(caught.value, TypeError)
        assert isinstance(caught.value, autoreg.AutoRegisterError)
    assert len(buffers) == 2


def test_an_nn_buffer_of_the_same_persistence_is_accepted() -> None:
    buffers = autoreg.BufferList([nn.Buffer(ones(1), persistent=False)])
    assert len(buffers) == 1


# --- BufferDict as a dict --------------------------------------------------------------------


def test_a_buffer_dict_reads_and_edits_like_a_dict() -> None:
    a, b, c = ones(1), ones(2), ones(3)
    buffers = autoreg.BufferDict({"b": b, "a": a})
    assert list(buffers) == ["b", "a"]  # insertion order, not sorted
    assert buffers["a"] is a
    assert "a" in buffers
    assert "z" not in buffers
    assert len(buffers) == 2
    buffers["c"] = c
    assert list(buffers.keys()) == ["b", "a", "c"]
    assert list(buffers.values()) == [b, a, c]
    assert list(buffers.items()) == [("b", b), ("a", a), ("c", c)]
    assert buffers.get("a") is a
    assert buffers.get("z") is None
    assert buffers.get("z", c) is c
    buffers["b"] = c  # replacing keeps the position
    assert list(buffers) == ["b", "a", "c"]
    assert buffers.pop("b") is c
    del buffers["a"]
    assert list(buffers) == ["c"]
    buffers.clear()
    assert len(buffers) == 0


@pytest.mark.parametrize(
    "source",
    [
        lambda a, b: {"x": a, "y": b},
        lambda a, b: [("x", a), ("y", b)],
        lambda a, b: OrderedDict(x=a, y=b),
        lambda a, b: autoreg.BufferDict({"x": a, "y": b}),
    ],
    ids=["dict", "pairs", "OrderedDict", "BufferDict"],
)
def test_update_takes_what_dict_update_takes_and_keeps_its_order(source: Any) -> None:
    a, b, c = ones(1), ones(2), ones(3)
    buffers = autoreg.BufferDict()
    buffers.update(source(a, b), z=c)
    assert list(buffers.items()) == [("x", a), ("y", b), ("z", c)]


def test_copy_holds_the_same_tensors_with_the_same_persistence() -> None:
    buffers = autoreg.BufferDict({"x": ones(1)}, persistent=True)
    clone = buffers.copy()
    assert clone is not buffers
    assert clone["x"] is buffers["x"]
    assert clone.persistent is True


def test_a_missing_key_raises_key_error() -> None:
    buffers = autoreg.BufferDict()
    with pytest.raises(KeyError, match="'z'"):
        buffers["z"]
    with pytest.raises(KeyError, match="'z'"):
        del buffers["z"]
    with pytest.raises(KeyError, match="'z'"):
        buffers.pop("z")


@pytest.mark.parametrize(
    ("key", "error", "message"),
    [
        (
            3,
            BufferTypeError,
            r"^BufferDict keys are strings \(each names a buffer in state_dict\), got 3 of type "
            r"'int'. Use str\(key\).$",
        ),
        ("", BufferKeyError, r"^BufferDict key '' cannot name a buffer: '' is empty or dotted"),
        ("a.b", BufferKeyError, r"'a.b' contains a '.'\.\nUse another key\.$"),
        (
            "keys",
            BufferKeyError,
            r"^BufferDict key 'keys' cannot name a buffer: 'keys' is defined on the class \(a "
            r"class-level function\) and hides any buffer of that name\.\nUse another key\.$",
        ),
        ("persistent", BufferKeyError, r"a class-level property"),
        ("training", BufferKeyError, "is one of nn.Module's internal attributes"),
        ("_autoreg_persistent", BufferKeyError, "is one of nn.Module's internal attributes"),
    ],
    ids=["int", "empty", "dotted", "method", "property", "internal", "autoreg-internal"],
)
def test_a_buffer_dict_refuses_keys_that_cannot_name_a_buffer(
    key: Any, error: type[Exception], message: str
) -> None:
    buffers = autoreg.BufferDict()
    with pytest.raises(error, match=message) as caught:
        buffers[key] = ones(1)
    builtin = TypeError if error is BufferTypeError else KeyError
    assert isinstance(caught.value, builtin)
    assert len(buffers) == 0


def test_a_buffer_dict_refuses_values_it_cannot_hold() -> None:
    buffers = autoreg.BufferDict()
    with pytest.raises(BufferTypeError, match=r"^cannot put 'int' into BufferDict at key 'x': "):
        buffers["x"] = 3  # type: ignore[assignment]


# --- buffers that move and serialise ------------------------------------------------------


@pytest.mark.parametrize("persistent", [False, True], ids=["non-persistent", "persistent"])
def test_persistence_applies_to_every_entry_and_is_non_persistent_by_default(
    persistent: bool,
) -> None:
    default = autoreg.BufferList([ones(1)])
    assert default.persistent is False
    assert autoreg.BufferDict().persistent is False
    buffers = autoreg.BufferList([ones(1)], persistent=persistent)
    buffers.append(ones(2))
    buffers.insert(0, ones(3))
    table = autoreg.BufferDict({"x": ones(1)}, persistent=persistent)
    table["y"] = ones(2)
    expected_list = ["0", "1", "2"] if persistent else []
    assert list(buffers.state_dict()) == expected_list
    assert list(table.state_dict()) == (["x", "y"] if persistent else [])


@HOSTS
@pytest.mark.parametrize(
    "move",
    [
        lambda m: m.to(torch.float64),
        lambda m: m.double(),
        lambda m: m.half(),
        lambda m: m.to("meta"),
    ],
    ids=["to-float64", "double", "half", "to-meta"],
)
def test_entries_move_with_the_host_and_reads_return_the_moved_buffer(
    host: type[nn.Module], move: Callable[[nn.Module], nn.Module]
) -> None:
    model = host()
    move(model)
    expected = next(iter(model.buffers()))
    entries = [*model.anchors, *model.tables.values(), model.anchors[1], model.tables["cos"]]
    assert {(t.dtype, t.device) for t in entries} == {(expected.dtype, expected.device)}
    assert model.anchors[0] is model.anchors._buffers["0"]
    assert autoreg.find_unregistered(model) == []


@HOSTS
def test_state_dict_round_trips_into_a_fresh_instance(host: type[nn.Module]) -> None:
    saved = host(persistent=True)
    with torch.no_grad():
        saved.anchors[1].fill_(7.0)
        saved.tables["cos"].fill_(5.0)
    state = saved.state_dict()
    assert list(state) == ["anchors.0", "anchors.1", "tables.sin", "tables.cos"]
    fresh = host(persistent=True)
    fresh.load_state_dict(state)
    assert torch.equal(fresh.anchors[1], torch.full((2,), 7.0))
    assert torch.equal(fresh.tables["cos"], torch.full((4,), 5.0))


@HOSTS
def test_non_persistent_entries_leave_the_checkpoint_as_a_plain_list_did(
    host: type[nn.Module],
) -> None:
    assert list(host().state_dict()) == []
    host().load_state_dict({}, strict=True)


@HOSTS
@pytest.mark.parametrize(
    "clone",
    [copy.deepcopy, lambda m: pickle.loads(pickle.dumps(m))],
    ids=["deepcopy", "pickle"],
)
def test_they_survive_deepcopy_and_pickle(
    host: type[nn.Module], clone: Callable[[nn.Module], nn.Module]
) -> None:
    model = host(persistent=True)
    copied = clone(model)
    assert copied.anchors is not model.anchors
    assert [torch.equal(a, b) for a, b in zip(copied.anchors, model.anchors, strict=True)] == [
        True,
        True,
    ]
    assert list(copied.tables) == ["sin", "cos"]
    assert copied.tables.persistent is True
    copied.anchors.append(ones(9))
    assert list(copied.state_dict())[:3] == ["anchors.0", "anchors.1", "anchors.2"]
    copied.to(torch.float64)
    assert copied.tables["sin"].dtype == torch.float64
    assert model.tables["sin"].dtype == torch.float32


@pytest.fixture
def registered_names() -> Iterator[list[str]]:
    names: list[str] = []

    def hook(module: nn.Module, name: str, tensor: torch.Tensor | None) -> torch.Tensor | None:
        names.append(f"{type(module).__name__}.{name}")
        return None

    handle = register_module_buffer_registration_hook(hook)
    yield names
    handle.remove()


def test_each_new_tensor_goes_through_register_buffer(registered_names: list[str]) -> None:
    buffers = autoreg.BufferList([ones(1)])
    buffers.insert(0, ones(2))
    table = autoreg.BufferDict({"x": ones(1)})
    table.update(y=ones(2))
    assert registered_names == ["BufferList.0", "BufferList.1", "BufferDict.x", "BufferDict.y"]


def test_the_repr_lists_the_entries() -> None:
    model = InPlain()
    assert repr(model) == (
        "InPlain(\n"
        "  (anchors): BufferList(\n"
        "    persistent=False\n"
        "    (0): Tensor(shape=(1,), dtype=torch.float32, device='cpu')\n"
        "    (1): Tensor(shape=(2,), dtype=torch.float32, device='cpu')\n"
        "  )\n"
        "  (tables): BufferDict(\n"
        "    persistent=False\n"
        "    (sin): Tensor(shape=(3,), dtype=torch.float32, device='cpu')\n"
        "    (cos): Tensor(shape=(4,), dtype=torch.float32, device='cpu')\n"
        "  )\n"
        ")"
    )
    assert "0" not in dir(model.anchors)
