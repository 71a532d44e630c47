"""``.to()`` for what autoreg carries (rows 8, 10 and 11), at the cost of the tree it converts.

What is carried is not recorded anywhere: an autoreg module carries each tensor and container in
its ``__dict__`` whose decision, were it assigned now, ``moves`` (``carried``). So the audit and
``.to()`` agree with the contract by construction, a copy carries what it holds, and a value that
nothing carries any more (``self.h = None``) simply is not there.

nn.Module's ``_apply`` converts parameters and buffers and recurses into ``_modules``. The
outermost autoreg ``_apply`` of a call - the first one not inside the tree of a conversion already
running on this thread - starts a ``Conversion``: it walks the modules that call will reach
(``_tree``), finds their carried values, and if there are any, hands nn.Module a wrapper of ``fn``
that remembers what it made of the carried tensors' originals. The autoreg ``_apply``s below it take
nn.Module's path and mark themselves reached. At the end the carried values of the reached modules
are converted, each original tensor once: a carried alias of a buffer of the tree becomes that
buffer's converted tensor. A module reached from outside the tree (an ``_apply`` override that
also converts an EMA copy it keeps outside ``_modules``) starts a conversion of its own. Nothing
outside the tree is looked at, and nothing that happened before changes what a call does.

A value that cannot be converted (a tensor that escaped ``torch.func.vmap``, a tuple subclass that
cannot be rebuilt) is left as it is, as nn.Module leaves every plain attribute; warn mode says so.
All carried values are converted after nn.Module's own work, and each one either fully or not at
all, so autoreg never leaves a model half-converted.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Iterable
from typing import Any, Final

import torch
from torch import nn

from ._config import Mode
from ._contract import decide
from ._errors import AutoRegisterWarning
from ._facts import HELD, kind_of, situation
from ._messages.contract import NOT_CONVERTED
from ._messages.describe import describe
from ._record import ClassRecord
from ._state import MODULE_INTERNALS, OWN_KEYS, role_key
from ._walk import iter_tensors, map_tensors

__all__ = ["apply", "carried", "carried_values", "loose_tensors", "registered_tensors"]

_ApplyFn = Callable[[torch.Tensor], torch.Tensor]
_MISSING: Final = object()


def carried(module: nn.Module, name: str, value: object) -> bool:
    """Whether ``.to()`` converts ``value``, held in ``module.__dict__[name]``."""
    record: ClassRecord = type(module).__autoreg__  # type: ignore[attr-defined]
    d = module.__dict__
    s = situation(record, d, name, value, d.get(role_key(name)), False)
    return decide(record, s, compiling=False).moves


def carried_values(module: nn.Module) -> dict[str, Any]:
    """The values ``module`` (an autoreg instance) carries, by name."""
    d = module.__dict__
    found: dict[str, Any] = {}
    for name in d.keys() - MODULE_INTERNALS:  # in C: nn.Module's own keys are most of them
        value = d[name]
        if type(value) is str:
            continue  # autoreg's roles, and plain strings: nothing to move
        held = kind_of(value) in HELD and not name.startswith(OWN_KEYS)
        if held and carried(module, name, value):
            found[name] = value
    return found


# --- one .to() -----------------------------------------------------------------------------------


class _Running(threading.local):
    def __init__(self) -> None:
        self.conversions: list[Conversion] = []


_RUNNING: Final = _Running()


def apply(module: nn.Module, apply_next: Any, fn: _ApplyFn, recurse: bool) -> Any:
    """``module._apply(fn, recurse)`` for an autoreg module whose next ``_apply`` is
    ``apply_next``: nn.Module's work, then the carried values."""
    key = id(module)
    running = _RUNNING.conversions
    for conversion in running:
        if key in conversion.tree:  # that conversion converts what this module carries
            if conversion.carriers and key in conversion.carriers:
                conversion.reached.add(key)
            return apply_next(module, fn) if recurse else apply_next(module, fn, recurse)
    conversion = Conversion(module, recurse)
    if key in conversion.carriers:
        conversion.reached.add(key)
    running.append(conversion)
    try:
        # recurse is passed on only when unset, as nn.Module does, so that overrides written
        # before it existed (torchmetrics' Metric._apply) keep working.
        result = apply_next(module, fn) if recurse else apply_next(module, fn, recurse)
    finally:
        running.remove(conversion)
    conversion.finish(fn)
    return result


class Conversion:
    """One ``.to()`` of a tree: its modules, and what it makes of their carried values.

    The tree is what ``.to()`` recurses into from its root (``_modules``, each module once). ``fn``
    itself is handed to nn.Module untouched. A carried tensor that is also a parameter or buffer
    of the tree is found, after nn.Module's work, where that parameter or buffer is: its registry
    holds what nn.Module made of it (or the same tensor, where an ``_apply`` override left it).
    Any other carried tensor is converted once, however many values hold it.
    """

    __slots__ = ("carriers", "converted", "positions", "reached", "tree")

    def __init__(self, root: nn.Module, recurse: bool) -> None:
        # id -> (module, names): the modules of the tree that carry something.
        self.carriers: dict[int, tuple[nn.Module, list[str]]] = {}
        carried_ids: set[int] = set()
        modules = [root]
        self.tree = {id(root)}
        for module in modules:
            if type(module).__dict__.get("__autoreg__") is not None:
                values = carried_values(module)
                if values:
                    self.carriers[id(module)] = (module, list(values))
                    for value in values.values():
                        if isinstance(value, torch.Tensor):
                            carried_ids.add(id(value))
                        else:
                            carried_ids.update(id(t) for _, t in iter_tensors(value))
            if recurse:
                for child in module._modules.values():
                    if child is not None and id(child) not in self.tree:
                        self.tree.add(id(child))
                        modules.append(child)
        self.reached: set[int] = set()  # the carriers whose _apply this call reached
        # id -> (registry, key): the carried tensors that are parameters or buffers of the tree.
        self.positions: dict[int, tuple[dict[str, Any], str]] = {}
        if carried_ids:
            for module in modules:
                for registry in (module._parameters, module._buffers):
                    for name, tensor in registry.items():
                        if id(tensor) in carried_ids:
                            self.positions.setdefault(id(tensor), (registry, name))
        # id -> (original, converted); the original is kept alive, so its id stays its own.
        self.converted: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def convert(self, fn: _ApplyFn, tensor: torch.Tensor) -> torch.Tensor:
        """The converted tensor for a carried one: one per original within the call."""
        position = self.positions.get(id(tensor))
        if position is not None:
            registry, name = position
            return registry[name]  # type: ignore[no-any-return]
        if isinstance(tensor, nn.Parameter) or (tensor.requires_grad and tensor.is_leaf):
            return tensor  # a weight (row 6), or another module's parameter: not autoreg's
        done = self.converted.get(id(tensor))
        if done is not None:
            return done[1]
        new = fn(tensor)
        self.converted[id(tensor)] = (tensor, new)
        return new

    def finish(self, fn: _ApplyFn) -> None:
        """Convert the carried values of the reached modules; a value that cannot be converted
        stays as it is (warn mode says so)."""

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
                        new = convert(value)
                    else:
                        new = map_tensors(value, convert, move)
                except Exception as error:  # noqa: BLE001 - left as nn.Module leaves it
                    _not_converted(module, name, value, error)
                    continue
                if new is not value:
                    updates.append((d, name, new))
        for d, name, new in updates:
            d[name] = new  # a conversion, not an assignment: as nn.Module writes _buffers


def _not_converted(module: nn.Module, name: str, value: object, error: Exception) -> None:
    record: ClassRecord = type(module).__autoreg__  # type: ignore[attr-defined]
    key = ("convert", name)
    if record.mode is Mode.WARN and key not in record.warned:
        record.warned.add(key)
        message = NOT_CONVERTED.format(
            cls=type(module).__name__, name=name, value=describe(value), error=error
        )
        warnings.warn(message, AutoRegisterWarning, stacklevel=2)


# --- shared with the audit and strict mode -----------------------------------------------------


def loose_tensors(module: nn.Module, value: object) -> list[tuple[str, torch.Tensor]]:
    """The tensors in ``value`` that only autoreg would move: not registered, not weights."""
    found = [(path, t) for path, t in iter_tensors(value) if not (t.requires_grad and t.is_leaf)]
    if found:
        registered = registered_tensors(module.modules())
        found = [(path, t) for path, t in found if id(t) not in registered]
    return found


def registered_tensors(
    modules: Iterable[nn.Module],
) -> dict[int, tuple[torch.Tensor, dict[str, Any], str]]:
    """``id(tensor) -> (tensor, registry, key)`` for the parameters and buffers of ``modules``."""
    found: dict[int, tuple[torch.Tensor, dict[str, Any], str]] = {}
    for module in modules:
        for registry in (module._parameters, module._buffers):
            for key, tensor in registry.items():
                if tensor is not None:
                    found[id(tensor)] = (tensor, registry, key)
    return found
