"""``AutoRegisterMixin``: tensors assigned to a module move with it.

Design note
-----------
Every assignment takes one path: ``situation`` reads its facts, ``decide`` returns what ``classify``
decided for that situation (kept per class), ``enforce`` applies strict and warn mode, ``execute``
carries the decision out. There is no second decision: a steady-state assignment (``m.x = 1``, a
runtime tensor updated in ``forward``, a buffer updated) is a dictionary lookup of a decision
``classify`` made. What ``.to()`` converts is derived from the same decisions (``_carry``).

Decisions about a class are made when the class is created (``_record``) and finalized when it is
first instantiated (``_construction``: construction methods wrapped, annotations read again). Per
instance, autoreg keeps in ``__dict__`` only the roles of some names (``_state``).

Footguns this catches: a tensor left behind by ``.cuda()``; ``.half()`` leaving a constant in
float32; a checkpoint that changes when a model migrates (buffers are non-persistent by default);
per-rank runtime state overwritten by DDP's buffer broadcast (runtime tensors are not buffers);
the weights prune / weight_norm / spectral_norm derive turned into buffers (row 6);
``nn.Buffer(persistent=False)`` silently made persistent (nn.Module handles ``nn.Buffer``); a buffer
hidden behind a class attribute (reported, never registered); a framework's own state
(Lightning's hyperparameters, torchmetrics' states) converted or broadcast (row 4); an old pickle
of the class, from before it used autoreg, whose tensors would stay behind (they are carried).

Nothing on the steady-state path calls ``warnings``, ``logging``, a ``ContextVar`` or
``sys._getframe``: they break torch.compile graphs on every call. Inside code dynamo compiles,
the path reads only what the assignments there cannot change (no per-class dict that grows), so
that compile counts are the hand-written module's.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import nn

from ._attribution import attribute
from ._carry import apply
from ._config import Mode
from ._construction import finalize, prepare
from ._contract import Concern, decide, situation
from ._enforce import enforce
from ._execute import execute, owned
from ._record import ClassRecord, create_record, unknown_keywords
from ._state import BUFFER, CONSTRUCTING, FRAMEWORK, MODEL, MODULE_INTERNALS, OWNED, PENDING

__all__ = ["AutoRegisterMixin", "Module"]


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
        prepare(cls)

    def __setattr__(self, name: str, value: Any) -> None:
        record = type(self).__autoreg__
        d = self.__dict__
        roles = d.get(OWNED)
        role = roles.get(name) if roles is not None else None
        compiling = torch.compiler.is_compiling()
        if role is None and record.attributes and not compiling and name not in MODULE_INTERNALS:
            # Row 4: the first assignment of a name decides whose it is, for good.
            role = owned(self)[name] = attribute(record, sys._getframe(1))
        s = situation(record, d, name, value, role, compiling=compiling)
        decision = None if compiling else record.decisions.get(s)
        if decision is None:
            if not record.final and not compiling:
                finalize(type(self))  # an instance made without cls.__new__ (object.__new__)
            decision = decide(record, s, compiling=compiling)
        if decision.concern is not None and (
            record.mode is not Mode.REGISTER or decision.concern is Concern.GRAD_LEAF
        ):
            enforce(self, record, name, value, decision)
        execute(self, record, s, value, decision)

    def __delattr__(self, name: str) -> None:
        super().__delattr__(name)
        roles = self.__dict__.get(OWNED)
        if roles is not None:
            roles.pop(name, None)

    def __getstate__(self) -> dict[str, Any]:
        """nn.Module's state, with autoreg's roles copied (a copy shares nothing of autoreg's)
        and without construction state (a copy is never being built)."""
        state: dict[str, Any] = dict(super().__getstate__())  # type: ignore[no-untyped-call]
        state.pop(CONSTRUCTING, None)
        state.pop(PENDING, None)
        state[OWNED] = dict(state.get(OWNED) or {})
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """nn.Module's; a pickle made before the class used autoreg has no roles: on a class with
        a framework base, whose each name is cannot be known, so all stay nn.Module's."""
        roles = state.get(OWNED)
        super().__setstate__(state)  # type: ignore[no-untyped-call]
        record = type(self).__autoreg__
        if roles is None:
            roles = {}
            if record.attributes:
                roles.update((name, FRAMEWORK) for name in state if name not in MODULE_INTERNALS)
        else:  # carried values had roles before autoreg 0.2: now they need none
            roles = {k: v for k, v in roles.items() if v in (BUFFER, FRAMEWORK, MODEL)}
        object.__setattr__(self, OWNED, roles)
        self.__dict__.pop(CONSTRUCTING, None)
        self.__dict__.pop(PENDING, None)

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> Any:
        """Convert parameters and buffers as nn.Module does, then what the tree carries."""
        # The next _apply in the MRO, looked up by name so that a patched one is honoured.
        apply_next: Any = type(self).__autoreg__.apply_next._apply  # type: ignore[attr-defined]
        return apply(self, apply_next, fn, recurse)


class Module(AutoRegisterMixin, nn.Module):
    """``nn.Module`` whose assigned tensors move with it. Subclass it instead of ``nn.Module``."""
