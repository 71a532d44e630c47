"""Copies that bypass autoreg's hooks carry what they carry, and nothing of their original's.

A user's textbook ``__getstate__`` (``return self.__dict__.copy()``) replaces the mixin's, and
``DataParallel`` replicas copy ``__dict__`` directly: whatever autoreg keeps in an instance's
``__dict__`` reaches the copy as the very same object. Nothing of it may lose an entry in place,
so that what one of the two forgets, the other still holds and moves; what one of them carries
afterwards, the other does not. nn.Module's own registries are shared by a shallow copy as they
are for the hand-written twin; autoreg never changes one in place where nn.Module would not
(row 2).
"""

from __future__ import annotations

import copy
import importlib
import pickle
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn
from torch.ao.nn.quantized import Conv1d as QuantizedConv1d

import autoreg
from tests.support import role


class Recurrent(autoreg.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.table = torch.ones(2)  # an auto-registered buffer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.h = self.lin(x).detach()  # carried
        return self.h


class Textbook(Recurrent):
    """The ``__getstate__`` of every tutorial, which replaces the mixin's."""

    def __getstate__(self) -> dict[str, Any]:
        return self.__dict__.copy()


class TextbookLinear(autoreg.AutoRegisterMixin, nn.Linear):
    """A class with a framework base (row 4), with the textbook ``__getstate__``."""

    def __getstate__(self) -> dict[str, Any]:
        return self.__dict__.copy()


def _pickle(module: nn.Module) -> nn.Module:
    copied: nn.Module = pickle.loads(pickle.dumps(module))
    return copied


def _replica(module: nn.Module) -> nn.Module:
    """What ``DataParallel`` makes of the module on each device (torch.nn.parallel.replicate)."""
    replica: nn.Module = module._replicate_for_data_parallel()
    return replica


COPIES: dict[str, Callable[[nn.Module], nn.Module]] = {
    "copy": copy.copy,
    "deepcopy": copy.deepcopy,
    "pickle": _pickle,
    "replica": _replica,
}
ALL_COPIES = pytest.mark.parametrize("clone", COPIES.values(), ids=COPIES.keys())
CLASSES = pytest.mark.parametrize("cls", [Recurrent, Textbook], ids=["mixin's", "textbook"])


@CLASSES
@ALL_COPIES
def test_deleting_a_carried_name_on_a_copy_leaves_the_original_carrying_it(
    cls: type[Recurrent], clone: Callable[[nn.Module], nn.Module]
) -> None:
    """main, textbook copy and replica: the two shared the list of carried names, and the
    original's ``.double()`` skipped its own ``h`` once the copy deleted its ``h``."""
    original = cls()
    original(torch.ones(1, 2))
    copied = clone(original)
    del copied.h
    original.double()
    assert original.h.dtype == torch.float64


@CLASSES
@ALL_COPIES
def test_a_name_a_copy_carries_is_its_own(
    cls: type[Recurrent], clone: Callable[[nn.Module], nn.Module]
) -> None:
    original = cls()
    original(torch.ones(1, 2))
    copied = clone(original)
    copied.extra = torch.zeros(1)  # run time: carried by the copy
    # The original's own value under that name, stored around autoreg: a plain attribute, which
    # nn.Module's .double() leaves (the two may share the list of carried names: the original's
    # roles say what it carries).
    object.__setattr__(original, "extra", torch.zeros(1))
    original.h = None  # the original drops its value; the copy keeps carrying its own
    original.double()
    assert original.extra.dtype == torch.float32
    copied.double()
    assert copied.extra.dtype == copied.h.dtype == torch.float64


@CLASSES
@ALL_COPIES
def test_a_copy_keeps_carrying_what_it_stores_at_run_time(
    cls: type[Recurrent], clone: Callable[[nn.Module], nn.Module]
) -> None:
    copied = clone(cls())
    copied(torch.ones(1, 2))
    assert role(copied, "h") == "carried"
    assert role(copied, "table") == "non-persistent buffer"


@CLASSES
@ALL_COPIES
@pytest.mark.parametrize("pruned", ["copy", "original"])
def test_a_list_of_carried_names_pruned_on_one_of_a_copy_and_its_original_leaves_the_other(
    cls: type[Recurrent], clone: Callable[[nn.Module], nn.Module], pruned: str
) -> None:
    """Fifteen names carried and deleted, the sixteenth carried: the next name carried prunes
    the list (``_carry._pruned``) on the one it is stored on. A textbook copy and a replica
    share the list with their original: neither's pruning, deletion or later names change what
    the other's ``.double()`` converts. (Deleting on a copy was tested, never across pruning.)"""
    original = cls()
    original(torch.ones(1, 2))  # h carried
    for step in range(15):
        setattr(original, f"made_{step}", torch.zeros(1))
        delattr(original, f"made_{step}")
    original.kept = torch.zeros(1)
    copied = clone(original)
    one, other = (copied, original) if pruned == "copy" else (original, copied)
    one.trigger = torch.zeros(1)  # the 17th name: the list is pruned on one
    del one.kept
    del one.h
    other.double()
    assert (other.h.dtype, other.kept.dtype) == (torch.float64, torch.float64)
    assert "trigger" not in vars(other)
    for step in range(40):  # the other makes up names and prunes its own list in turn
        setattr(other, f"later_{step}", torch.zeros(1))
        delattr(other, f"later_{step}")
    del other.kept
    one.h = torch.zeros(1, 2)
    one.double()
    assert (one.trigger.dtype, one.h.dtype) == (torch.float64, torch.float64)
    other.float()
    assert other.h.dtype == torch.float32  # still carried by the other
    assert one.trigger.dtype == torch.float64


@pytest.mark.parametrize(
    "clone", [copy.copy, copy.deepcopy, _pickle], ids=["copy", "deepcopy", "pickle"]
)
def test_a_textbook_copy_of_a_class_with_a_framework_base_keeps_autoregs_roles(
    clone: Callable[[nn.Module], nn.Module],
) -> None:
    """main: without the mixin's marker the state looked like a pickle from before the class used
    autoreg, and every name became the framework's (row 4): the copy no longer carried its
    runtime state. The roles are in the state: it is autoreg's."""
    original = TextbookLinear(2, 2)
    original.h = torch.zeros(2)  # run time, the model's code: carried
    copied = clone(original)
    copied.h = torch.ones(2)
    copied.other = torch.ones(1)
    copied.double()
    assert copied.h.dtype == copied.other.dtype == torch.float64


@ALL_COPIES
def test_a_copy_keeps_autoregs_buffers_as_autoregs(clone: Callable[[nn.Module], nn.Module]) -> None:
    """Row 2 releases a buffer autoreg registered (its role ``BUFFER``) on every copy as on the
    original, a replica included: the roles a replica forgets (``__dict__`` assigned,
    ``_carry.deleted_roles(..., replica=True)``) are never a buffer's of autoreg's, which the
    replica still holds. Catches a replica that forgets them: nn.Module's TypeError, "cannot
    assign 'str' as buffer"."""
    copied = clone(Recurrent())
    copied.table = "released"
    assert copied.table == "released"
    assert "table" not in copied._buffers


def test_row_2_on_a_shallow_copy_leaves_the_originals_buffer() -> None:
    """Row 2 unregisters an auto-registered buffer before a non-tensor is stored. A shallow copy
    shares nn.Module's ``_buffers`` with the original (the twin's copy raises TypeError for the
    same assignment); main deleted the buffer from the dict both share, silently."""
    original = Recurrent()
    shallow = copy.copy(original)
    shallow.table = "released"
    assert shallow.table == "released"
    assert "table" not in shallow._buffers
    assert original._buffers["table"] is original.table
    assert "table" in original._non_persistent_buffers_set
    original.double()
    assert original.table.dtype == torch.float64

    twin = nn.Module()
    twin.register_buffer("table", torch.ones(2), persistent=False)
    with pytest.raises(TypeError, match=r"cannot assign 'str' as buffer 'table'"):
        copy.copy(twin).table = "released"
    assert "table" in twin._buffers


class Reset(autoreg.Module):
    """Copies itself in ``reset_buffers()``, a construction method that begins after
    nn.Module.__init__ ran (the instance's ``__dict__`` holds the mark then)."""

    def __init__(self) -> None:
        super().__init__()
        self.snapshots: list[nn.Module] = []

    def reset_buffers(self) -> None:
        self.table = torch.ones(1)
        self.snapshots.append(copy.copy(self))

    def __getstate__(self) -> dict[str, Any]:
        return self.__dict__.copy()


def test_a_textbook_copy_made_during_construction_is_not_constructing() -> None:
    module = Reset()
    module.reset_buffers()
    snapshot = module.snapshots[0]
    snapshot.later = torch.zeros(1)  # built already: run-time state, carried
    assert role(snapshot, "later") == "carried"


class _UpdatingState(Reset):
    """A ``__setstate__`` of its own that restores the ``__dict__`` whole: the mixin's never
    runs on the copy."""

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)


class _OwnCopy(Reset):
    """``__copy__`` and ``__deepcopy__`` of its own, which copy the ``__dict__``."""

    def __copy__(self) -> _OwnCopy:
        new = type(self).__new__(type(self))
        new.__dict__.update(self.__dict__)
        return new

    def __deepcopy__(self, memo: dict[int, Any]) -> _OwnCopy:
        new = type(self).__new__(type(self))
        new.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return new


class _DeepSnapshots(_OwnCopy):
    def reset_buffers(self) -> None:
        self.table = torch.ones(1)
        self.snapshots.append(copy.deepcopy(self))


class _Pickled(_UpdatingState):
    def reset_buffers(self) -> None:
        self.table = torch.ones(1)
        self.snapshots.append(pickle.loads(pickle.dumps(self)))


@pytest.mark.parametrize(
    "cls",
    [_UpdatingState, _OwnCopy, _DeepSnapshots, _Pickled],
    ids=["own __setstate__", "own __copy__", "own __deepcopy__", "pickle, own __setstate__"],
)
def test_a_copy_of_the_whole_dict_made_during_construction_is_not_constructing(
    cls: type[Reset],
) -> None:
    """Before: the copy held the original's construction mark for good, and every tensor it
    stored at run time became a buffer; a shallow one registered it in the ``_buffers`` it shares
    with its original."""
    module = cls()
    module.reset_buffers()  # a construction method, on the built module
    snapshot = module.snapshots[0]
    snapshot.later = torch.zeros(1)  # built already: run-time state, carried
    assert role(snapshot, "later") == "carried"
    assert dict(snapshot.named_buffers()).keys() == {"table"}
    assert dict(module.named_buffers()).keys() == {"table"}
    assert snapshot.double().later.dtype == torch.float64
    assert role(module, "table") == "non-persistent buffer"  # the original was built


class Declared(autoreg.Module):
    table: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.table = torch.ones(2)


@pytest.mark.parametrize("mode", [{"strict": True}, {"warn": True}], ids=["strict", "warn"])
def test_a_replica_of_a_strict_or_warn_module_is_made_silently(mode: dict[str, bool]) -> None:
    """``DataParallel`` assigns the replica's ``__dict__`` through ``__setattr__``: a name that
    cannot hold a buffer (row 7), neither refused nor warned about, nor carried. main: the
    dict was judged a container, and the check of its tensors raised AttributeError."""
    cls = type("Replicated", (Declared,), {"__module__": __name__}, **mode)
    replica = _replica(cls())  # warnings are errors in this suite
    assert "__dict__" not in vars(replica).get("_autoreg_carrying", {})
    assert replica._buffers["table"] is not None
    replica.double()


class Stores(autoreg.Module):
    """Stores a tensor around ``__setattr__``: never decided, never carried (nor moved by
    nn.Module), also on a copy; and carries another."""

    def __init__(self) -> None:
        super().__init__()
        self.__dict__["raw"] = torch.zeros(2)

    def forward(self) -> None:
        self.state = torch.zeros(2)

    def __getstate__(self) -> dict[str, Any]:
        return self.__dict__.copy()


@pytest.mark.parametrize(
    "clone", [copy.copy, copy.deepcopy, _pickle], ids=["copy", "deepcopy", "pickle"]
)
def test_a_textbook_copy_is_not_adopted_as_a_pickle_from_before_autoreg(
    clone: Callable[[nn.Module], nn.Module],
) -> None:
    """main: the state lacked the mixin's marker, so it was adopted as a pickle of the class
    from before it used autoreg, and the tensor written around ``__setattr__`` was carried."""
    original = Stores()
    original()
    copied = clone(original)
    copied.double()
    assert copied.state.dtype == torch.float64
    assert copied.raw.dtype == torch.float32
    assert role(copied, "raw") == "plain"


class Restored(Recurrent):
    """A ``__setstate__`` that restores the state one attribute at a time (and a generic
    ``__deepcopy__`` written the same way): ``_parameters`` is set before ``_buffers`` and
    ``_modules``, which nn.Module's ``__setattr__`` reads as empty until they come."""

    def __setstate__(self, state: dict[str, Any]) -> None:
        for key, value in state.items():
            setattr(self, key, value)

    def __deepcopy__(self, memo: dict[int, Any]) -> Restored:
        result = type(self).__new__(type(self))
        memo[id(self)] = result
        for key, value in self.__dict__.items():
            setattr(result, key, copy.deepcopy(value, memo))
        return result


class RestoredTwin(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.register_buffer("table", torch.ones(2), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.h = self.lin(x).detach()
        return self.h

    __setstate__ = Restored.__setstate__
    __deepcopy__ = Restored.__deepcopy__


@pytest.mark.parametrize(
    "clone", [copy.copy, copy.deepcopy, _pickle], ids=["copy", "deepcopy", "pickle"]
)
def test_a_state_restored_one_attribute_at_a_time_is_restored_as_on_the_twin(
    clone: Callable[[nn.Module], nn.Module],
) -> None:
    """main: the first name set after ``_parameters`` and before ``_buffers`` raised KeyError
    ('_buffers'), where the twin restores."""
    original, twin = Restored(), RestoredTwin()
    original(torch.ones(2))
    twin(torch.ones(2))
    copied, twin_copy = clone(original), clone(twin)
    # The mixin's __getstate__ marks its state for its own __setstate__, which this one replaces:
    # the mark stays, an attribute no code reads.
    assert [key for key in vars(copied) if key != "_autoreg_pickled"] == list(vars(original))
    assert list(copied.state_dict()) == list(twin_copy.state_dict())
    assert role(copied, "table") == role(twin_copy, "table") == "non-persistent buffer"
    assert role(copied, "h") == "carried"
    copied.double()
    twin_copy.double()
    assert copied.table.dtype == copied.h.dtype == torch.float64
    # A shallow copy shares the registries, on the twin too
    assert original.table.dtype == twin.table.dtype
    assert original.h.dtype == torch.float32


class StrictReplicated(autoreg.Module, strict=True):
    table: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(2))
        self.table = torch.ones(2)


class LinearReplicated(autoreg.AutoRegisterMixin, nn.Linear, strict=True):
    pass


class OverridingReplicated(StrictReplicated):
    """A model class with a ``__setattr__`` of its own, which every assignment passes first."""

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)


class OverridingLinearReplicated(LinearReplicated):
    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)


class _SettingLinear(nn.Linear):
    """A framework base with a ``__setattr__`` of its own, which the mixin passes last."""

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)


class SettingLinearReplicated(autoreg.AutoRegisterMixin, _SettingLinear, strict=True):
    pass


def _replicate(module: nn.Module, monkeypatch: pytest.MonkeyPatch) -> nn.Module:
    """``torch.nn.parallel.replicate`` of ``module`` for one device, without a GPU: its broadcast
    replaced by a copy made the way it makes them (a parameter's copy is an autograd result:
    "parameters in replicas are no longer leaves"); torch assigns each to the replica."""
    source = importlib.import_module("torch.nn.parallel.replicate")

    def broadcast(
        tensors: list[torch.Tensor], devices: list[int], detach: bool = False
    ) -> list[list[torch.Tensor]]:
        return [
            [t * 1 if t.requires_grad and not detach else t.detach().clone() for t in tensors]
            for _ in devices
        ]

    monkeypatch.setattr(source, "_broadcast_coalesced_reshape", broadcast)
    monkeypatch.setattr(source, "_get_device_index", lambda device, optional=False: device)
    (replica,) = source.replicate(module, [0])
    return replica


@pytest.mark.parametrize(
    "mode", [{}, {"warn": True}, {"strict": False}], ids=["strict", "warn", "register"]
)
@pytest.mark.parametrize(
    "base",
    [
        StrictReplicated,
        LinearReplicated,
        OverridingReplicated,
        OverridingLinearReplicated,
        SettingLinearReplicated,
    ],
    ids=["Module", "mixin", "Module-own-setattr", "mixin-own-setattr", "mixin-base-setattr"],
)
def test_the_parameter_copies_replicate_assigns_are_stored_as_on_the_twin(
    base: type[nn.Module], mode: dict[str, bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The copies are torch's assignments to its own replica, which nn.Module stores as plain
    attributes: never refused, warned about nor carried (warnings are errors in this suite).
    main: strict mode raised UnregisteredTensorError, warn mode warned, and the copies were
    carried."""
    cls = type("Replicated", (base,), {"__module__": __name__}, **mode)
    built = issubclass(base, StrictReplicated)
    module = cls() if built else cls(2, 2)
    replica = _replicate(module, monkeypatch)
    assert role(replica, "weight") == "plain"
    assert role(replica, "_former_parameters") == "plain"
    assert replica.weight.grad_fn is not None
    assert role(replica, "table" if built else "bias") in (
        "non-persistent buffer",
        "plain",
    )
    assert role(module, "weight") == "parameter"


class _FrozenDeclared(autoreg.Module):
    """A declared name holding a leaf that requires grad (row 6: a plain attribute, as on
    nn.Module), frozen after construction, as fine-tuning freezes part of a model."""

    scale: autoreg.Persistent

    def __init__(self) -> None:
        super().__init__()
        with warnings.catch_warnings():  # row 6 says, once, why it stays a plain attribute
            warnings.simplefilter("ignore")
            self.scale = torch.ones(2, requires_grad=True)


def _frozen() -> nn.Module:
    module = _FrozenDeclared()
    module.scale.requires_grad_(False)
    return module


class _AroundSetattr(autoreg.Module):
    """A declared name written around ``__setattr__``: never decided, a plain attribute."""

    table: autoreg.Persistent

    def __init__(self) -> None:
        super().__init__()
        object.__setattr__(self, "table", torch.ones(2))


@pytest.mark.parametrize(
    "copier", [copy.copy, copy.deepcopy, _pickle], ids=["copy", "deepcopy", "pickle"]
)
@pytest.mark.parametrize("build", [_frozen, _AroundSetattr], ids=["frozen-leaf", "around-setattr"])
def test_a_copy_holds_a_declared_name_autoreg_left_plain_as_the_original_does(
    copier: Callable[[nn.Module], nn.Module], build: Callable[[], nn.Module]
) -> None:
    """A copy is what its original is, as with nn.Module. Before: unpickling decided each
    declared name afresh: the copy registered it (a state_dict key its original lacks, whose
    checkpoint the original refused), and copy.copy registered it in the original's _buffers,
    which the two share, while its __dict__ kept the old tensor."""
    original = build()
    name = next(iter(type(original).__autoreg__.declarations))
    clone = copier(original)
    for module in (original, clone):
        assert list(module.state_dict()) == []
        assert name not in module._buffers
        assert name in vars(module)
    original.load_state_dict(clone.state_dict())


class _TupleState(nn.Module):
    """A framework base with a state of its own that is no dict (torch's quantized modules keep
    a tuple), restored by its ``__setstate__``."""

    def __init__(self, n: int = 2) -> None:
        super().__init__()
        self.n = n
        self.weight = nn.Parameter(torch.ones(n))

    def __getstate__(self) -> tuple[int, torch.Tensor, bool]:
        return (self.n, self.weight.detach(), self.training)

    def __setstate__(self, state: tuple[int, torch.Tensor, bool]) -> None:
        n, weight, training = state
        nn.Module.__init__(self)
        self.n = n
        self.weight = nn.Parameter(weight)
        self.training = training


class _AutoTupleState(autoreg.AutoRegisterMixin, _TupleState):
    pass


class _AutoQuantizedConv(autoreg.AutoRegisterMixin, QuantizedConv1d):
    pass


@pytest.mark.filterwarnings("ignore::UserWarning")  # torch's quantized modules are deprecated
@pytest.mark.parametrize(
    "copier", [copy.copy, copy.deepcopy, _pickle], ids=["copy", "deepcopy", "pickle"]
)
@pytest.mark.parametrize(
    ("auto_cls", "twin_cls", "args"),
    [(_AutoTupleState, _TupleState, ()), (_AutoQuantizedConv, QuantizedConv1d, (3, 4, 3))],
    ids=["tuple state", "quantized Conv1d"],
)
def test_a_framework_base_whose_state_is_no_dict_copies_as_the_twin(
    copier: Callable[[nn.Module], nn.Module],
    auto_cls: type[nn.Module],
    twin_cls: type[nn.Module],
    args: tuple[int, ...],
) -> None:
    """The mixin before a base that pickles a state of its own that is no dict: the base's state
    passes through untouched, and the copy is what the twin's copy is (autoreg read the state as
    a dict: TypeError; found by 2026-12-07's catalogue round on torch's quantized modules). An
    unpickled quantized module lacks nn.Module's registries, as the twin's does (torch's own)."""

    def outcome(cls: type[nn.Module]) -> object:
        original = cls(*args)
        clone = copier(original)
        assert type(clone) is cls
        try:
            copied = clone.state_dict()
        except AttributeError as error:
            return str(error).replace(cls.__name__, "cls")
        expected = original.state_dict()
        assert copied.keys() == expected.keys()
        for key, value in expected.items():
            if isinstance(value, torch.Tensor):
                plain = value.dequantize() if value.is_quantized else value
                got = copied[key]
                assert torch.equal(got.dequantize() if got.is_quantized else got, plain), key
        return sorted(copied)

    assert outcome(auto_cls) == outcome(twin_cls)
