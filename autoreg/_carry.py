"""``.to()`` for what autoreg carries (rows 8, 10 and 11), at the cost of the tree it converts.

What autoreg carries is recorded where the decision is carried out (``_execute``): an assignment
whose decision ``moves`` a value autoreg stores marks the name ``CARRIED``; any other assignment,
a deletion or a registration takes the mark away (``_state``). ``.to()``, the audits and
``reset_buffers`` read the same mark (``carried``), so they agree with the contract by
construction; a copy carries what the original carries, since it copies the marks; and a value
that nothing carries any more (``self.h = None``) is not looked at. An instance unpickled from
before its class used autoreg is adopted: what the contract would carry is marked (``adopt``).

One ``.to()`` (any ``_apply``): nn.Module's ``_apply`` converts parameters and buffers and
recurses into ``_modules``; ``fn`` is handed to it untouched. Before that work, the outermost
autoreg ``_apply`` of a call walks the modules the call will reach and notes the carried tensors
that something else may also hold, and where the tree registers them (``_Aliases``: a carried
alias of a buffer). While nn.Module's work runs, the call is on a per-thread stack: every autoreg
``_apply`` that runs with the same ``fn`` - below the root, or reached through an ``_apply``
override that converts a module kept outside ``_modules`` (an EMA copy) - joins it, if it carries
anything. When the work is done, the carried values of the root and of the modules that joined
are converted, a module's each time it joined (as nn.Module converts a submodule's buffers once
per parent that holds it): a carried alias of a parameter or buffer becomes what nn.Module made
of it, and any other tensor is converted once, however many carried values hold it. Modules the
call does not reach are never looked at, and nothing outlives the call: what happened before,
elsewhere in the process, cannot change what it does.

A value that cannot be converted (a tensor that escaped ``torch.func.vmap``, a tuple subclass that
cannot be rebuilt) is left as it is, as nn.Module leaves every plain attribute; warn mode says so.
All carried values are converted after nn.Module's own work, and each one either fully or not at
all, so autoreg never leaves a model half-converted.
"""

from __future__ import annotations

import sys
import threading
import warnings
import weakref
from collections.abc import Callable
from typing import Any, Final

import torch
from torch import nn

from ._config import Mode
from ._contract import STORE, decide
from ._errors import AutoRegisterWarning
from ._facts import HELD, kind_of, situation
from ._messages.contract import NOT_CONVERTED
from ._messages.describe import describe
from ._record import ClassRecord
from ._state import (
    CARRIED,
    CARRYING,
    MODULE_INTERNALS,
    OWN_KEYS,
    UNLISTED,
    role_key,
    role_name,
)
from ._walk import iter_tensors, map_tensors

__all__ = [
    "adopt",
    "apply",
    "carried",
    "carried_values",
    "carry",
    "listed",
]

_ApplyFn = Callable[[torch.Tensor], torch.Tensor]
_ref: Final = weakref.ref
_Tensor: Final = torch.Tensor
# How many references a carried tensor has, of which three are the walk's own (the __dict__'s,
# its local and the argument): exact unless the build is free-threaded (with the GIL disabled),
# where every tensor counts as one that something else may hold.
_refcount: Final[Callable[[object], int]] = (
    sys.getrefcount if getattr(sys, "_is_gil_enabled", lambda: True)() else lambda _: sys.maxsize
)
_NONE: Final[dict[str, str]] = {}
_is_compiling = getattr(torch.compiler, "is_dynamo_compiling", torch.compiler.is_compiling)


def carried(module: nn.Module, name: str) -> bool:
    """Whether ``.to()`` converts what ``module.name`` holds: autoreg carries the name."""
    return module.__dict__.get(role_key(name)) == CARRIED


def carried_values(module: nn.Module) -> dict[str, Any]:
    """The values ``module`` (an autoreg instance) carries, by name."""
    d = module.__dict__
    return {
        name: d[name] for name, key in listed(module).items() if name in d and d.get(key) == CARRIED
    }


def carry(module: nn.Module, name: str) -> None:
    """Record that autoreg carries ``module.name``: its role, and the instance's list of the
    names it has carried (a name leaves it only when it is deleted). The list is replaced, never
    changed in place: a copy that bypassed autoreg's hooks may hold the same one (``_state``)."""
    d = module.__dict__
    key = role_key(name)
    object.__setattr__(module, key, CARRIED)
    if _is_compiling():  # the list is left to eager code (_state.UNLISTED)
        object.__setattr__(module, CARRYING, UNLISTED)
        return
    names = d.get(CARRYING)
    if names is UNLISTED:
        names = listed(module)
    if names is None:
        object.__setattr__(module, CARRYING, {name: key})
    elif name not in names:
        object.__setattr__(module, CARRYING, {**names, name: key})


def listed(module: nn.Module) -> dict[str, str]:
    """The instance's list of carried names; made again from the names' roles when compiled code
    left ``UNLISTED`` in its place (every name carried then has its role: nothing is lost)."""
    d = module.__dict__
    names: Any = d.get(CARRYING, _NONE)
    if names is UNLISTED:
        names = {}
        for key, role in list(d.items()):
            if type(role) is str and role == CARRIED:
                name = role_name(key)
                if name is not None:
                    names[name] = key
        d[CARRYING] = names
    listing: dict[str, str] = names
    return listing


def adopt(module: nn.Module) -> None:
    """Carry what an instance unpickled from before its class used autoreg holds: each value
    that the contract would carry were it assigned now, at run time."""
    record: ClassRecord = type(module).__autoreg__  # type: ignore[attr-defined]
    d = module.__dict__
    for name in list(d.keys() - MODULE_INTERNALS):
        value = d[name]
        if name.startswith(OWN_KEYS) or kind_of(value) not in HELD:
            continue
        s = situation(record, d, name, value, d.get(role_key(name)), False)
        decision = decide(record, s, compiling=False)
        if decision.moves and decision.action is STORE:
            carry(module, name)


# --- one .to() -----------------------------------------------------------------------------------


class _Running(threading.local):
    def __init__(self) -> None:
        # Per .to() running in this thread, innermost last: [fn, each module that joined, ...]
        self.conversions: list[list[Any]] = []


_RUNNING: Final = _Running()


def apply(module: nn.Module, fn: _ApplyFn, recurse: bool = True) -> Any:
    """``module._apply(fn, recurse)`` for an autoreg module (``AutoRegisterMixin._apply``):
    nn.Module's work; the carried values once the whole call's work is done.

    The walk is written here, not called: on the benchmark's small layer (a ``.to()`` of 15 µs),
    the call alone cost about 0.5% of its time, measured.
    """
    # The next _apply in the MRO, looked up by name so that a patched one is honoured; recurse is
    # passed on only when unset, as nn.Module does, so that overrides written before it existed
    # (torchmetrics' Metric._apply) keep working.
    apply_next: Any = type(module).__autoreg__.apply_next._apply  # type: ignore[attr-defined]
    running = _RUNNING.conversions
    if running:
        joined = running[-1]
        if joined[0] is fn:  # inside a conversion of the same fn: join it
            if CARRYING in module.__dict__:
                joined.append(module)
            return apply_next(module, fn) if recurse else apply_next(module, fn, recurse)
    # The walk, before nn.Module's work: the carried values of the modules its recursion reaches
    # (through _modules, a shared submodule at each place; the root alone with recurse=False)
    # that something else may also hold.
    shared: set[int] | None = None
    modules: list[nn.Module | None] = [module]
    for reached in modules:  # grows while it is walked
        if reached is None:  # a None child, which nn.Module skips too
            continue
        d = reached.__dict__
        names = d.get(CARRYING)
        if names:
            if names is UNLISTED:  # compiled code carried a name first
                names = listed(reached)
            for name in names:
                value = d.get(name)
                if value is None or (type(value) is _Tensor and _refcount(value) <= 3):
                    continue  # nothing else holds it (the common case), or nothing is there
                if d.get(names[name]) == CARRIED:
                    shared = _note_shared(value, shared)
        if recurse:
            children = d["_modules"]
            if children:
                modules += children.values()
    aliases = None if shared is None else _Aliases(shared, modules)
    joined = [fn]  # fn, then each autoreg module below that joins (_Running); [0]: the root after
    running.append(joined)
    try:
        result = apply_next(module, fn) if recurse else apply_next(module, fn, recurse)
    finally:
        running.pop()  # this call's: conversions start and end nested
    # The root, then each module each time it joined, as nn.Module converts a submodule's buffers
    # each time its recursion reaches it (a submodule shared by two parents: twice).
    joined[0] = module
    for below in joined:
        _convert(below, fn, aliases)
    return result


def _convert(module: nn.Module, fn: _ApplyFn, aliases: _Aliases | None) -> None:
    """Convert what ``module`` carries, each value fully or not at all; a value that cannot be
    converted stays as it is (warn mode says so)."""
    d = module.__dict__
    names = d.get(CARRYING)
    if names is None:
        return
    if names is UNLISTED:  # compiled code carried a name first (a module outside _modules)
        names = listed(module)
    for name, key in names.items():
        value = d.get(name)
        if value is None or d.get(key) != CARRIED:
            continue
        try:
            if type(value) is _Tensor:
                new = _converted(value, fn, aliases)
            else:
                new = _converted_value(value, fn, aliases)
        except Exception as error:  # noqa: BLE001 - left as nn.Module leaves it
            _not_converted(module, name, value, error)
            continue
        if new is not value:
            d[name] = new  # a conversion, not an assignment: as nn.Module writes _buffers


def _converted(tensor: torch.Tensor, fn: _ApplyFn, aliases: _Aliases | None) -> torch.Tensor:
    """What a carried tensor becomes. One that nothing but its module's ``__dict__`` refers to
    (the usual case: a state stored at run time) cannot be registered anywhere nor carried twice:
    ``fn`` converts it. The others were found before nn.Module's work began (``_Aliases``)."""
    if aliases is None or id(tensor) not in aliases.ids:  # one carried value holds it, alone
        if tensor.requires_grad and tensor.is_leaf:
            return tensor  # a weight (row 6)
        return fn(tensor)
    return aliases.converted(tensor, fn)


def _converted_value(value: Any, fn: _ApplyFn, aliases: _Aliases | None) -> Any:
    """What a carried value that is not a plain tensor becomes: its tensors converted, and a
    tuple with its own ``.to()`` (a ``PackedSequence``) moved by it."""
    if isinstance(value, torch.Tensor):
        return _converted(value, fn, aliases)

    def convert(tensor: torch.Tensor) -> torch.Tensor:
        return _converted(tensor, fn, aliases)

    def move(value: Any) -> Any:  # to the device and dtype fn gives its first tensor
        first = next((t for _, t in iter_tensors(value)), None)
        if first is None:
            return value
        probe = convert(first)
        if probe.device == first.device and probe.dtype == first.dtype:
            return value
        return value.to(device=probe.device, dtype=probe.dtype)

    return map_tensors(value, convert, move)


class _Aliases:
    """The carried tensors of one ``.to()`` that may be shared, and where the tree registers them:
    a carried alias of a parameter or buffer becomes what nn.Module made of it (the parameter
    converted in place, the new buffer, the new parameter of ``.to("meta")``), and each is
    converted once, however many carried values hold it."""

    __slots__ = ("done", "ids", "positions")

    def __init__(self, ids: set[int], modules: list[nn.Module | None]) -> None:
        self.ids = ids
        # id(original) -> (weak original, converted): a live original is never confused with a
        # dead one whose id was reused, and none is kept alive.
        self.done: dict[int, tuple[weakref.ref[torch.Tensor], torch.Tensor]] = {}
        self.positions: dict[int, tuple[dict[str, Any], str]] = {}
        for module in modules:
            if module is None:
                continue
            for registry in (module._parameters, module._buffers):
                for key, tensor in registry.items():
                    if id(tensor) in ids and id(tensor) not in self.positions:
                        self.positions[id(tensor)] = (registry, key)

    def converted(self, tensor: torch.Tensor, fn: _ApplyFn) -> torch.Tensor:
        """What a carried tensor that may be shared becomes: what nn.Module made of it where the
        tree registers it, else ``fn``'s result, once per tensor."""
        key = id(tensor)
        done = self.done.get(key)
        if done is not None and done[0]() is tensor:
            return done[1]
        position = self.positions.get(key)
        new: torch.Tensor
        if position is not None:
            registry, name = position
            new = registry[name]  # what nn.Module made of it
        elif (tensor.requires_grad and tensor.is_leaf) or isinstance(tensor, nn.Parameter):
            return tensor  # a weight (row 6), or a parameter of no module in the tree
        else:
            new = fn(tensor)
        self.done[key] = (_ref(tensor), new)
        return new


def _note_shared(value: object, shared: set[int] | None) -> set[int]:
    """``shared`` (a new set if None) with the ids of the tensors of a carried value that may also
    be parameters or buffers of the tree, or held by another carried value."""
    if shared is None:
        shared = set()
    if isinstance(value, torch.Tensor):
        shared.add(id(value))
    else:
        shared.update(id(t) for _, t in iter_tensors(value))
    return shared


def _not_converted(module: nn.Module, name: str, value: object, error: Exception) -> None:
    record: ClassRecord = type(module).__autoreg__  # type: ignore[attr-defined]
    key = ("convert", name)
    if record.mode is Mode.WARN and key not in record.warned:
        record.warned.add(key)
        message = NOT_CONVERTED.format(
            cls=type(module).__name__, name=name, value=describe(value), error=error
        )
        warnings.warn(message, AutoRegisterWarning, stacklevel=2)
