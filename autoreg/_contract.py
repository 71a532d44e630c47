"""The assignment contract: what ``self.name = value`` does, as one pure decision.

``situation`` reads the facts of one assignment - what the value is, what the name holds, whose the
name is, whether the module is being built - into a ``Situation``. ``classify(record, situation)``
returns the ``Decision``: the row of the contract table that applies, what to do, whether ``.to()``
converts the value afterwards, and what strict and warn mode have to say. ``classify`` reads
nothing else, so its decisions can be kept per class (``ClassRecord.decide``): an assignment either
replays a decision ``classify`` made for the same situation or asks it.

The rows, in the order they are tried (docs, "The contract"):

1. an ``nn.Parameter``, ``nn.Buffer`` or module: nn.Module's; a buffer autoreg registered there is
   no longer autoreg's.
2. a value nn.Module refuses for a buffer autoreg registered: the buffer is unregistered and the
   value assigned afresh.
3. a name that holds a parameter, buffer or submodule: nn.Module's.
4. a name the code of a framework base assigned first: nn.Module's, for good.
5. a name declared ``autoreg.Plain``: a plain attribute.
6. a leaf tensor that requires grad, or the weight prune / weight_norm / spectral_norm derive: a
   plain attribute.
7. a name that cannot hold a buffer (defined on the class, nn.Module internals, '' or dotted):
   nn.Module's; a data descriptor (a property) decides what assigning means.
8. a list, tuple or dict: carried.
9. a declared tensor: a buffer.
10. a tensor assigned while the module is built: a buffer (an autograd result: carried).
11. a tensor assigned at any other time: carried.
12. anything else: nn.Module's.

"Carried" is not a record: a carried value is a plain attribute, and ``.to()`` converts each value
in an autoreg module's ``__dict__`` whose decision, were it assigned now, ``moves`` (``_carry``).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Any, Final, NamedTuple

import torch
from torch import nn

from ._declarations import Declaration
from ._record import ClassRecord
from ._state import BUFFER, CONSTRUCTING, FRAMEWORK, MODULE_INTERNALS
from ._walk import CONTAINERS

__all__ = [
    "TENSORS",
    "Action",
    "Concern",
    "Decision",
    "Kind",
    "Registry",
    "Situation",
    "classify",
    "decide",
    "kind_of",
    "situation",
    "slot_kind",
    "why_no_buffer_slot",
]


class Kind(enum.IntEnum):  # IntEnum: hashed in C, situations are dictionary keys
    """What the value is, as far as the contract cares."""

    EXPLICIT = 1  # an nn.Parameter, nn.Buffer or module
    TENSOR = 2  # a tensor that does not require grad
    GRAD_LEAF = 3  # a leaf tensor that requires grad: a weight
    GRAD_RESULT = 4  # an autograd result: a non-leaf tensor that requires grad
    CONTAINER = 5  # a list, tuple or dict
    NONE = 6  # None
    TRACED = 7  # a value with __torch_function__ (a torch.fx Proxy)
    OTHER = 8  # any other value


TENSORS: Final = frozenset({Kind.TENSOR, Kind.GRAD_LEAF, Kind.GRAD_RESULT})
# What nn.Module refuses for a buffer: not a tensor, not None, no __torch_function__ (a torch.fx
# Proxy while symbolic_trace runs forward).
_REFUSED_BY_BUFFERS: Final = frozenset({Kind.CONTAINER, Kind.OTHER})


class Registry(enum.IntEnum):
    """Where nn.Module keeps the name (None: nowhere)."""

    PARAMETER = 1  # _parameters
    BUFFER = 2  # _buffers
    MODULE = 3  # _modules
    UNBUILT = 4  # nn.Module.__init__ has not run


class Situation(NamedTuple):
    """Everything ``classify`` reads about one assignment."""

    name: str
    kind: Kind
    role: str | None  # OWNED[name]
    registry: Registry | None
    constructing: bool
    # For a tensor or container under a name nn.Module does not register (else None / False):
    slot: str | None  # why the name cannot hold a buffer (``slot_kind``)
    derived: bool  # the weight prune / weight_norm / spectral_norm derive from parameters


class Action(enum.Enum):
    EXPLICIT = "nn.Module's behaviour; the name is no longer autoreg's"
    RELEASE = "the buffer is unregistered, then the value is assigned afresh"
    STORE = "stored as nn.Module stores it"
    REGISTER = "registered as a buffer"


class Concern(enum.Enum):
    """What strict mode refuses and warn mode warns about."""

    UNDECLARED = "undeclared"
    CONTAINER = "container"
    GRAD_LEAF = "grad"
    NO_SLOT = "slot"


class Decision(NamedTuple):
    row: int
    action: Action
    moves: bool = False  # .to() converts the value while it stays there (rows 8 to 11)
    concern: Concern | None = None
    persistent: bool = False


# The decisions there are, made once: classify returns one of these.
_EXPLICIT: Final = Decision(1, Action.EXPLICIT)
_RELEASE: Final = Decision(2, Action.RELEASE)
_REGISTERED: Final = Decision(3, Action.STORE)
_FRAMEWORK: Final = Decision(4, Action.STORE)
_PLAIN: Final = Decision(5, Action.STORE)
_GRAD: Final = {c: Decision(6, Action.STORE, concern=c) for c in (Concern.GRAD_LEAF, None)}
_NO_SLOT: Final = {c: Decision(7, Action.STORE, concern=c) for c in (Concern.NO_SLOT, None)}
_CONTAINER: Final = Decision(8, Action.STORE, True, Concern.CONTAINER)
_DECLARED: Final = {p: Decision(9, Action.REGISTER, True, persistent=p) for p in (True, False)}
_CONSTRUCTION: Final = {
    p: Decision(10, Action.REGISTER, True, Concern.UNDECLARED, p) for p in (True, False)
}
_CONSTRUCTION_RESULT: Final = Decision(10, Action.STORE, True, Concern.UNDECLARED)
_RUNTIME: Final = Decision(11, Action.STORE, True, Concern.UNDECLARED)
_OTHER: Final = Decision(12, Action.STORE)


def classify(record: ClassRecord, s: Situation) -> Decision:
    """The contract row for the assignment described by ``s``, on an instance of ``record``'s
    class. Pure: the same record and situation always give the same decision."""
    if s.kind is Kind.EXPLICIT:
        return _EXPLICIT
    if s.role == BUFFER and s.registry is Registry.BUFFER and s.kind in _REFUSED_BY_BUFFERS:
        return _RELEASE
    if s.registry is not None and s.registry is not Registry.UNBUILT:
        return _REGISTERED
    if s.role == FRAMEWORK:
        return _FRAMEWORK
    tensor = s.kind in TENSORS
    if not (tensor or s.kind is Kind.CONTAINER):
        return _OTHER
    declaration = record.declarations.get(s.name)
    if declaration is Declaration.PLAIN:
        return _PLAIN
    if s.kind is Kind.GRAD_LEAF or (tensor and s.derived):
        leaf = s.kind is Kind.GRAD_LEAF and s.constructing
        return _GRAD[Concern.GRAD_LEAF if leaf else None]
    if s.slot is not None and (tensor or s.slot in ("internal", "descriptor")):
        # A container is carried under any other name: the instance's __dict__, where it is
        # kept, wins over a class attribute that is no data descriptor.
        return _NO_SLOT[Concern.NO_SLOT if tensor and s.slot != "descriptor" else None]
    if s.kind is Kind.CONTAINER:
        return _CONTAINER
    if declaration is not None:
        return _DECLARED[record.persistence(declaration)]
    if s.constructing:
        if s.kind is Kind.GRAD_RESULT:
            return _CONSTRUCTION_RESULT
        return _CONSTRUCTION[record.persistent]
    return _RUNTIME


def decide(record: ClassRecord, s: Situation, *, compiling: bool) -> Decision:
    """``classify(record, s)``, kept per class and situation. Inside code dynamo compiles the
    decision is made afresh: a lookup in a dict that grows would make it guard on the dict."""
    if compiling:
        return classify(record, s)
    decision = record.decisions.get(s)
    if decision is None:
        decision = record.decisions[s] = classify(record, s)
    return decision


# --- the facts --------------------------------------------------------------------------------


def situation(
    record: ClassRecord,
    d: dict[str, Any],
    name: str,
    value: object,
    role: str | None,
    *,
    compiling: bool,
) -> Situation:
    """The facts of ``module.name = value``; ``d`` is the module's ``__dict__``, ``role`` the
    name's role there. Inside code dynamo compiles, the class is read from its snapshot."""
    kind = kind_of(value)
    parameters = d.get("_parameters")
    registry: Registry | None
    if parameters is None:
        registry = Registry.UNBUILT
    elif name in parameters:
        registry = Registry.PARAMETER
    elif name in d["_buffers"]:
        registry = Registry.BUFFER
    elif name in d["_modules"]:
        registry = Registry.MODULE
    else:
        registry = None
    slot = None
    derived = False
    if registry is None and kind in _HELD:  # only these consult the class and the parameters
        slot = slot_kind((record.snapshot,) if compiling else record.namespaces, name)
        if parameters and kind is not Kind.CONTAINER:
            derived = name + "_orig" in parameters or (
                name + "_v" in parameters and name + "_g" in parameters
            )
    constructing = registry is Registry.UNBUILT or CONSTRUCTING in d
    return _SITUATION(Situation, (name, kind, role, registry, constructing, slot, derived))


_SITUATION: Final = tuple.__new__  # builds a Situation without the Python-level __new__
_HELD: Final = frozenset({Kind.TENSOR, Kind.GRAD_LEAF, Kind.GRAD_RESULT, Kind.CONTAINER})


def kind_of(value: object) -> Kind:
    """The ``Kind`` of ``value``; cheap for plain tensors and plain values (a negative
    ``isinstance`` against ``torch.Tensor`` is not)."""
    cls = type(value)
    if cls is torch.Tensor:
        # A plain Tensor is a Parameter or a Buffer only through the flags that their
        # metaclasses' __instancecheck__ read.
        if getattr(value, "_is_param", False) or getattr(value, "_is_buffer", False):
            return Kind.EXPLICIT
        return _tensor_kind(value)  # type: ignore[arg-type]
    kind = _KINDS_BY_TYPE.get(cls)
    if kind is not None:
        return kind
    if isinstance(value, torch.Tensor):
        if isinstance(value, (nn.Parameter, nn.Buffer)):
            return Kind.EXPLICIT
        return _tensor_kind(value)
    if isinstance(value, nn.Module):
        return Kind.EXPLICIT
    if isinstance(value, CONTAINERS):
        return Kind.CONTAINER
    if hasattr(value, "__torch_function__"):
        return Kind.TRACED
    return Kind.OTHER


_KINDS_BY_TYPE: Final[dict[type, Kind]] = {
    **dict.fromkeys((int, float, bool, str, bytes, complex), Kind.OTHER),
    type(None): Kind.NONE,
    **dict.fromkeys((list, tuple, dict), Kind.CONTAINER),
}


def _tensor_kind(tensor: torch.Tensor) -> Kind:
    if not tensor.requires_grad:
        return Kind.TENSOR
    return Kind.GRAD_LEAF if tensor.is_leaf else Kind.GRAD_RESULT


def slot_kind(namespaces: Iterable[Mapping[str, Any]], name: str) -> str | None:
    """Why ``name`` cannot hold a buffer: a key of ``_SLOT_REASONS``, "descriptor" or "class";
    None when it can. ``namespaces`` are the ``__dict__``s of the class's MRO, searched as
    instance lookup does."""
    if not name:
        return "empty"
    if "." in name:
        return "dotted"
    if name in MODULE_INTERNALS or name.startswith("_autoreg_"):
        return "internal"
    for namespace in namespaces:
        if name in namespace:
            # A data descriptor (a property) decides what assigning means; any other class
            # attribute is found by lookup before nn.Module.__getattr__ ever looks at buffers.
            return "descriptor" if hasattr(type(namespace[name]), "__set__") else "class"
    return None


_SLOT_REASONS: Final = {
    "empty": "is empty or dotted",
    "dotted": "contains a '.'",
    "internal": "is one of nn.Module's internal attributes",
}


def why_no_buffer_slot(cls: type, name: str) -> str | None:
    """Why ``name`` cannot hold a buffer on instances of ``cls``, in words; None when it can."""
    kind = slot_kind([klass.__dict__ for klass in cls.__mro__], name)
    if kind is None:
        return None
    if kind in _SLOT_REASONS:
        return _SLOT_REASONS[kind]
    attribute = next(k.__dict__[name] for k in cls.__mro__ if name in k.__dict__)
    return (
        f"is defined on the class (a class-level {type(attribute).__name__}) and hides any "
        "buffer of that name"
    )
