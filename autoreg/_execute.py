"""Carrying out the contract's decision for ``self.name = value``.

``AutoRegisterMixin.__setattr__`` settles the common assignments inline and hands everything else
to ``assign``: ``_contract.classify`` picks the row of the README's contract table,
``_contract.enforce`` applies strict and warn mode, and the functions here do what the row says -
register a buffer, carry a tensor or a container, leave the name to nn.Module or to a framework
base, or take it over from autoreg. Also here: what happens when construction ends (tensors
assigned before ``nn.Module.__init__`` ran are registered) and when an old pickle is loaded.
"""

from __future__ import annotations

import sys
from typing import Any, Final

import torch
from torch import nn
from torch.nn.modules import module as _torch_module

from ._carry import carries, loose_tensors, note_carrier
from ._config import Mode
from ._contract import (
    BUFFER,
    CARRIED,
    CONTAINER,
    FRAMEWORK,
    MODULE_INTERNALS,
    OWNED,
    PENDING,
    Action,
    Concern,
    classify,
    enforce,
    is_explicit,
    slot_kind,
)
from ._declarations import Declaration
from ._export import refuse_while_exporting
from ._record import CONSTRUCTING, ClassRecord, record_of
from ._walk import CONTAINERS

__all__ = [
    "BUFFER_HOOKS",
    "MODULE_HOOKS",
    "REGISTER_BUFFER",
    "adopt",
    "assign",
    "construction_ended",
    "next_setattr",
    "owned",
    "register",
]

# What nn.Module's own paths would run besides storing the value: where none of it is there,
# the mixin may store the value itself (``__setattr__``'s fast paths, ``register``).
BUFFER_HOOKS: Final[dict[Any, Any]] = getattr(
    _torch_module, "_global_buffer_registration_hooks", {}
)
MODULE_HOOKS: Final[dict[Any, Any]] = getattr(
    _torch_module, "_global_module_registration_hooks", {}
)
REGISTER_BUFFER: Final = nn.Module.register_buffer
_MISSING: Final = object()


def assign(module: nn.Module, name: str, value: Any, role: str | None, explicit: bool) -> None:
    """Everything ``__setattr__`` does not settle inline: classify, enforce, execute."""
    record = record_of(module)
    if not record.resolved and not torch.compiler.is_compiling():
        record.resolve_declarations()  # a class without __init__ of its own: first use
    d = module.__dict__
    by_framework = role is None and bool(record.framework_code) and _by_framework(record)
    decision = classify(record, d, name, value, role, explicit, by_framework)
    concern = decision.concern
    if concern is not None and (record.mode is not Mode.REGISTER or concern is Concern.GRAD_LEAF):
        loose = loose_tensors(module, value) if concern is Concern.CONTAINER else []
        enforce(module, record, name, value, decision, loose)

    action = decision.action
    if action is Action.NN_MODULE:
        next_setattr(module, name, value)
    elif action is Action.FRAMEWORK:
        next_setattr(module, name, value)
        owned(module)[name] = FRAMEWORK
    elif action is Action.EXPLICIT:
        if role is None:
            next_setattr(module, name, value)
        else:
            _take_over(module, name, value, role)
    elif action is Action.PLAIN:
        if role == BUFFER:
            _forget(module, name)
        next_setattr(module, name, value)
        if role is not None and role != BUFFER:
            del d[OWNED][name]
    else:
        _store(module, name, value, action, decision.persistent)


def _store(module: nn.Module, name: str, value: Any, action: Action, persistent: bool) -> None:
    """Rows 8 to 11: carry ``value`` or register it as a buffer."""
    d = module.__dict__
    constructing = CONSTRUCTING in d
    if not constructing and (action is Action.REGISTER or name not in d):
        verb = "register" if action is Action.REGISTER else "carry"
        refuse_while_exporting(module, name, value, verb)
    if action is Action.CARRY_CONTAINER:
        next_setattr(module, name, value)
        owned(module)[name] = CONTAINER
        note_carrier(module)
    elif action is Action.CARRY:
        object.__setattr__(module, name, value)
        owned(module)[name] = CARRIED
        note_carrier(module)
    elif "_buffers" not in d:
        # Before nn.Module.__init__ ran: registered when construction ends.
        object.__setattr__(module, name, value)
        if PENDING not in d:
            d[PENDING] = set()
        d[PENDING].add(name)
    else:
        register(module, name, value, persistent)
        record = record_of(module)
        if constructing and record.mode is Mode.REGISTER and not record.framework_code:
            # The next instance's __setattr__ takes this decision inline (rows 9 and 10).
            record.registers[name] = persistent


def _by_framework(record: ClassRecord) -> bool:
    """Whether the assignment is made by the code of a framework base class (row 4)."""
    if torch.compiler.is_compiling():
        return False
    # _by_framework <- assign <- AutoRegisterMixin.__setattr__ <- the assignment
    return record.by_framework(sys._getframe(3))


def register(module: nn.Module, name: str, value: torch.Tensor, persistent: bool) -> None:
    """Register ``value`` as buffer ``name``; autoreg has made every check register_buffer makes.

    nn.Module's register_buffer is skipped only where that is provably identical: no global
    buffer-registration hook, ``nn.Module.register_buffer`` not replaced (accelerate's
    ``init_empty_weights`` patches it), and no override in the class.
    """
    d = module.__dict__
    previous = d.get(name, _MISSING)  # a plain attribute, e.g. `self.x = None`
    if previous is not _MISSING:
        del d[name]
    try:
        if (
            record_of(module).direct
            and not BUFFER_HOOKS
            and nn.Module.register_buffer is REGISTER_BUFFER
        ):
            d["_buffers"][name] = value
            if persistent:
                d["_non_persistent_buffers_set"].discard(name)
            else:
                d["_non_persistent_buffers_set"].add(name)
        else:
            module.register_buffer(name, value, persistent)
    except BaseException:
        if previous is not _MISSING:
            d[name] = previous
        raise
    owned(module)[name] = BUFFER


def _take_over(module: nn.Module, name: str, value: Any, role: str) -> None:
    """Row 1 over a name autoreg owns: the explicit value takes the name over."""
    d = module.__dict__
    del d[OWNED][name]
    # nn.Module refuses to register a buffer over a plain attribute, and carried values are.
    previous = _MISSING
    if role in (CARRIED, CONTAINER) and name in d:
        previous = d[name]
        del d[name]
    try:
        next_setattr(module, name, value)
    except BaseException:
        d[OWNED][name] = role
        if previous is not _MISSING:
            d[name] = previous
        raise


def _forget(module: nn.Module, name: str) -> None:
    """Drop autoreg's claim on ``name``; a buffer autoreg registered is unregistered."""
    d = module.__dict__
    if d[OWNED].pop(name) == BUFFER and name in d["_buffers"]:
        del d["_buffers"][name]
        d["_non_persistent_buffers_set"].discard(name)


def next_setattr(module: nn.Module, name: str, value: Any) -> None:
    """The ``__setattr__`` that comes after the mixin: nn.Module's, unless a base overrides it."""
    setattr_next: Any = record_of(module).setattr_next.__setattr__
    setattr_next(module, name, value)


def owned(module: nn.Module) -> dict[str, str]:
    d = module.__dict__
    if OWNED not in d:
        object.__setattr__(module, OWNED, {})  # traced by dynamo, where d[OWNED] = ... is not
    owned: dict[str, str] = d[OWNED]
    return owned


# --- construction and unpickling -----------------------------------------------------------


def construction_ended(module: nn.Module) -> None:
    """Register the tensors assigned before nn.Module.__init__ ran, now that it has."""
    d = module.__dict__
    pending: set[str] = d.pop(PENDING)
    record = record_of(module)
    for name in sorted(pending):
        value = d.get(name)
        if "_buffers" in d and isinstance(value, torch.Tensor) and not value.requires_grad:
            register(module, name, value, record.persistence(record.declarations.get(name)))
        # else nn.Module.__init__ never ran: they stay plain attributes, as in nn.Module


def adopt(module: nn.Module) -> None:
    """Carry the tensors of an instance pickled before its class used autoreg.

    Plain tensors (not requiring grad, not declared ``autoreg.Plain``, under a name that could
    hold a buffer) and list, tuple and dict attributes become carried: they move with ``.to()``,
    and ``state_dict()`` stays what the pickle had. Classes built on a framework base are not
    adopted: which of their attributes are the framework's is not in the pickle.
    """
    record = record_of(module)
    if record.framework_code:
        return
    d = module.__dict__
    names = owned(module)
    for name, value in list(d.items()):
        if name in MODULE_INTERNALS or name.startswith("_autoreg_"):
            continue
        if record.declarations.get(name) is Declaration.PLAIN:
            continue
        if isinstance(value, CONTAINERS):
            if slot_kind(record.namespaces, name) not in ("internal", "descriptor"):
                names[name] = CONTAINER  # as row 8 carries it
        elif (
            isinstance(value, torch.Tensor)
            and not is_explicit(value)
            and not value.requires_grad
            and slot_kind(record.namespaces, name) is None
        ):
            names[name] = CARRIED
    if carries(module):
        note_carrier(module)
