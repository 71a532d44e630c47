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
from typing import Any, Final, NamedTuple, TypeAlias

import torch
from torch import nn

from ._declarations import Declaration
from ._record import ClassRecord
from ._state import BUFFER, CONSTRUCTING, FRAMEWORK, MODULE_INTERNALS, OWN_KEYS
from ._walk import CONTAINERS

__all__ = [
    "BUFFERS",
    "CONTAINER",
    "GRAD_LEAF",
    "GRAD_RESULT",
    "HAND_OVER",
    "HELD",
    "MODULES",
    "NONE",
    "REGISTER",
    "RELEASE",
    "STORE",
    "TENSOR",
    "TENSORS",
    "UNBUILT",
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


class Registry(enum.IntEnum):
    """Where nn.Module keeps the name (None: nowhere)."""

    PARAMETERS = 1
    BUFFERS = 2
    MODULES = 3
    UNBUILT = 4  # nn.Module.__init__ has not run


# The members, bound once: a member looked up through its enum class costs about 0.1 µs, and an
# assignment reads several.
EXPLICIT, TENSOR, GRAD_LEAF, GRAD_RESULT, CONTAINER, NONE, TRACED, OTHER = Kind
PARAMETERS, BUFFERS, MODULES, UNBUILT = Registry
TENSORS: Final = frozenset({TENSOR, GRAD_LEAF, GRAD_RESULT})
HELD: Final = frozenset({TENSOR, GRAD_LEAF, GRAD_RESULT, CONTAINER})  # what .to() may convert
# What nn.Module refuses for a buffer: not a tensor, not None, no __torch_function__ (a torch.fx
# Proxy while symbolic_trace runs forward).
_REFUSED_BY_BUFFERS: Final = frozenset({CONTAINER, OTHER})


# Everything ``classify`` reads about one assignment, a plain tuple (a dictionary key, built on
# every assignment: a NamedTuple takes a Python-level __new__):
#   name          the attribute's name
#   kind          what the value is (``Kind``)
#   role          the name's role (``_state.role_key``), or None
#   registry      where nn.Module keeps the name (``Registry``), or None
#   constructing  whether the module is being built (``_construction``)
#   slot          why the name cannot hold a buffer (``slot_kind``), or None
#   derived       whether it is the weight prune / weight_norm / spectral_norm derive
# slot and derived are facts about a tensor or container under a name nn.Module does not
# register; for any other assignment they are None and False.
Situation: TypeAlias = tuple[str, Kind, "str | None", "Registry | None", bool, "str | None", bool]


class Action(enum.Enum):
    HAND_OVER = "nn.Module's behaviour; the name is no longer autoreg's"
    RELEASE = "the buffer is unregistered, then the value is assigned afresh"
    STORE = "stored as nn.Module stores it"
    REGISTER = "registered as a buffer"


HAND_OVER, RELEASE, STORE, REGISTER = Action


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
    always: bool = False  # the concern is raised (strict) or warned about in every mode


# The decisions there are, made once: classify returns one of these.
_EXPLICIT: Final = Decision(1, HAND_OVER)
_RELEASE: Final = Decision(2, RELEASE)
_REGISTERED: Final = Decision(3, STORE)
_FRAMEWORK: Final = Decision(4, STORE)
_PLAIN: Final = Decision(5, STORE)
_GRAD: Final = {
    Concern.GRAD_LEAF: Decision(6, STORE, concern=Concern.GRAD_LEAF, always=True),
    None: Decision(6, STORE),
}
_NO_SLOT: Final = {c: Decision(7, STORE, concern=c) for c in (Concern.NO_SLOT, None)}
_CONTAINER: Final = Decision(8, STORE, True, Concern.CONTAINER)
_DECLARED: Final = {p: Decision(9, REGISTER, True, persistent=p) for p in (True, False)}
_CONSTRUCTION: Final = {
    p: Decision(10, REGISTER, True, Concern.UNDECLARED, p) for p in (True, False)
}
_CONSTRUCTION_RESULT: Final = Decision(10, STORE, True, Concern.UNDECLARED)
_RUNTIME: Final = Decision(11, STORE, True, Concern.UNDECLARED)
_OTHER: Final = Decision(12, STORE)


def classify(record: ClassRecord, s: Situation) -> Decision:
    """The contract row for the assignment described by ``s``, on an instance of ``record``'s
    class. Pure: the same record and situation always give the same decision."""
    name, kind, role, registry, constructing, slot, derived = s
    if kind is EXPLICIT:
        return _EXPLICIT
    if role == BUFFER and registry is BUFFERS and kind in _REFUSED_BY_BUFFERS:
        return _RELEASE
    if registry is not None and registry is not UNBUILT:
        return _REGISTERED
    if role == FRAMEWORK:
        return _FRAMEWORK
    tensor = kind in TENSORS
    if not (tensor or kind is CONTAINER):
        return _OTHER
    declaration = record.declarations.get(name)
    if declaration is Declaration.PLAIN:
        return _PLAIN
    if kind is GRAD_LEAF or (tensor and derived):
        leaf = kind is GRAD_LEAF and constructing
        return _GRAD[Concern.GRAD_LEAF if leaf else None]
    if slot is not None and (tensor or slot in ("internal", "descriptor")):
        # A container is carried under any other name: the instance's __dict__, where it is
        # kept, wins over a class attribute that is no data descriptor.
        return _NO_SLOT[Concern.NO_SLOT if tensor and slot != "descriptor" else None]
    if kind is CONTAINER:
        return _CONTAINER
    if declaration is not None:
        return _DECLARED[record.persistence(declaration)]
    if constructing:
        if kind is GRAD_RESULT:
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
    compiling: bool,
) -> Situation:
    """The facts of ``module.name = value``; ``d`` is the module's ``__dict__``, ``role`` the
    name's role there. Inside code dynamo compiles, the class is read from its snapshot."""
    kind = kind_of(value)
    parameters = d.get("_parameters")
    registry: Registry | None
    if parameters is None:
        registry = UNBUILT
    elif name in parameters:
        registry = PARAMETERS
    elif name in d["_buffers"]:
        registry = BUFFERS
    elif name in d["_modules"]:
        registry = MODULES
    else:
        registry = None
    slot = None
    derived = False
    if registry is None and kind in HELD:  # only these consult the class and the parameters
        if compiling:
            slot = slot_kind((record.snapshot,), name)
        else:  # a fact about the class: read once per class and name
            slot = record.slots.get(name, _UNSEEN)
            if slot is _UNSEEN:
                slot = record.slots[name] = slot_kind(record.namespaces, name)
        if parameters and kind is not CONTAINER:
            derived = name + "_orig" in parameters or (
                name + "_v" in parameters and name + "_g" in parameters
            )
    constructing = registry is UNBUILT or CONSTRUCTING in d
    return (name, kind, role, registry, constructing, slot, derived)


def kind_of(value: object) -> Kind:
    """The ``Kind`` of ``value``; cheap for plain tensors and plain values (a negative
    ``isinstance`` against ``torch.Tensor`` is not)."""
    cls = type(value)
    if cls is torch.Tensor:
        # A plain Tensor is a Parameter or a Buffer only through the flags that their
        # metaclasses' __instancecheck__ read.
        if getattr(value, "_is_param", False) or getattr(value, "_is_buffer", False):
            return EXPLICIT
        if not value.requires_grad:  # type: ignore[attr-defined]
            return TENSOR
        return GRAD_LEAF if value.is_leaf else GRAD_RESULT  # type: ignore[attr-defined]
    kind = _KINDS_BY_TYPE.get(cls)
    if kind is not None:
        return kind
    if isinstance(value, torch.Tensor):
        if isinstance(value, (nn.Parameter, nn.Buffer)):
            return EXPLICIT
        return _tensor_kind(value)
    if isinstance(value, nn.Module):
        return EXPLICIT
    if isinstance(value, CONTAINERS):
        return CONTAINER
    if hasattr(value, "__torch_function__"):
        return TRACED
    return OTHER


_UNSEEN: Final[Any] = object()
_KINDS_BY_TYPE: Final[dict[type, Kind]] = {
    **dict.fromkeys((int, float, bool, str, bytes, complex), OTHER),
    type(None): NONE,
    **dict.fromkeys((list, tuple, dict), CONTAINER),
}


def _tensor_kind(tensor: torch.Tensor) -> Kind:
    if not tensor.requires_grad:
        return TENSOR
    return GRAD_LEAF if tensor.is_leaf else GRAD_RESULT


def slot_kind(namespaces: Iterable[Mapping[str, Any]], name: str) -> str | None:
    """Why ``name`` cannot hold a buffer: a key of ``_SLOT_REASONS``, "descriptor" or "class";
    None when it can. ``namespaces`` are the ``__dict__``s of the class's MRO, searched as
    instance lookup does."""
    if not name:
        return "empty"
    if "." in name:
        return "dotted"
    if name in MODULE_INTERNALS or name.startswith(OWN_KEYS):
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
