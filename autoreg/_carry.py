"""``.to()`` for what autoreg carries (rows 8, 10 and 11), at the cost of the tree it converts.

What autoreg carries is recorded where the decision is carried out (``_execute``): an assignment
whose decision ``moves`` a value autoreg stores marks the name ``CARRIED``; any other assignment,
a deletion or a registration takes the mark away (``_state``). ``.to()``, the audits and
``reset_buffers`` read the same mark (``carried``), so they agree with the contract by
construction; a copy carries what the original carries, since it copies the marks; and a value
that nothing carries any more (``self.h = None``) is not looked at. An instance unpickled from
before its class used autoreg is adopted: what the contract would carry is marked (``adopt``).

nn.Module's ``_apply`` converts parameters and buffers and recurses into ``_modules``. The
outermost autoreg ``_apply`` of a call - the first one not inside the tree of a conversion already
running on this thread - starts a ``Conversion``: it walks the modules that call will reach and
looks up their carried names (``CARRYING``: no search of each ``__dict__``). The autoreg
``_apply``s below it take nn.Module's path and mark themselves reached. At the end the carried
values of the reached modules are converted, each original tensor once: a carried alias of a
buffer of the tree becomes that buffer's converted tensor. A module reached from outside the tree
(an ``_apply`` override that also converts an EMA copy it keeps outside ``_modules``) starts a
conversion of its own. Nothing outside the tree is looked at, and nothing that happened before
changes what a call does.

A value that cannot be converted (a tensor that escaped ``torch.func.vmap``, a tuple subclass that
cannot be rebuilt) is left as it is, as nn.Module leaves every plain attribute; warn mode says so.
All carried values are converted after nn.Module's own work, and each one either fully or not at
all, so autoreg never leaves a model half-converted.
"""

from __future__ import annotations

import sys
import threading
import warnings
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
from ._state import CARRIED, CARRYING, MODULE_INTERNALS, OWN_KEYS, role_key
from ._walk import iter_tensors, map_tensors

__all__ = [
    "adopt",
    "apply",
    "carried",
    "carried_values",
    "carry",
]

_ApplyFn = Callable[[torch.Tensor], torch.Tensor]
_MISSING: Final = object()
_NONE: Final[frozenset[str]] = frozenset()
# Reference counts are exact unless the build is free-threaded (with the GIL disabled).
_EXACT_REFCOUNTS: Final = getattr(sys, "_is_gil_enabled", lambda: True)()


def carried(module: nn.Module, name: str) -> bool:
    """Whether ``.to()`` converts what ``module.name`` holds: autoreg carries the name."""
    return module.__dict__.get(role_key(name)) == CARRIED


def carried_values(module: nn.Module) -> dict[str, Any]:
    """The values ``module`` (an autoreg instance) carries, by name."""
    d = module.__dict__
    return {
        name: d[name]
        for name in d.get(CARRYING, _NONE)
        if name in d and d.get(role_key(name)) == CARRIED
    }


def carry(module: nn.Module, name: str) -> None:
    """Record that autoreg carries ``module.name``: its role, and the instance's list of the
    names it has carried (only ever added to)."""
    d = module.__dict__
    object.__setattr__(module, role_key(name), CARRIED)
    names: frozenset[str] = d.get(CARRYING, _NONE)
    if name not in names:
        object.__setattr__(module, CARRYING, names | {name})


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
        self.conversions: list[Conversion] = []


_RUNNING: Final = _Running()


def apply(module: nn.Module, apply_next: Any, fn: _ApplyFn, recurse: bool) -> Any:
    """``module._apply(fn, recurse)`` for an autoreg module whose next ``_apply`` is
    ``apply_next``: nn.Module's work, then the carried values."""
    # recurse is passed on only when unset, as nn.Module does, so that overrides written before
    # it existed (torchmetrics' Metric._apply) keep working.
    running = _RUNNING.conversions
    key = id(module)
    for conversion in running:
        if key in conversion.tree:  # that conversion converts what this module carries
            if key in conversion.carriers:
                conversion.reached.add(key)
            return apply_next(module, fn) if recurse else apply_next(module, fn, recurse)
    conversion = Conversion(module, recurse)
    running.append(conversion)
    try:
        result = apply_next(module, fn) if recurse else apply_next(module, fn, recurse)
    finally:
        running.pop()  # this call's: conversions start and end nested
    if conversion.carriers:
        if key in conversion.carriers:
            conversion.reached.add(key)
        conversion.finish(fn)
    return result


class Conversion:
    """One ``.to()`` of a tree: its modules, and what it makes of their carried values.

    The tree is what ``.to()`` recurses into from its root (``_modules``, each module once). ``fn``
    itself is handed to nn.Module untouched. A carried tensor that is also a parameter or buffer
    of the tree (a container may hold the model's own parameters) is found, after nn.Module's
    work, where it was registered: the registry holds what nn.Module made of it (or the same
    tensor, where an ``_apply`` override left it). Any other carried tensor is converted once,
    however many values hold it.
    """

    __slots__ = ("carriers", "converted", "positions", "reached", "tree")

    def __init__(self, root: nn.Module, recurse: bool) -> None:
        # id -> (module, names): the modules of the tree that carry something.
        self.carriers: dict[int, tuple[nn.Module, list[str]]] = {}
        self.tree = tree = {id(root)}
        self.reached: set[int] = set()  # the carriers whose _apply this call reached
        # id -> (registry, key): the carried tensors that are parameters or buffers of the tree.
        self.positions: dict[int, tuple[dict[str, Any], str]] = {}
        # id -> (original, converted): the original is kept, so that its id is not reused.
        self.converted: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        shared: set[int] = set()  # the carried tensors something else may also hold
        modules = [root]
        for module in modules:
            d = module.__dict__
            names = d.get(CARRYING)
            if names:
                found = []
                for name in names:
                    value = d.get(name, _MISSING)
                    if value is _MISSING or d.get(role_key(name)) != CARRIED:
                        continue
                    found.append(name)
                    # A tensor that nothing but the __dict__ refers to (three references: it,
                    # `value` and getrefcount's argument) cannot be registered anywhere: the
                    # usual case, a state stored at run time, needs no search of the registries.
                    if type(value) is not torch.Tensor or not (
                        _EXACT_REFCOUNTS and sys.getrefcount(value) <= 3
                    ):
                        _note_shared(value, shared)
                if found:
                    self.carriers[id(module)] = (module, found)
            if recurse:
                for child in module._modules.values():
                    if child is not None and id(child) not in tree:
                        tree.add(id(child))
                        modules.append(child)
        if shared:
            self._find_positions(modules, shared)

    def _find_positions(self, modules: list[nn.Module], shared: set[int]) -> None:
        """Where the carried tensors in ``shared`` are registered as parameters or buffers."""
        positions = self.positions
        for module in modules:
            for registry in (module._parameters, module._buffers):
                for name, tensor in registry.items():
                    if id(tensor) in shared and id(tensor) not in positions:
                        positions[id(tensor)] = (registry, name)

    def convert(self, fn: _ApplyFn, tensor: torch.Tensor) -> torch.Tensor:
        """The converted tensor for a carried one: one per original within the call."""
        key = id(tensor)
        done = self.converted.get(key)
        if done is not None:
            return done[1]
        position = self.positions.get(key) if self.positions else None
        new: torch.Tensor
        if position is not None:
            registry, name = position
            new = registry[name]  # what nn.Module made of it
        elif (tensor.requires_grad and tensor.is_leaf) or isinstance(tensor, nn.Parameter):
            return tensor  # a weight (row 6), or another module's parameter: not autoreg's
        else:
            new = fn(tensor)
        self.converted[key] = (tensor, new)
        return new

    def finish(self, fn: _ApplyFn) -> None:
        """Convert the carried values of the reached modules; a value that cannot be converted
        stays as it is (warn mode says so)."""
        updates: list[tuple[dict[str, Any], str, Any]] = []
        for key in self.reached:
            module, names = self.carriers[key]
            d = module.__dict__
            for name in names:
                value = d.get(name, _MISSING)
                if value is _MISSING:
                    continue
                try:
                    if isinstance(value, torch.Tensor):
                        new = self.convert(fn, value)
                    else:
                        new = self._convert_container(fn, value)
                except Exception as error:  # noqa: BLE001 - left as nn.Module leaves it
                    _not_converted(module, name, value, error)
                    continue
                if new is not value:
                    updates.append((d, name, new))
        for d, name, new in updates:
            d[name] = new  # a conversion, not an assignment: as nn.Module writes _buffers

    def _convert_container(self, fn: _ApplyFn, value: Any) -> Any:
        def convert(tensor: torch.Tensor) -> torch.Tensor:
            return self.convert(fn, tensor)

        def move(value: Any) -> Any:
            """A tuple with its own ``.to()`` (a ``PackedSequence``), moved by it: to the device
            and dtype ``fn`` gives its first tensor."""
            first = next((t for _, t in iter_tensors(value)), None)
            if first is None:
                return value
            probe = convert(first)
            if probe.device == first.device and probe.dtype == first.dtype:
                return value
            return value.to(device=probe.device, dtype=probe.dtype)

        return map_tensors(value, convert, move)


def _note_shared(value: object, shared: set[int]) -> None:
    """Add to ``shared`` the tensors of a carried value that may also be parameters or buffers of
    the tree."""
    if isinstance(value, torch.Tensor):
        shared.add(id(value))
    else:
        shared.update(id(t) for _, t in iter_tensors(value))


def _not_converted(module: nn.Module, name: str, value: object, error: Exception) -> None:
    record: ClassRecord = type(module).__autoreg__  # type: ignore[attr-defined]
    key = ("convert", name)
    if record.mode is Mode.WARN and key not in record.warned:
        record.warned.add(key)
        message = NOT_CONVERTED.format(
            cls=type(module).__name__, name=name, value=describe(value), error=error
        )
        warnings.warn(message, AutoRegisterWarning, stacklevel=2)
