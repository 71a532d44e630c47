"""Carrying out a decision of the contract for ``self.name = value``.

Four actions (``_contract.Action``). STORE stores the value exactly as nn.Module's ``__setattr__``
would - rows 3 to 8, 11 and 12 all do, carried values included; when the decision ``moves`` the
value, the name is marked carried (``_carry.carry``), and any other outcome but a None stored
over a carried value takes the mark away.
REGISTER registers a buffer (rows 9 and 10), HAND_OVER hands the value to nn.Module after autoreg
gives the name up (row 1), RELEASE unregisters an auto-registered buffer before the value is
assigned afresh (row 2).

A base that overrides ``__setattr__`` decides where a stored value goes: autoreg carries it only
if it landed in the instance's ``__dict__`` under its name (``landed``), which is observable once
the base has run; so strict and warn mode judge such a value after it is stored (``_mixin``).

Where nothing could observe the difference, the mixin takes nn.Module's path itself instead of
calling it: no ``__setattr__`` override after the mixin (``ClassRecord.direct``), no global
registration hook, no ``register_buffer`` override (looked up live: accelerate patches
``nn.Module.register_buffer``, a class may get one after its first instance).
"""

from __future__ import annotations

from typing import Any, Final

import torch
from torch import nn
from torch.nn.modules import module as _torch_module

from . import _state
from ._carry import carry
from ._contract import HAND_OVER, REGISTER, STORE, Decision
from ._export import refuse_while_exporting
from ._facts import (
    BUFFERS,
    COMPLEX,
    GRAD_LEAF,
    GRAD_RESULT,
    MODULES,
    NONE,
    TENSOR,
    UNBUILT,
    Kind,
    Registry,
    Situation,
)
from ._facts import is_compiling as _is_compiling
from ._record import ClassRecord, record_of
from ._state import BUFFER, CARRIED, CONSTRUCTING, MODEL, PENDING, Building, role_key

__all__ = [
    "answer_call_super_init",
    "execute",
    "next_setattr",
    "register",
    "register_pending",
    "take_over",
    "unregister",
]

_BUFFER_HOOKS: Final[dict[Any, Any]] = getattr(
    _torch_module, "_global_buffer_registration_hooks", {}
)
_MODULE_HOOKS: Final[dict[Any, Any]] = getattr(
    _torch_module, "_global_module_registration_hooks", {}
)
_PARAMETER_HOOKS: Final[dict[Any, Any]] = getattr(
    _torch_module, "_global_parameter_registration_hooks", {}
)
_REGISTER_BUFFER: Final = nn.Module.register_buffer
_REGISTER_PARAMETER: Final = nn.Module.register_parameter
_GETATTR: Final = nn.Module.__getattr__
_GETATTRIBUTE: Final = object.__getattribute__
_STORED_AS_BUFFERS: Final = (TENSOR, GRAD_LEAF, GRAD_RESULT, COMPLEX, NONE)  # see _facts.TENSORS
_MISSING: Final = object()


def execute(
    module: nn.Module, record: ClassRecord, s: Situation, value: Any, decision: Decision
) -> None:
    """Do what ``decision`` says with ``module.name = value``, ``s`` its situation; then record
    whether autoreg carries ``name`` (``_state.CARRIED``)."""
    name, kind, role, registry, constructing, slot, _ = s
    action = decision.action
    if action is STORE:
        moves = decision.moves
        if not record.direct:  # a base's __setattr__ override, then nn.Module's
            setattr_next: Any = record.setattr_next.__setattr__
            setattr_next(module, name, value)
            if moves and module.__dict__.get(name) is not value:
                moves = False  # the base kept it elsewhere (pyro's PyroParam): not autoreg's
        elif registry is None or registry is UNBUILT:
            object.__setattr__(module, name, value)  # where nn.Module.__setattr__ ends for it
        else:
            _store(module, name, value, kind, registry)
        if moves:
            if role != CARRIED:
                carry(module, name)
            return
        if (
            kind is NONE
            and role == CARRIED
            and (record.direct or module.__dict__.get(name, _MISSING) is None)
        ):
            # None, where it landed in the __dict__, keeps the mark: .to() passes over it, and
            # the next tensor stored is carried as it would be anyway. Compiled code reads the
            # name's role: a None between two compiled calls (a state reset) must not change it,
            # as it changes nothing dynamo guards on for the twin.
            return
    elif action is REGISTER:
        if not constructing:
            refuse_while_exporting(module, name, value, "register")
        if registry is UNBUILT:  # registered once nn.Module.__init__ has run
            object.__setattr__(module, name, value)
            d = module.__dict__
            d[PENDING] = {**d.get(PENDING, {}), name: decision}  # replaced: see _state
            answer_call_super_init(type(module))  # which registers them then
        else:
            register(module, name, value, decision)
    elif action is HAND_OVER:
        if (
            registry is None
            and role != BUFFER
            and role != CARRIED  # (a carried name deleted keeps its mark, which goes below)
            and record.direct
            and name not in module.__dict__
        ):
            # A new name: where nn.Module.__setattr__ ends for it, minus its type checks.
            if type(value) is nn.Parameter:
                _add_parameter(module, name, value, slot)
                return
            if isinstance(value, nn.Module) and not _MODULE_HOOKS:
                module.__dict__["_modules"][name] = value
                return
        _explicit(module, record, name, value, role, registry)
    else:  # RELEASE
        _give_up(module, record, name)
        unregister(module, name)
        module.__setattr__(name, value)  # afresh: the name holds nothing now
        return
    if role == CARRIED and module.__dict__.get(role_key(name)) == CARRIED:
        _give_up(module, record, name)  # the value that was carried is gone


def unregister(module: nn.Module, name: str) -> None:
    """Remove buffer ``name`` (row 2), in registries of the instance's own: nn.Module would
    refuse the assignment, so a shallow copy (``copy.copy``) that shares them with its original
    must not take the original's buffer away. They are replaced, not changed in place."""
    d = module.__dict__
    buffers = d["_buffers"]
    d["_buffers"] = type(buffers)((k, v) for k, v in buffers.items() if k != name)
    d["_non_persistent_buffers_set"] = d["_non_persistent_buffers_set"] - {name}


def register_pending(module: nn.Module) -> None:
    """Register the tensors assigned before nn.Module.__init__ ran, if it has run (else they stay
    plain attributes, as in nn.Module), and forget them."""
    d = module.__dict__
    pending: dict[str, Decision] | None = d.pop(PENDING, None)
    if not pending or "_buffers" not in d:
        return
    for name, decision in sorted(pending.items()):
        value = d.get(name)
        if isinstance(value, torch.Tensor) and not value.requires_grad:
            register(module, name, value, decision)


def answer_call_super_init(cls: type) -> None:
    """Make the ``call_super_init`` that instances of the autoreg class ``cls`` read a
    ``_SuperInit`` holding the class's own answer (the first in its MRO: the class statement's, a
    base's, nn.Module's False), unless the answer it inherits is one already: when the class is
    prepared, where its construction may begin before ``nn.Module.__init__``, and at the first
    tensor assigned to an instance before ``nn.Module.__init__`` (``_execute``). Each read costs
    a Python call (nn.Module.__init__ makes three)."""
    for klass in cls.__mro__:
        if "call_super_init" in klass.__dict__:
            answer = klass.__dict__["call_super_init"]
            if type(answer) is not _SuperInit:
                setattr(cls, "call_super_init", _SuperInit(answer))  # noqa: B010 - a descriptor
            return


class _SuperInit:
    """``call_super_init`` on an autoreg class: its own answer, to the class and to an instance.
    ``nn.Module.__init__`` reads it from the instance three times, the last once it has made the
    registries (torch 2.0 to 2.15): then the tensors assigned before it are registered
    (``PENDING``), and a construction that began before it (``_state.EARLY``) puts its mark in the
    ``__dict__``, where compiled code reads it. A class whose ``call_super_init`` is set after its
    statement answers the plain value: what was pending is registered when the construction
    returns, and only eager code reads that construction's mark (design.md's limits). Put on a
    class by ``answer_call_super_init``; ``_construction`` says when."""

    __slots__ = ("answer",)

    def __init__(self, answer: object) -> None:
        self.answer = answer

    def __get__(self, instance: object, owner: type | None = None) -> object:
        if instance is not None:
            d = instance.__dict__
            if "_modules" in d:  # the registries made: nn.Module.__init__'s last read
                if PENDING in d:
                    register_pending(instance)  # type: ignore[arg-type]
                early_ids = _state.EARLY
                if early_ids and CONSTRUCTING not in d and id(d) in early_ids:
                    d[CONSTRUCTING] = Building(d)  # taken away with the call (construct)
        return self.answer

    def __repr__(self) -> str:
        return repr(self.answer)


def _store(module: nn.Module, name: str, value: Any, kind: Kind, registry: Registry | None) -> None:
    """Store ``value`` exactly as nn.Module's ``__setattr__`` would, under a name a registry
    holds, on a class whose ``__setattr__`` after the mixin is nn.Module's."""
    if (
        registry is BUFFERS  # nn.Module.__setattr__'s own path, for a value that is no
        and kind in _STORED_AS_BUFFERS  # Parameter, nn.Buffer or module
        and _plain_register(module)
    ):
        module.__dict__["_buffers"][name] = value  # where register_buffer ends, the
        return  # persistence kept as nn.Module keeps it
    next_setattr(module, name, value)


def _explicit(
    module: nn.Module,
    record: ClassRecord,
    name: str,
    value: Any,
    role: str | None,
    registry: Registry | None,
) -> None:
    """Row 1 over a name a registry holds or autoreg holds: nn.Module's behaviour, after autoreg
    gives the name up (``execute`` hands a new name over itself)."""
    if role == BUFFER:
        _give_up(module, record, name)
    d = module.__dict__
    if record.direct and registry is not UNBUILT and name not in d and type(value) is nn.Parameter:
        if registry is BUFFERS:  # nn.Module.__setattr__'s own path, minus its type checks
            del d["_buffers"][name]
            d["_non_persistent_buffers_set"].discard(name)
        elif registry is MODULES:
            del d["_modules"][name]
        module.register_parameter(name, value)  # its checks, its hooks
        return
    take_over(module, name, value, role == CARRIED)


def _give_up(module: nn.Module, record: ClassRecord, name: str) -> None:
    """What autoreg registered or carried under ``name`` is no longer autoreg's. Only the model's
    own names are autoreg's, so on a class with a framework base the name stays the model's (row
    4: the first assignment decides)."""
    if record.attributes:
        object.__setattr__(module, role_key(name), MODEL)
    elif _is_compiling():  # dynamo cannot trace a deletion here: None reads as no role
        object.__setattr__(module, role_key(name), None)
    else:
        object.__delattr__(module, role_key(name))


def take_over(module: nn.Module, name: str, value: Any, carried: bool) -> None:
    """nn.Module's ``__setattr__``, after removing the value autoreg carries under ``name``, if
    ``carried``: nn.Module refuses an ``nn.Buffer`` over a plain attribute, and a carried value is
    one."""
    d = module.__dict__
    previous = d.get(name, _MISSING)
    if previous is _MISSING or not carried:
        next_setattr(module, name, value)
        return
    del d[name]
    try:
        next_setattr(module, name, value)
    except BaseException:
        d[name] = previous
        raise


def register(module: nn.Module, name: str, value: torch.Tensor, decision: Decision) -> None:
    """Register ``value`` as buffer ``name``, with the decision's persistence, as
    ``register_buffer`` would; a buffer of row 10 (undeclared) is autoreg's."""
    d = module.__dict__
    previous = d.get(name, _MISSING)  # a plain attribute: None, a carried tensor
    if previous is not _MISSING:
        del d[name]  # register_buffer refuses a name that is a plain attribute
    try:
        if _plain_register(module):
            d["_buffers"][name] = value
            if decision.persistent:
                d["_non_persistent_buffers_set"].discard(name)
            else:
                d["_non_persistent_buffers_set"].add(name)
        else:
            module.register_buffer(name, value, decision.persistent)
    except BaseException:
        if previous is not _MISSING:
            d[name] = previous
        raise
    if decision.row == 10:
        # Into the __dict__ itself: object.__setattr__ would search the MRO for a descriptor
        # under a key that is never one, uncached for a string that is not interned.
        d[role_key(name)] = BUFFER


def _add_parameter(module: nn.Module, name: str, value: nn.Parameter, slot: str | None) -> None:
    """``register_parameter(name, value)`` for a name nothing holds. Where none of its checks can
    fail and nothing could observe it (no class attribute under the name, no ``__getattr__`` or
    ``__getattribute__`` but nn.Module's, no override, no hook; a leaf), only its last line: its
    ``hasattr(self, name)`` raises and catches an AttributeError, most of its cost."""
    cls = type(module)
    if (
        slot is None
        and value.grad_fn is None
        and not _PARAMETER_HOOKS
        and cls.register_parameter is _REGISTER_PARAMETER
        and nn.Module.register_parameter is _REGISTER_PARAMETER
        and cls.__getattr__ is _GETATTR
        and cls.__getattribute__ is _GETATTRIBUTE
    ):
        module.__dict__["_parameters"][name] = value
    else:
        module.register_parameter(name, value)  # its checks, its hooks


def _plain_register(module: nn.Module) -> bool:
    """Whether ``register_buffer`` would only store the tensor: nn.Module's own, no hook."""
    return (
        not _BUFFER_HOOKS
        and type(module).register_buffer is _REGISTER_BUFFER
        and nn.Module.register_buffer is _REGISTER_BUFFER
    )


def next_setattr(module: nn.Module, name: str, value: Any) -> None:
    """The ``__setattr__`` that comes after the mixin: nn.Module's, unless a base overrides it."""
    setattr_next: Any = record_of(module).setattr_next.__setattr__
    setattr_next(module, name, value)
