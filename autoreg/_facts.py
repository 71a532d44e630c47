"""The facts of one assignment, read for the contract (``_contract.classify``).

``situation`` reads what ``classify`` needs to know about ``module.name = value`` into a plain
tuple: what the value is (``kind_of``, from its type), where nn.Module keeps the name, the name's
role, whether the module is being built, why the name cannot hold a buffer (``slot_kind``, read
once per class and name) and whether it is the weight prune / weight_norm / spectral_norm derive
(``derived``). Nothing here decides anything.

Derived weights are known by identity: each of those utilities keeps a forward pre-hook of its own
type on the module that names the weight it recomputes at every call (``recomputed_names``), and
writes the first one from its ``apply``, before the hook exists: then the code that assigns is
the utility's. A parameter named after the weight (``weight_orig``, ``weight_v`` and
``weight_g``: what the utilities leave before that first write) decides nothing; it only says when
the caller's frame is worth reading. Where the frame cannot be read (compiled code), autoreg
cannot tell, and says so (``None``).
"""

from __future__ import annotations

import enum
import inspect
import sys
import types
from collections.abc import Iterable, Mapping
from typing import Any, Final, TypeAlias, cast

import torch
from torch import nn
from torch.nn.utils.prune import BasePruningMethod
from torch.nn.utils.spectral_norm import SpectralNorm
from torch.nn.utils.weight_norm import WeightNorm

from ._attribution import (
    attribute,
    attribute_past_dynamo,
    compiled_attribution,
    constant_result,
    inlined_codes,
)
from ._record import CACHE_LIMIT, ClassRecord
from ._state import (
    CARRIED,
    CONSTRUCTING,
    EARLY,
    MODULE_INTERNALS,
    OWN_KEYS,
    is_building,
    is_building_compiled,
)
from ._walk import CONTAINERS

__all__ = [
    "BUFFERS",
    "COMPLEX",
    "CONTAINER",
    "EXPLICIT",
    "GRAD_LEAF",
    "GRAD_RESULT",
    "HELD",
    "MODULES",
    "NONE",
    "OTHER",
    "PARAMETERS",
    "RUNTIME_KINDS",
    "TENSOR",
    "TENSORS",
    "TORCH_ASSIGNS",
    "TORCH_UNREAD",
    "TRACED",
    "UNBUILT",
    "Kind",
    "Registry",
    "Situation",
    "compiled_torch_assigns",
    "defines_torch_function",
    "is_compiling",
    "kind_of",
    "read_torch_assigners",
    "recomputed_names",
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
    TRACED = 7  # for a buffer's name: a value whose type defines __torch_function__ (an fx Proxy)
    OTHER = 8  # any other value
    COMPLEX = 9  # a complex tensor that does not require grad, while the module is built


class Registry(enum.IntEnum):
    """Where nn.Module keeps the name (None: nowhere)."""

    PARAMETERS = 1
    BUFFERS = 2
    MODULES = 3
    UNBUILT = 4  # nn.Module.__init__ has not run


# Dynamo traces this as True; one call in eager code (is_compiling() makes two). Non-strict
# torch.export runs Python eagerly: the eager path is right there.
is_compiling: Final = getattr(torch.compiler, "is_dynamo_compiling", torch.compiler.is_compiling)

# torch's own functions that set a tensor or container of their own on a built module, under a name
# no registry holds, which nn.Module keeps as a plain attribute: fx's tracer (a tensor the forward
# makes from a literal, as ``_tensor_constant0`` on the module it traces), FSDP1 (a view of its
# flat parameter under each parameter's name), DataParallel's ``replicate`` (each parameter's copy
# on a replica, and the dict of them, ``_former_parameters``) and ``torch.func.functional_call``
# (a tensor it swaps in for the call under a name the module does not have, deleted after):
# {module: the functions' paths in it}. Row 4's on any class, known by the identity of their code
# (``TORCH_ASSIGNS``), read once their module is loaded (torch.distributed is optional).
TORCH_UNREAD: Final = {
    "torch.fx._symbolic_trace": ("Tracer.create_arg",),
    "torch.distributed.fsdp._flat_param": ("_safe_setattr_tensor_or_param",),
    "torch.nn.parallel.replicate": ("replicate",),
    "torch.nn.utils._named_member_accessor": ("swap_tensor", "set_tensor"),
}
TORCH_ASSIGNS: Final[dict[int, types.CodeType]] = {}  # by id, the code objects kept beside
# What the mixin's __setattr__ asks about (``_mixin``): a first tensor or container stored after
# construction, under a name no registry holds and the class does not declare.
RUNTIME_KINDS: Final = (Kind.TENSOR, Kind.GRAD_RESULT, Kind.CONTAINER)

# The members, bound once: a member looked up through its enum class costs about 0.1 µs, and an
# assignment reads several.
EXPLICIT, TENSOR, GRAD_LEAF, GRAD_RESULT, CONTAINER, NONE, TRACED, OTHER, COMPLEX = Kind
PARAMETERS, BUFFERS, MODULES, UNBUILT = Registry
# Tuples, not sets: compiled code tests membership in them, and dynamo on torch 2.6 cannot trace
# ``frozenset.__contains__``.
TENSORS: Final = (TENSOR, GRAD_LEAF, GRAD_RESULT, COMPLEX)
HELD: Final = (TENSOR, GRAD_LEAF, GRAD_RESULT, COMPLEX, CONTAINER)  # what .to() may convert


# Everything ``classify`` reads about one assignment, a plain tuple (a dictionary key, built on
# every assignment: a NamedTuple takes a Python-level __new__):
#   name          the attribute's name
#   kind          what the value is (``Kind``); COMPLEX is read only while the module is built,
#                 the one time it changes the decision (row 10), and is TENSOR otherwise; under
#                 a name a registry holds, a tensor is TENSOR whether or not it requires grad
#                 (rows 1 to 3 do not ask, and reading it costs)
#   role          the name's role (``_state.role_key``), or None
#   registry      where nn.Module keeps the name (``Registry``), or None
#   constructing  whether the module is being built (``_construction``); False for a name a
#                 registry holds (rows 1 to 3 decide it, and read neither this nor what follows)
#   slot          why the name cannot hold a buffer (``slot_kind``), or None
#   derived       whether it is the weight prune / weight_norm / spectral_norm derive; None when
#                 that cannot be told (compiled code, before the utility's hook exists)
# slot is a fact about a tensor, container or nn.Parameter under a name nn.Module does not register
# (``_execute`` registers a new parameter itself when the class has nothing under the name),
# derived one about a tensor that is no leaf requiring grad there (row 6 takes such a leaf
# anyway); for any other assignment they are None and False.
Situation: TypeAlias = tuple[
    str, Kind, "str | None", "Registry | None", "bool | None", "str | None", "bool | None"
]


def situation(
    record: ClassRecord,
    d: dict[str, Any],
    name: str,
    value: object,
    role: str | None,
    compiled: nn.Module | None,
    from_setattr: bool = False,
) -> Situation:
    """The facts of ``module.name = value``; ``d`` is the module's ``__dict__``, ``role`` the
    name's role there. ``compiled``: the module, inside code dynamo compiles (None in eager
    code), where the class is read while dynamo traces.

    ``from_setattr``: called by ``__setattr__`` itself, whose caller makes the assignment. On a
    class with a framework base, a name new to the instance that no registry holds (without a
    role, or carried and deleted since: ``del`` keeps a carried name's role) then gets one here,
    the answer of row 4 (``_attribution``), judged from that caller's frame, taken only then;
    inside compiled code, read while dynamo traces the assignment (a constant of the graph). Only
    such a name can need it: rows 1 to 3 never read a role, and a name leaves a registry only by
    ``del``, which forgets a registered name's role.
    """
    compiling = compiled is not None
    cls = type(value)  # kind_of, its fast paths inlined: an assignment's hot path
    if cls is _TENSOR:  # whether it requires grad is read below, where rows 1 to 3 do not decide
        kind = EXPLICIT if getattr(value, "_is_buffer", False) else TENSOR
    else:
        kind = _KINDS_BY_TYPE.get(cls) or kind_of(value)
    parameters = d.get("_parameters")
    registry: Registry | None
    if parameters is None:
        registry = UNBUILT
    elif name in parameters:
        registry = PARAMETERS
    # A registry missing after _parameters (a __setstate__ that restores one attribute at a
    # time) holds nothing, as nn.Module's __setattr__ reads it.
    elif name in d.get("_buffers", ()):
        registry = BUFFERS
        if kind is OTHER and defines_torch_function(cls):  # what nn.Module takes for a buffer
            kind = TRACED
    elif name in d.get("_modules", ()):
        registry = MODULES
    else:
        registry = None
    if registry is not None and registry is not UNBUILT:
        return (name, kind, role, registry, False, None, False)  # rows 1 to 3 read no more
    if kind is TENSOR and cls is _TENSOR and value.requires_grad:  # type: ignore[attr-defined]
        kind = GRAD_LEAF if value.is_leaf else GRAD_RESULT  # type: ignore[attr-defined]
    if (
        record.attributes
        # new, or (eager code: compiled code would guard on the __dict__) carried and deleted
        and (role is None or (role == CARRIED and not compiling and name not in d))
        and kind is not EXPLICIT
        and name not in MODULE_INTERNALS
    ):
        if compiling:  # read while dynamo traces: a constant of the compiled code
            role = compiled_attribution(record.cls)
        elif from_setattr:
            if is_compiling():  # an eager __setattr__ inside a compiled function called this
                role = attribute_past_dynamo(record, name, value)  # (which dynamo compiles)
            else:
                role = attribute(record, sys._getframe(2), name, value)  # 0: this, 1: __setattr__
    slot = None
    derived: bool | None = False
    # What .to() may convert, and a new nn.Parameter, consult the class (m.x = 1 tests two kinds)
    if kind in HELD or (kind is EXPLICIT and cls is _PARAMETER):
        if compiling:
            slot = compiled_slot(record.cls, name)
        else:  # a fact about the class: read once per class and name
            slot = record.slots.get(name, _UNSEEN)
            if slot is _UNSEEN:
                slot = slot_kind(record.namespaces, name)
                if len(record.slots) < CACHE_LIMIT:
                    record.slots[name] = slot
        if parameters and (kind is TENSOR or kind is GRAD_RESULT):
            if d["_forward_pre_hooks"] and name in recomputed_names(d["_forward_pre_hooks"]):
                derived = True
            elif name + "_orig" in parameters or (
                name + "_v" in parameters and name + "_g" in parameters
            ):  # a utility's first write, before its hook exists, is told by its code
                derived = (
                    None  # (nor in a callee of an eager __setattr__ that dynamo compiles)
                    if compiling or not from_setattr or is_compiling()
                    else id(_assigner(sys._getframe(2), record)) in _UTILITY_WRITES
                )
    constructing: bool
    if compiled is not None:  # (nothing outside the instance: dynamo would guard on it)
        constructing = registry is UNBUILT or is_building_compiled(compiled)
    else:
        constructing = (
            registry is UNBUILT
            or (CONSTRUCTING in d and is_building(d))  # a call only when marked
            # begun before nn.Module.__init__: its mark may be outside (_construction)
            or (id(d) in EARLY if EARLY else False)
        )
    if constructing and kind is TENSOR and value.dtype.is_complex:  # type: ignore[attr-defined]
        kind = COMPLEX
    return (name, kind, role, registry, constructing, slot, derived)


def recomputed_names(hooks: Mapping[Any, Any]) -> set[str]:
    """The names whose weights the forward pre-hooks ``hooks`` (a module's
    ``_forward_pre_hooks``) recompute at every call: prune's, weight_norm's and spectral_norm's,
    known by their types."""
    names: set[str] = set()
    for hook in hooks.values():
        cls = type(hook)
        if issubclass(cls, BasePruningMethod):
            names.add(hook._tensor_name)
        elif issubclass(cls, (WeightNorm, SpectralNorm)):
            names.add(hook.name)
    return names


def _assigner(frame: types.FrameType | None, record: ClassRecord) -> types.CodeType | None:
    """The code that made the assignment whose ``__setattr__`` was called from ``frame``: the
    first frame that runs none of the ``__setattr__`` overrides of the instance's classes
    (``record.setattr_codes``, by identity: every assignment passes them first, and they make
    none); None when there is none. (The mixin's ``__setattr__`` walks the same way, inline.)"""
    while frame is not None and id(frame.f_code) in record.setattr_codes:
        frame = frame.f_back
    return None if frame is None else frame.f_code


def read_torch_assigners() -> None:
    """Read into ``TORCH_ASSIGNS`` the code of those of ``TORCH_UNREAD`` whose module is loaded."""
    for name, paths in list(TORCH_UNREAD.items()):
        module = sys.modules.get(name)
        if module is None:
            continue  # not loaded: none of its code runs
        for path in paths:
            function: Any = module
            for part in path.split("."):
                function = getattr(function, part, None)
            if function is not None:  # not in this torch version: nothing to know it by
                found = _code(function)
                TORCH_ASSIGNS[id(found)] = found
        TORCH_UNREAD.pop(name, None)


@constant_result
def compiled_slot(cls: type, name: str) -> str | None:
    """``slot_kind`` of ``name`` on ``cls`` for an assignment dynamo is tracing: called by dynamo
    while it traces, never at run time (its answer is a constant of the compiled code). It reads
    the class as it is then, in eager Python (dynamo before torch 2.9 cannot trace a lookup in a
    class's ``__dict__``): what was added to the class after its statement counts, as in eager
    code (the property torch's parametrizations add to the class they make)."""
    record: ClassRecord = cls.__autoreg__  # type: ignore[attr-defined]
    return slot_kind(record.namespaces, name)


@constant_result
def compiled_torch_assigns(cls: type, name: str) -> bool:
    """Whether the first store of a tensor or container under ``name``, new to an instance of
    ``cls``, that dynamo is tracing is made by torch's own code (``TORCH_ASSIGNS``:
    ``functional_call`` inside a compiled function), as the mixin's ``__setattr__`` reads it from
    the caller's frame in eager code: the first function dynamo inlines below the ``__setattr__``
    overrides of the instance's classes. Called by dynamo while it traces, never at run time (its
    answer is a constant of the compiled code). A declared name is the model's. Where dynamo's
    tracing state cannot be read, the store is the model's, as in eager code when no frame of
    torch's makes it."""
    record: ClassRecord = cls.__autoreg__  # type: ignore[attr-defined]
    if name in record.declarations:
        return False
    read_torch_assigners()  # at trace time only: what the eager path checks first is no saving here
    for code in inlined_codes() or ():
        if id(code) not in record.setattr_codes:
            return id(code) in TORCH_ASSIGNS
    return False


def _code(function: Any) -> types.CodeType:
    """The code of a function, a class or static method's, a decorated one's (``@deprecated``)."""
    code: types.CodeType = inspect.unwrap(getattr(function, "__func__", function)).__code__
    return code


# The code that writes a derived weight: each utility's apply (the first) and its hook's __call__
# (at every forward). By id, the code objects kept beside: they live as long as torch.
_UTILITY_WRITES: Final[dict[int, types.CodeType]] = {
    id(code): code
    for code in map(
        _code,
        (
            BasePruningMethod.apply,
            BasePruningMethod.__call__,
            WeightNorm.apply,
            WeightNorm.__call__,
            SpectralNorm.apply,
            SpectralNorm.__call__,
        ),
    )
}


def kind_of(value: object) -> Kind:
    """The ``Kind`` of ``value``; cheap for plain tensors, parameters and plain values (a negative
    ``isinstance`` against ``torch.Tensor`` is not, nor one against ``nn.Parameter``, whose
    metaclass checks in Python)."""
    cls = type(value)
    if cls is torch.Tensor:
        # A plain Tensor is an nn.Buffer through the flag its metaclass's __instancecheck__ reads
        # (torch gives the flag of a Parameter only to tensor subclasses).
        if getattr(value, "_is_buffer", False):
            return EXPLICIT
        if not value.requires_grad:  # type: ignore[attr-defined]
            return TENSOR
        return GRAD_LEAF if value.is_leaf else GRAD_RESULT  # type: ignore[attr-defined]
    kind = _KINDS_BY_TYPE.get(cls)
    if kind is not None:
        return kind
    # By the type alone: isinstance reads a value's __class__ through the value when its type
    # does not match, and hasattr runs its __getattr__ (a config's may raise KeyError).
    if issubclass(cls, nn.Module):  # before the tensor check, whose negative answer costs
        return EXPLICIT
    if issubclass(cls, torch.Tensor):
        # A tensor's own flags, as nn.Module reads them (a Parameter's or nn.Buffer's metaclass)
        if isinstance(value, (nn.Parameter, nn.Buffer)):
            return EXPLICIT
        return _tensor_kind(cast(torch.Tensor, value))
    if issubclass(cls, CONTAINERS):
        return CONTAINER
    return OTHER


def defines_torch_function(cls: type) -> bool:
    """Whether instances of ``cls`` take part in torch functions (a torch.fx ``Proxy``): the
    attribute looked up in the namespaces of its MRO, as the interpreter finds it, without
    running anything the value defines."""
    return any("__torch_function__" in klass.__dict__ for klass in cls.__mro__)


_UNSEEN: Final[Any] = object()
_TENSOR: Final = torch.Tensor
_PARAMETER: Final = nn.Parameter
_KINDS_BY_TYPE: Final[dict[type, Kind]] = {
    **dict.fromkeys((int, float, bool, str, bytes, complex), OTHER),
    type(None): NONE,
    type: OTHER,  # a class (torch's parametrizations assign __class__): what kind_of finds
    **dict.fromkeys((list, tuple, dict), CONTAINER),
    nn.Parameter: EXPLICIT,
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
    owner = next(k for k in cls.__mro__ if name in k.__dict__)
    attribute = owner.__dict__[name]
    if owner is nn.Module:  # nn.Module's own method (half, type, cuda): only a rename helps
        kind = type(attribute).__name__
        shown = f"{name}()" if callable(attribute) else name  # a method; a bool, a TypeVar
        return f"is nn.Module's own {kind} ({shown}) and hides any buffer of that name"
    return (
        f"is defined on the class (a class-level {type(attribute).__name__}) and hides any "
        "buffer of that name"
    )


read_torch_assigners()
