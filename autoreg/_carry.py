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
from ._contract import TENSORS, Kind, decide, kind_of, situation
from ._errors import AutoRegisterWarning
from ._messages import NOT_CONVERTED, describe
from ._record import ClassRecord
from ._state import MODULE_INTERNALS, OWNED
from ._walk import iter_tensors, map_tensors

__all__ = ["apply", "carried", "carried_values", "loose_tensors", "registered_tensors"]

_ApplyFn = Callable[[torch.Tensor], torch.Tensor]
_MISSING: Final = object()


def carried(module: nn.Module, name: str, value: object) -> bool:
    """Whether ``.to()`` converts ``value``, held in ``module.__dict__[name]``."""
    record: ClassRecord = type(module).__autoreg__  # type: ignore[attr-defined]
    d = module.__dict__
    roles = d.get(OWNED)
    role = roles.get(name) if roles is not None else None
    s = situation(record, d, name, value, role, compiling=False)
    return decide(record, s, compiling=False).moves


def carried_values(module: nn.Module) -> dict[str, Any]:
    """The values ``module`` (an autoreg instance) carries, by name."""
    found: dict[str, Any] = {}
    for name, value in module.__dict__.items():
        if name in MODULE_INTERNALS or name.startswith("_autoreg_"):
            continue
        kind = kind_of(value)
        if (kind in TENSORS or kind is Kind.CONTAINER) and carried(module, name, value):
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
            if key in conversion.carriers:
                conversion.reached.add(key)
            return _call(apply_next, module, fn, recurse)
    tree = _tree(module) if recurse else [module]
    conversion = Conversion(fn, tree)
    if key in conversion.carriers:
        conversion.reached.add(key)
    running.append(conversion)
    try:
        result = _call(apply_next, module, conversion if conversion.carriers else fn, recurse)
    finally:
        running.remove(conversion)
    conversion.finish()
    return result


def _call(apply_next: Any, module: nn.Module, fn: _ApplyFn, recurse: bool) -> Any:
    # recurse is passed on only when unset, as nn.Module does, so that overrides written before
    # it existed (torchmetrics' Metric._apply) keep working.
    return apply_next(module, fn) if recurse else apply_next(module, fn, recurse)


def _tree(root: nn.Module) -> list[nn.Module]:
    """The modules ``.to()`` recurses into from ``root``, each once (``root.modules()`` without
    the prefixes ``named_modules`` builds)."""
    found = [root]
    seen = {id(root)}
    for module in found:
        for child in module._modules.values():
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                found.append(child)
    return found


class Conversion:
    """``fn`` of one ``.to()`` of a tree, remembering what it made of carried tensors."""

    __slots__ = ("carriers", "converted", "fn", "parameters", "reached", "tree", "wanted")

    def __init__(self, fn: _ApplyFn, tree: list[nn.Module]) -> None:
        self.fn = fn
        self.tree = {id(module) for module in tree}
        # id -> (module, names): the modules of the tree that carry something.
        self.carriers: dict[int, tuple[nn.Module, list[str]]] = {}
        carried_tensors: list[torch.Tensor] = []
        for module in tree:
            if getattr(type(module), "__autoreg__", None) is None:
                continue
            values = carried_values(module)
            if values:
                self.carriers[id(module)] = (module, list(values))
                carried_tensors.extend(t for v in values.values() for _, t in iter_tensors(v))
        self.reached: set[int] = set()  # the carriers whose _apply this call reached
        self.wanted = {id(t) for t in carried_tensors if not isinstance(t, nn.Parameter)}
        # id -> (original, converted); the original is kept alive, so its id stays its own.
        self.converted: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        # Parameters held in carried containers: nn.Module may replace a parameter by a new one,
        # and the container must then hold the one in the module.
        self.parameters: dict[int, tuple[torch.Tensor, dict[str, Any], str]] = {}
        held = {id(t) for t in carried_tensors if isinstance(t, nn.Parameter)}
        if held:
            for key, entry in registered_tensors(tree).items():
                if key in held:
                    self.parameters[key] = entry

    def __repr__(self) -> str:
        return repr(self.fn)  # torchmetrics' Metric._apply reads str(fn) to recognise .half()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.fn, name)  # __name__, __qualname__, ...: those of fn

    def __call__(self, tensor: torch.Tensor) -> torch.Tensor:
        new = self.fn(tensor)
        if id(tensor) in self.wanted:
            self.converted[id(tensor)] = (tensor, new)
        return new

    def convert(self, tensor: torch.Tensor) -> torch.Tensor:
        """The converted tensor for a carried one: one per original within the call."""
        if isinstance(tensor, nn.Parameter):
            entry = self.parameters.get(id(tensor))
            return entry[1][entry[2]] if entry is not None else tensor  # not autoreg's to move
        done = self.converted.get(id(tensor))
        if done is not None:
            return done[1]
        if tensor.requires_grad and tensor.is_leaf:
            return tensor  # row 6 holds inside a container too: a weight is not autoreg's
        new = self.fn(tensor)
        self.converted[id(tensor)] = (tensor, new)
        return new

    def move(self, value: Any) -> Any:
        """A tuple with its own ``.to()`` (a ``PackedSequence``), moved by it: to the device and
        dtype ``fn`` gives its first tensor."""
        first = next((t for _, t in iter_tensors(value)), None)
        if first is None:
            return value
        probe = self.convert(first)
        if probe.device == first.device and probe.dtype == first.dtype:
            return value
        return value.to(device=probe.device, dtype=probe.dtype)

    def finish(self) -> None:
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
                        new = self.convert(value)
                    else:
                        new = map_tensors(value, self.convert, self.move)
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
