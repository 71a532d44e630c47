"""The assignment contract: what ``self.name = value`` does, as one decision.

``classify`` is pure: from the value, the name, the class record and what the instance holds, it
returns a ``Decision`` - the row of the README's contract table that applies, the action, and what
strict and warn mode have to say about it. ``enforce`` is the one place where strict mode refuses
and warn mode warns. ``AutoRegisterMixin.__setattr__`` runs the decision; its fast paths are the
rows it can settle inline (3 and 11 for updates, 12 for plain values).

The rows, in the order they are tried (README, "The contract"):

1. an ``nn.Parameter``, ``nn.Buffer`` or module: nn.Module's; the name is no longer autoreg's.
2. a value nn.Module refuses for a buffer autoreg registered: a plain attribute, name forgotten.
3. a name that holds a parameter, buffer or submodule: nn.Module's, same role.
4. assigned by a framework base's code (or to a name it created): nn.Module's, and the name is the
   framework's from then on.
5. a name declared ``autoreg.Plain``: a plain attribute.
6. a tensor that requires grad: a plain attribute.
7. a name that cannot hold a buffer (defined on the class, nn.Module internals, '' or dotted):
   nn.Module's; a data descriptor (a property) decides what assigning means.
8. a list, tuple or dict: carried.
9. a declared tensor: a buffer.
10. a tensor assigned during construction: a buffer (a view of a parameter's memory: carried).
11. a tensor assigned after construction: carried.
12. anything else: nn.Module's; a name autoreg carried is forgotten.
"""

from __future__ import annotations

import enum
import sys
import types
import warnings
from collections.abc import Iterable, Mapping
from typing import Any, Final, NamedTuple

import torch
from torch import nn

from ._config import Mode
from ._declarations import Declaration
from ._errors import AutoRegisterWarning, UnregisteredTensorError
from ._messages import (
    GRAD_LEAF,
    NO_BUFFER_SLOT,
    STRICT_CONTAINER,
    STRICT_UNDECLARED,
    WARN_CONTAINER,
    WARN_UNDECLARED,
    describe,
)
from ._record import CONSTRUCTING, ClassRecord
from ._walk import CONTAINERS

__all__ = [
    "BUFFER",
    "CARRIED",
    "CONTAINER",
    "FRAMEWORK",
    "MODULE_INTERNALS",
    "OWNED",
    "PENDING",
    "Action",
    "Concern",
    "Decision",
    "classify",
    "enforce",
    "is_explicit",
    "slot_kind",
    "why_no_buffer_slot",
]

# Keys autoreg keeps in an instance's __dict__.
OWNED: Final = "_autoreg_owned"  # {name: role}: the names autoreg decided about
PENDING: Final = "_autoreg_pending"  # tensors assigned before nn.Module.__init__ ran

# Roles. Strings, so that pickles of every autoreg version load.
BUFFER: Final = "buffer"  # registered by autoreg (row 2 applies to it)
CARRIED: Final = "carried"  # a runtime tensor, converted by _apply
CONTAINER: Final = "container"  # a list, tuple or dict whose tensors _apply converts
FRAMEWORK: Final = "framework"  # created by a framework base's code: nn.Module's rules (row 4)

MODULE_INTERNALS: Final = frozenset(vars(nn.Module())) | {"_is_replica"}


class Action(enum.Enum):
    NN_MODULE = "nn.Module's behaviour, the name keeps its role"
    EXPLICIT = "nn.Module's behaviour, the name is no longer autoreg's"
    PLAIN = "a plain attribute, the name is no longer autoreg's"
    FRAMEWORK = "nn.Module's behaviour, the name is the framework base's"
    CARRY = "carried: a plain attribute that _apply converts"
    CARRY_CONTAINER = "a carried container"
    REGISTER = "a buffer"


class Concern(enum.Enum):
    """What strict mode refuses and warn mode warns about."""

    UNDECLARED = "undeclared"
    CONTAINER = "container"
    GRAD_LEAF = "grad"
    NO_SLOT = "slot"


class Decision(NamedTuple):
    row: int
    action: Action
    concern: Concern | None = None
    persistent: bool = False


# The decisions there are, made once: classify returns one of these.
_EXPLICIT: Final = Decision(1, Action.EXPLICIT)
_REFUSED_BY_BUFFER: Final = Decision(2, Action.PLAIN)
_REGISTERED: Final = Decision(3, Action.NN_MODULE)
_FRAMEWORK: Final = Decision(4, Action.FRAMEWORK)
_PLAIN_DECLARED: Final = Decision(5, Action.PLAIN)
_GRAD: Final = {
    True: Decision(6, Action.PLAIN, Concern.GRAD_LEAF),
    False: Decision(6, Action.PLAIN),
}
_NO_SLOT: Final = {
    True: Decision(7, Action.PLAIN, Concern.NO_SLOT),
    False: Decision(7, Action.PLAIN),
}
_CONTAINER: Final = Decision(8, Action.CARRY_CONTAINER, Concern.CONTAINER)
_DECLARED: Final = {p: Decision(9, Action.REGISTER, persistent=p) for p in (True, False)}
_CONSTRUCTION: Final = {
    p: Decision(10, Action.REGISTER, Concern.UNDECLARED, persistent=p) for p in (True, False)
}
_RUNTIME: Final = Decision(11, Action.CARRY, Concern.UNDECLARED)
_OTHER: Final = {True: Decision(12, Action.PLAIN), False: Decision(12, Action.NN_MODULE)}


def is_explicit(value: object) -> bool:
    """``isinstance(value, (nn.Module, nn.Parameter, nn.Buffer))``, cheap for plain tensors.

    A tensor of exact type ``torch.Tensor`` is a Parameter or a Buffer only through the flags that
    their metaclasses' ``__instancecheck__`` read, and is never a module.
    """
    if type(value) is torch.Tensor:
        return bool(getattr(value, "_is_param", False) or getattr(value, "_is_buffer", False))
    return isinstance(value, (nn.Module, nn.Parameter, nn.Buffer))


def slot_kind(namespaces: Iterable[Mapping[str, Any]], name: str) -> str | None:
    """Why ``name`` cannot hold a buffer: a key of ``_SLOT_REASONS``; None when it can.

    ``namespaces`` are the ``__dict__``s of the class's MRO, searched as instance lookup does.
    """
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


def classify(
    record: ClassRecord,
    d: dict[str, Any],
    name: str,
    value: object,
    role: str | None,
    explicit: bool,
    by_framework: bool,
) -> Decision:
    """The contract row for ``module.name = value``; ``d`` is the module's ``__dict__``.

    ``explicit``: ``is_explicit(value)``. ``by_framework``: the assignment is made by the code of
    a framework base class (row 4).
    """
    if explicit:
        return _EXPLICIT
    buffers = d.get("_buffers")
    if role == BUFFER and buffers is not None and name in buffers:
        if value is not None and not _accepted_as_buffer(value):
            return _REFUSED_BY_BUFFER
        return _REGISTERED
    if buffers is not None and (
        name in d["_parameters"] or name in buffers or name in d["_modules"]
    ):
        return _REGISTERED
    if role == FRAMEWORK or (role is None and by_framework):
        return _FRAMEWORK

    tensor = isinstance(value, torch.Tensor)
    container = isinstance(value, CONTAINERS)
    if not (tensor or container):
        return _OTHER[role is not None]

    declaration = record.declarations.get(name)
    if declaration is Declaration.PLAIN:
        return _PLAIN_DECLARED
    if isinstance(value, torch.Tensor) and value.requires_grad:
        return _GRAD[value.is_leaf]
    compiling = torch.compiler.is_compiling()
    slot = slot_kind((record.snapshot,) if compiling else record.namespaces, name)
    if slot is not None and (tensor or slot in ("internal", "descriptor")):
        # Row 7. A container is carried under any other name: the instance's __dict__, where
        # autoreg keeps it, wins over a class attribute that is no descriptor.
        return _NO_SLOT[tensor and slot != "descriptor"]
    if not isinstance(value, torch.Tensor):
        return _CONTAINER
    if declaration is not None:
        return _DECLARED[record.persistence(declaration)]
    if CONSTRUCTING in d and not (d.get("_parameters") and _aliases_a_parameter(d, value)):
        return _CONSTRUCTION[record.persistent]
    return _RUNTIME


def _accepted_as_buffer(value: object) -> bool:
    """What nn.Module accepts for a buffer name: a tensor, or a value with ``__torch_function__``
    (a ``torch.fx.Proxy`` while ``symbolic_trace`` runs forward)."""
    return isinstance(value, torch.Tensor) or hasattr(value, "__torch_function__")


def _aliases_a_parameter(d: dict[str, Any], value: torch.Tensor) -> bool:
    """Whether ``value`` shares memory with a parameter of the module itself (``weight.data``,
    what the hook-based ``spectral_norm`` writes in ``__init__``)."""
    parameters = d.get("_parameters")
    if not parameters:
        return False
    try:
        storage = value.untyped_storage().data_ptr()
        return any(
            p is not None and p.untyped_storage().data_ptr() == storage for p in parameters.values()
        )
    except (NotImplementedError, RuntimeError):  # a tensor subclass without storage
        return False


# --- strict and warn -------------------------------------------------------------------------


def enforce(
    module: nn.Module,
    record: ClassRecord,
    name: str,
    value: Any,
    decision: Decision,
    loose: list[tuple[str, torch.Tensor]],
) -> None:
    """Strict mode refuses, warn mode warns once per (class, name), about ``decision.concern``.

    ``loose`` (row 8): the tensors in the container that only autoreg would move.
    """
    concern = decision.concern
    mode = record.mode
    cls = type(module).__name__
    if concern is Concern.GRAD_LEAF:
        message = GRAD_LEAF.format(cls=cls, name=name, value=describe(value))
        if mode is Mode.STRICT:
            raise UnregisteredTensorError(message)
        _warn_once(record, concern, name, message)  # in every mode: a weight nobody trains
        return
    if mode is Mode.REGISTER:
        return
    if concern is Concern.NO_SLOT:
        where = why_no_buffer_slot(type(module), name)
        message = NO_BUFFER_SLOT.format(cls=cls, name=name, value=describe(value), where=where)
    elif concern is Concern.CONTAINER:
        if not loose:
            return
        path, tensor = loose[0]
        fields = {
            "cls": cls,
            "name": name,
            "kind": type(value).__name__,
            "count": len(loose),
            "example": f"{name}{path} = {describe(tensor)}",
        }
        if mode is Mode.STRICT:
            raise UnregisteredTensorError(STRICT_CONTAINER.format(why=record.strict_by, **fields))
        message = WARN_CONTAINER.format(**fields)
    else:
        kind = "persistent" if record.persistent else "non-persistent"
        if decision.action is Action.REGISTER:
            reason = "it was assigned during construction"
            action = f"register it as a {kind} buffer ({reason})"
            past = f"registered as a {kind} buffer because {reason}"
        else:
            action = "carry it along with .to() as runtime state, outside state_dict"
            past = "carried as runtime state: it moves with .to() but is not in state_dict"
        fields = {
            "cls": cls,
            "name": name,
            "value": describe(value),
            "default": f"a buffer ({kind}):",
        }
        if mode is Mode.STRICT:
            raise UnregisteredTensorError(
                STRICT_UNDECLARED.format(action=action, why=record.strict_by, **fields)
            )
        message = WARN_UNDECLARED.format(action_past=past, **fields)
    if mode is Mode.STRICT:
        raise UnregisteredTensorError(message)
    _warn_once(record, concern or Concern.UNDECLARED, name, message)


def _warn_once(record: ClassRecord, concern: Concern, name: str, message: str) -> None:
    """Warn about (concern, name) the first time this class sees it, at the user's assignment."""
    key = (concern.value, name)
    if key not in record.warned:
        record.warned.add(key)
        warnings.warn(message, AutoRegisterWarning, stacklevel=_assignment_level())


def _assignment_level() -> int:
    """The ``stacklevel`` of the user's assignment: the first frame outside autoreg that is not a
    ``__setattr__`` (a class that overrides it and calls ``super().__setattr__``)."""
    if torch.compiler.is_compiling():
        return 2  # frames cannot be walked there; warnings.warn breaks the graph all the same
    frame: types.FrameType | None = sys._getframe(2)  # the caller of _warn_once's caller
    level = 2
    while frame is not None and (
        frame.f_globals.get("__name__", "").startswith("autoreg.")
        or frame.f_code.co_name == "__setattr__"
    ):
        frame = frame.f_back
        level += 1
    return level
