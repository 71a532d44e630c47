"""``AutoRegisterMixin``: tensors assigned to a module move with it.

Design note
-----------
``__setattr__`` settles the common assignments inline - a plain value (row 12), a runtime tensor
updated in ``forward`` (row 11), a tensor assigned to a buffer (row 3) - each exactly as nn.Module
would, minus its detours. Everything else goes to ``_execute.assign``: ``_contract.classify``
picks the row of the README's contract table, ``_contract.enforce`` applies strict and warn mode,
and ``_execute`` carries the decision out. Decisions about a class are made when the class is
created (``_record``); per instance, autoreg keeps one dict in ``__dict__``, ``_autoreg_owned``:
the names it registered, carries, or leaves to a framework base.

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

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Final

import torch
from torch import nn

from ._carry import CARRIERS, QUIET, UNTRACKED, Conversion, apply_carrying, carries, note_carrier
from ._contract import BUFFER, CARRIED, OWNED, PENDING, is_explicit
from ._execute import (
    BUFFER_HOOKS,
    MODULE_HOOKS,
    REGISTER_BUFFER,
    adopt,
    assign,
    construction_ended,
    owned,
)
from ._record import CONSTRUCTING, ClassRecord, create_record, mark_construction, unknown_keywords
from ._walk import CONTAINERS

__all__ = ["AutoRegisterMixin", "Module"]

_ACTED_ON: Final = (torch.Tensor, nn.Module, *CONTAINERS)


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
        mark_construction(cls, PENDING, construction_ended)

    def __setattr__(self, name: str, value: Any) -> None:
        d = self.__dict__
        names = d.get(OWNED)
        role = names.get(name) if names else None
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
                        and not MODULE_HOOKS
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
                            and not BUFFER_HOOKS
                            and nn.Module.register_buffer is REGISTER_BUFFER
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
                            owned(self)[name] = BUFFER
                            return
        assign(self, name, value, role, explicit)

    def __delattr__(self, name: str) -> None:
        super().__delattr__(name)
        names = self.__dict__.get(OWNED)
        if names and name in names:
            del names[name]

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
            adopt(self)
        elif carries(self):
            note_carrier(self)

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> Any:
        """Convert parameters and buffers as nn.Module does, then the carried tensors."""
        # The next _apply in the MRO, looked up by name so that a patched one is honoured.
        apply_next: Any = type(self).__autoreg__.apply_next._apply  # type: ignore[attr-defined]
        if (not CARRIERS and not UNTRACKED[0]) or QUIET.active or type(fn) is Conversion:
            # Nothing carried anywhere, or the root of this .to() does the carrying (or found
            # nothing to carry in its tree). recurse is passed on only when set, as nn.Module
            # does, so that overrides written before it existed keep working.
            if type(fn) is Conversion and id(self) in CARRIERS:
                fn.carriers[id(self)] = self
            return apply_next(self, fn) if recurse else apply_next(self, fn, recurse)
        return apply_carrying(self, apply_next, fn, recurse)


class Module(AutoRegisterMixin, nn.Module):
    """``nn.Module`` whose assigned tensors move with it. Subclass it instead of ``nn.Module``."""
