"""``.to()`` for what autoreg carries: runtime tensors and containers (rows 8, 10 and 11).

nn.Module's ``_apply`` converts parameters and buffers; the mixin's ``_apply`` also converts the
tensors an instance carries. Within one ``.to()`` of a tree, each original tensor becomes one
converted tensor, whoever holds it: a carried tensor that is a buffer of another module of the
tree (``parent.child.view = parent.table``) ends up as that buffer's converted tensor, and a tensor
carried by two modules is converted once. nn.Module converts a module's children before its own
buffers, so carried tensors are converted last, by the outermost autoreg ``_apply`` of the call.

While no live module carries a tensor, ``_apply`` is nn.Module's plus one frame. While some do,
the outermost autoreg ``_apply`` of a call walks its tree for modules that carry; if some do, it
wraps ``fn`` to remember what it made of the carried tensors' originals, and converts them at the
end; if none do, the autoreg modules below it take nn.Module's path without a walk.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any, Final

import torch
from torch import nn

from ._contract import CARRIED, CONTAINER, OWNED
from ._walk import CONTAINERS, iter_tensors, map_tensors

__all__ = [
    "CARRIERS",
    "QUIET",
    "UNTRACKED",
    "Conversion",
    "apply_carrying",
    "carries",
    "loose_tensors",
    "note_carrier",
    "registered_tensors",
]

# The live modules that carry a tensor or a container: id -> weak reference. A plain dict, so
# that `if CARRIERS` costs what every module's _apply can afford.
CARRIERS: Final[dict[int, weakref.ref[nn.Module]]] = {}
# Set when a module starts carrying inside code dynamo compiles, where no weak reference can be
# made: from then on, every .to() looks for carriers in its tree. A list, which compiled code may
# set.
UNTRACKED: Final[list[bool]] = [False]

_ApplyFn = Callable[[torch.Tensor], torch.Tensor]


class _Quiet(threading.local):
    active = False  # a root above found nothing carried in its tree: the modules below need not


QUIET: Final = _Quiet()


def note_carrier(module: nn.Module) -> None:
    """Remember that ``module`` carries something, for as long as it lives."""
    if torch.compiler.is_compiling():
        UNTRACKED[0] = True
        return
    key = id(module)
    if key not in CARRIERS:
        CARRIERS[key] = weakref.ref(module, lambda _: CARRIERS.pop(key, None))


def carries(module: nn.Module) -> bool:
    owned: dict[str, str] | None = module.__dict__.get(OWNED)
    return bool(owned) and (CARRIED in owned.values() or CONTAINER in owned.values())  # type: ignore[union-attr]


def apply_carrying(module: nn.Module, apply_next: Any, fn: _ApplyFn, recurse: bool) -> Any:
    """``module._apply(fn, recurse)`` at the root of a ``.to()``, while some module carries.

    The candidates are the live carriers (``CARRIERS``): each that ``.to()`` reaches adds itself
    to the conversion (``AutoRegisterMixin._apply``). After a carrier started inside compiled
    code (``UNTRACKED``), the tree is walked for them instead.
    """

    def tree() -> list[nn.Module]:
        return _tree(module) if recurse else [module]

    if UNTRACKED[0]:
        carriers = {id(m): m for m in tree() if carries(m)}
        if not carriers:
            QUIET.active = True
            try:
                return _call(apply_next, module, fn, recurse)
            finally:
                QUIET.active = False
        candidates = list(carriers.values())
    else:
        carriers = {}
        candidates = [m for ref in list(CARRIERS.values()) if (m := ref()) is not None]
    conversion = Conversion(fn, tree, candidates, carriers)
    result = _call(apply_next, module, conversion, recurse)
    if carries(module):
        conversion.carriers[id(module)] = module
    conversion.finish()
    return result


def _call(apply_next: Any, module: nn.Module, fn: _ApplyFn, recurse: bool) -> Any:
    # recurse is passed on only when set, as nn.Module does, so that overrides written before it
    # existed keep working.
    return apply_next(module, fn) if recurse else apply_next(module, fn, recurse)


def _tree(root: nn.Module) -> list[nn.Module]:
    """The modules of ``root``'s tree, each once: what ``.to()`` recurses into.

    ``root.modules()`` without the prefix strings ``named_modules`` builds for each module.
    """
    found = [root]
    seen = {id(root)}
    for module in found:
        for child in module._modules.values():
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                found.append(child)
    return found


class Conversion:
    """``fn`` of one ``.to()`` of a tree, remembering what it made of the carried tensors."""

    __slots__ = ("carriers", "converted", "fn", "parameters", "wanted")

    def __init__(
        self,
        fn: _ApplyFn,
        tree: Callable[[], list[nn.Module]],
        candidates: list[nn.Module],
        carriers: dict[int, nn.Module],
    ) -> None:
        self.fn = fn
        self.carriers = carriers  # id -> module: the carriers of the tree, filled as it goes
        # id -> (original, converted): the original is kept alive, so its id stays its own.
        self.converted: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        carried = [t for module in candidates for t in _carried_tensors(module)]
        self.wanted = {id(t): t for t in carried if not isinstance(t, nn.Parameter)}
        # Parameters held in carried containers: nn.Module may replace a parameter by a new one
        # (a move to another device): the container must hold the one in the module afterwards.
        self.parameters: dict[int, tuple[torch.Tensor, dict[str, Any], str]] = {}
        held = {id(t) for t in carried if isinstance(t, nn.Parameter)}
        if held:
            for key, entry in registered_tensors(tree()).items():
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
        new = tensor if tensor.requires_grad else self.fn(tensor)  # row 6: not autoreg's
        self.converted[id(tensor)] = (tensor, new)
        return new

    def finish(self) -> None:
        """Convert the carried tensors of the modules of the tree that carry some."""
        for module in self.carriers.values():
            d = module.__dict__
            for name, role in d[OWNED].items():
                value = d.get(name)
                if role == CARRIED and isinstance(value, torch.Tensor):
                    d[name] = self.convert(value)
                elif role == CONTAINER and isinstance(value, CONTAINERS):
                    d[name] = map_tensors(value, self.convert)


def _carried_tensors(module: nn.Module) -> list[torch.Tensor]:
    d = module.__dict__
    found: list[torch.Tensor] = []
    for name, role in (d.get(OWNED) or {}).items():
        if role in (CARRIED, CONTAINER):
            found.extend(t for _, t in iter_tensors(d.get(name)))
    return found


def loose_tensors(module: nn.Module, value: object) -> list[tuple[str, torch.Tensor]]:
    """The tensors in ``value`` that only autoreg would move: not registered, not requiring grad."""
    found = [(path, t) for path, t in iter_tensors(value) if not t.requires_grad]
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
