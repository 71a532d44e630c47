"""``AutoRegisterMixin``: tensors assigned to a module move with it.

Design note
-----------
``__setattr__`` settles the common assignments inline - a plain value (row 12), a runtime tensor
updated in ``forward`` (row 11), a tensor assigned to a buffer (row 3) - each exactly as nn.Module
would, minus its detours. Everything else goes to ``_assign``: ``_contract.classify`` picks the
row of the README's contract table, ``_contract.enforce`` applies strict and warn mode, and
``_assign`` carries the decision out. Decisions about a class are made when the class is created
(``_record``); per instance, autoreg keeps one dict in ``__dict__``, ``_autoreg_owned``: the names
it registered, carries, or leaves to a framework base.

Footguns this catches: a tensor left behind by ``.cuda()``; ``.half()`` leaving a constant in
float32; a checkpoint that changes when a model migrates (buffers are non-persistent by default);
per-rank runtime state overwritten by DDP's buffer broadcast (runtime tensors are not buffers);
derived weights of prune / weight_norm / spectral_norm turned into buffers (grad tensors are left
alone); ``nn.Buffer(persistent=False)`` silently made persistent (nn.Module handles ``nn.Buffer``);
a buffer hidden behind a class attribute (reported, never registered); a framework's own state
(Lightning's hyperparameters, torchmetrics' states) converted or broadcast (row 4); an old pickle
of the class, from before it used autoreg, whose tensors stay behind (adopted on unpickling).

Nothing on the steady-state path (updating a carried tensor, reassigning a buffer, ``m.x = 1``)
calls ``warnings``, ``logging``, a ``ContextVar`` or ``sys._getframe``: they break torch.compile
graphs on every call. Warnings are emitted only the first time a (class, name) is seen.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Final

import torch
from torch import nn
from torch.nn.modules import module as _torch_module

from ._carry import CARRYING, apply_carrying, carries, loose_tensors
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
from ._record import CONSTRUCTING, ClassRecord, create_record, mark_construction, unknown_keywords
from ._walk import CONTAINERS

__all__ = ["AutoRegisterMixin", "Module"]

_ACTED_ON: Final = (torch.Tensor, nn.Module, *CONTAINERS)
_BUFFER_HOOKS: Final[dict[Any, Any]] = getattr(
    _torch_module, "_global_buffer_registration_hooks", {}
)
_MODULE_HOOKS: Final[dict[Any, Any]] = getattr(
    _torch_module, "_global_module_registration_hooks", {}
)
_REGISTER_BUFFER: Final = nn.Module.register_buffer
_MISSING: Final = object()


if TYPE_CHECKING:
    # Type checkers see the mixin as the module it always ends up in; at run time it is a plain
    # class, so that it can stand before any nn.Module subclass in the bases.
    _MixinBase = nn.Module
else:
    _MixinBase = object


class AutoRegisterMixin(_MixinBase):
    """Mix into an ``nn.Module`` subclass, first in its bases: its assigned tensors move with it.

    Class keywords, inherited by subclasses (each from the nearest class in the MRO that set it)
    and overridable by them:

    - ``persistent`` (default False): whether auto-registered buffers are saved in ``state_dict``.
    - ``strict`` (default False): raise ``UnregisteredTensorError`` on a tensor whose name is not
      declared by an annotation, instead of registering or carrying it.
    - ``warn`` (default False): register or carry it, and warn once per class and name.
    """

    __autoreg__: ClassVar[ClassRecord]

    def __init_subclass__(
        cls,
        *,
        persistent: bool | None = None,
        strict: bool | None = None,
        warn: bool | None = None,
        **kwargs: Any,
    ) -> None:
        if kwargs:
            unknown_keywords(cls, AutoRegisterMixin, kwargs)
        super().__init_subclass__(**kwargs)
        keywords = {"persistent": persistent, "strict": strict, "warn": warn}
        cls.__autoreg__ = create_record(cls, AutoRegisterMixin, keywords)
        mark_construction(cls, PENDING, _construction_ended)

    def __setattr__(self, name: str, value: Any) -> None:
        d = self.__dict__
        owned = d.get(OWNED)
        role = owned.get(name) if owned else None
        if not isinstance(value, _ACTED_ON):
            if role is None and type(self).__autoreg__.direct:
                params = d.get("_parameters")
                if params is None or not (
                    name in params or name in d["_buffers"] or name in d["_modules"]
                ):
                    # Row 12: exactly what nn.Module.__setattr__ does with this value and name.
                    object.__setattr__(self, name, value)
                    return
            explicit = False
        else:
            explicit = is_explicit(value)
            if explicit:
                if role is None:
                    # Row 1. A module, where no hook or override could see the difference: what
                    # nn.Module.__setattr__ does with it; else the next __setattr__ itself.
                    params = d.get("_parameters")
                    if (
                        params is not None
                        and name not in params
                        and isinstance(value, nn.Module)
                        and type(self).__autoreg__.direct
                        and not _MODULE_HOOKS
                    ):
                        if name in d:
                            del d[name]
                        if name in d["_buffers"]:
                            del d["_buffers"][name]
                            d["_non_persistent_buffers_set"].discard(name)
                        d["_modules"][name] = value
                    else:
                        type(self).__autoreg__.setattr_next.__setattr__(self, name, value)  # type: ignore[call-arg,arg-type]
                    return
            elif isinstance(value, torch.Tensor):
                if role == CARRIED:
                    if not value.requires_grad:
                        object.__setattr__(self, name, value)  # Row 11: runtime state updated.
                        return
                else:
                    buffers = d.get("_buffers")
                    if buffers is not None and (
                        name in buffers or (role is None and CONSTRUCTING in d)
                    ):
                        record = type(self).__autoreg__
                        # Without a hook or override that could see the difference, what
                        # nn.Module's path through register_buffer ends in.
                        plain = (
                            record.direct
                            and not _BUFFER_HOOKS
                            and nn.Module.register_buffer is _REGISTER_BUFFER
                        )
                        if name in buffers:
                            # Row 3, persistence kept.
                            if plain:
                                buffers[name] = value
                            else:
                                record.setattr_next.__setattr__(self, name, value)  # type: ignore[call-arg,arg-type]
                            return
                        # Rows 9 and 10 for a name this class registered before: the decision
                        # is the class's, what could change it is checked again.
                        persistent = record.registers.get(name)
                        if (
                            plain
                            and persistent is not None
                            and not value.requires_grad
                            and not d["_parameters"]  # no weight it could be a view of
                            and name not in d
                            and name not in d["_modules"]
                            and not any(name in namespace for namespace in record.namespaces)
                        ):
                            buffers[name] = value
                            if persistent:
                                d["_non_persistent_buffers_set"].discard(name)
                            else:
                                d["_non_persistent_buffers_set"].add(name)
                            _owned(self)[name] = BUFFER
                            return
        _assign(self, name, value, role, explicit)

    def __delattr__(self, name: str) -> None:
        super().__delattr__(name)
        owned = self.__dict__.get(OWNED)
        if owned and name in owned:
            del owned[name]

    def __getstate__(self) -> dict[str, Any]:
        """nn.Module's, with autoreg's record always in it: an instance of an autoreg class is
        never taken for an old pickle (``__setstate__``), whatever it owns."""
        state: dict[str, Any] = dict(super().__getstate__())  # type: ignore[no-untyped-call]
        if OWNED not in state:
            state[OWNED] = {}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """nn.Module's; then a pickle made before the class used autoreg is adopted."""
        super().__setstate__(state)  # type: ignore[no-untyped-call]
        if OWNED not in state:
            _adopt(self)
        elif carries(self):
            CARRYING[0] = True

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> Any:
        """Convert parameters and buffers as nn.Module does, then the carried tensors."""
        # The next _apply in the MRO, looked up by name so that a patched one is honoured.
        apply_next: Any = type(self).__autoreg__.apply_next._apply  # type: ignore[attr-defined]
        if not CARRYING[0]:
            # recurse is passed on only when set, as nn.Module does, so that overrides written
            # before it existed keep working.
            return apply_next(self, fn) if recurse else apply_next(self, fn, recurse)
        return apply_carrying(self, apply_next, fn, recurse)


# --- carrying out a decision ---------------------------------------------------------------------


def _assign(
    module: AutoRegisterMixin, name: str, value: Any, role: str | None, explicit: bool
) -> None:
    """Everything ``__setattr__`` does not settle inline: classify, enforce, execute."""
    record = type(module).__autoreg__
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
    if action is Action.REGISTER and CONSTRUCTING in d and "_buffers" in d:
        _register(module, name, value, decision.persistent)  # rows 9 and 10, the common case
        if record.mode is Mode.REGISTER and not record.framework_code:
            record.registers[name] = decision.persistent
    elif action is Action.NN_MODULE:
        _next_setattr(module, name, value)
    elif action is Action.FRAMEWORK:
        _next_setattr(module, name, value)
        _owned(module)[name] = FRAMEWORK
    elif action is Action.EXPLICIT:
        if role is None:
            _next_setattr(module, name, value)
        else:
            _take_over(module, name, value, role)
    elif action is Action.PLAIN:
        if role == BUFFER:
            _forget(module, name)
        _next_setattr(module, name, value)
        if role is not None and role != BUFFER:
            del d[OWNED][name]
    else:
        _store(module, name, value, action, decision.persistent)


def _store(
    module: AutoRegisterMixin, name: str, value: Any, action: Action, persistent: bool
) -> None:
    """Rows 8 to 11: carry ``value`` or register it as a buffer."""
    d = module.__dict__
    constructing = CONSTRUCTING in d
    if not constructing and (action is Action.REGISTER or name not in d):
        verb = "register" if action is Action.REGISTER else "carry"
        refuse_while_exporting(module, name, value, verb)
    if action is Action.CARRY_CONTAINER:
        _next_setattr(module, name, value)
        _owned(module)[name] = CONTAINER
        CARRYING[0] = True
    elif action is Action.CARRY:
        object.__setattr__(module, name, value)
        _owned(module)[name] = CARRIED
        CARRYING[0] = True
    elif "_buffers" not in d:
        # Before nn.Module.__init__ ran: registered when construction ends.
        object.__setattr__(module, name, value)
        if PENDING not in d:
            d[PENDING] = set()
        d[PENDING].add(name)
    else:
        _register(module, name, value, persistent)


def _by_framework(record: ClassRecord) -> bool:
    """Whether the assignment is made by the code of a framework base class (row 4)."""
    if torch.compiler.is_compiling():
        return False
    # _by_framework <- _assign <- AutoRegisterMixin.__setattr__ <- the assignment
    return record.by_framework(sys._getframe(3))


def _register(module: AutoRegisterMixin, name: str, value: torch.Tensor, persistent: bool) -> None:
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
            type(module).__autoreg__.direct
            and not _BUFFER_HOOKS
            and nn.Module.register_buffer is _REGISTER_BUFFER
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
    _owned(module)[name] = BUFFER


def _take_over(module: AutoRegisterMixin, name: str, value: Any, role: str) -> None:
    """Row 1 over a name autoreg owns: the explicit value takes the name over."""
    d = module.__dict__
    del d[OWNED][name]
    # nn.Module refuses to register a buffer over a plain attribute, and carried values are.
    previous = _MISSING
    if role in (CARRIED, CONTAINER) and name in d:
        previous = d[name]
        del d[name]
    try:
        _next_setattr(module, name, value)
    except BaseException:
        d[OWNED][name] = role
        if previous is not _MISSING:
            d[name] = previous
        raise


def _forget(module: AutoRegisterMixin, name: str) -> None:
    """Drop autoreg's claim on ``name``; a buffer autoreg registered is unregistered."""
    d = module.__dict__
    if d[OWNED].pop(name) == BUFFER and name in d["_buffers"]:
        del d["_buffers"][name]
        d["_non_persistent_buffers_set"].discard(name)


def _next_setattr(module: AutoRegisterMixin, name: str, value: Any) -> None:
    """The ``__setattr__`` that comes after the mixin: nn.Module's, unless a base overrides it."""
    setattr_next: Any = type(module).__autoreg__.setattr_next.__setattr__
    setattr_next(module, name, value)


def _owned(module: AutoRegisterMixin) -> dict[str, str]:
    d = module.__dict__
    if OWNED not in d:
        object.__setattr__(module, OWNED, {})  # traced by dynamo, where d[OWNED] = ... is not
    owned: dict[str, str] = d[OWNED]
    return owned


# --- construction and unpickling -----------------------------------------------------------


def _construction_ended(module: AutoRegisterMixin) -> None:
    """Register the tensors assigned before nn.Module.__init__ ran, now that it has."""
    d = module.__dict__
    pending: set[str] = d.pop(PENDING)
    record = type(module).__autoreg__
    for name in sorted(pending):
        value = d.get(name)
        if "_buffers" in d and isinstance(value, torch.Tensor) and not value.requires_grad:
            _register(module, name, value, record.persistence(record.declarations.get(name)))
        # else nn.Module.__init__ never ran: they stay plain attributes, as in nn.Module


def _adopt(module: AutoRegisterMixin) -> None:
    """Carry the tensors of an instance pickled before its class used autoreg.

    Plain tensors (not requiring grad, not declared ``autoreg.Plain``, under a name that could
    hold a buffer) and list, tuple and dict attributes become carried: they move with ``.to()``,
    and ``state_dict()`` stays what the pickle had. Classes built on a framework base are not
    adopted: which of their attributes are the framework's is not in the pickle.
    """
    record = type(module).__autoreg__
    if record.framework_code:
        return
    d = module.__dict__
    owned = _owned(module)
    for name, value in list(d.items()):
        if name in MODULE_INTERNALS or name.startswith("_autoreg_"):
            continue
        if record.declarations.get(name) is Declaration.PLAIN:
            continue
        if isinstance(value, CONTAINERS):
            if slot_kind(record.namespaces, name) not in ("internal", "descriptor"):
                owned[name] = CONTAINER  # as row 8 carries it
        elif (
            isinstance(value, torch.Tensor)
            and not is_explicit(value)
            and not value.requires_grad
            and slot_kind(record.namespaces, name) is None
        ):
            owned[name] = CARRIED
    if carries(module):
        CARRYING[0] = True


class Module(AutoRegisterMixin, nn.Module):
    """``nn.Module`` whose assigned tensors move with it. Subclass it instead of ``nn.Module``."""
