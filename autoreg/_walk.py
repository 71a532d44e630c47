"""Tensors held in plain containers: list, tuple and dict attributes, nested to any depth.

``.to()`` knows parameters and buffers only; a ``list`` of tensors assigned to a module stays where
it was. autoreg carries such containers (``AutoRegisterMixin._apply``) and audits them
(``find_unregistered``) with the two walkers here, which agree on what a container is: ``list``,
``tuple`` and ``dict``, their subclasses included (``OrderedDict``, named tuples). Anything else,
modules included, is a leaf.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import torch
from torch import nn

__all__ = [
    "CONTAINERS",
    "iter_modules",
    "iter_tensors",
    "loose_tensors",
    "map_tensors",
    "registered_tensors",
]

CONTAINERS = (list, tuple, dict)

_T = TypeVar("_T")
_Leaf = TypeVar("_Leaf")


def iter_tensors(value: object, path: str = "") -> Iterator[tuple[str, torch.Tensor]]:
    """Yield ``(path, tensor)`` for ``value`` itself or each tensor nested in it, each object once.

    Paths extend ``path`` the way Python indexes: ``[2]`` for sequences, ``['key']`` for dicts.
    """
    return _iter_leaves(value, path, torch.Tensor)


def iter_modules(value: object, path: str = "") -> Iterator[tuple[str, nn.Module]]:
    """Yield ``(path, module)`` for ``value`` itself or each module nested in it, each once.

    A module in a plain list is invisible to ``.to()``, ``state_dict()`` and ``parameters()``.
    """
    return _iter_leaves(value, path, nn.Module)


def _iter_leaves(value: object, path: str, kind: type[_Leaf]) -> Iterator[tuple[str, _Leaf]]:
    seen: set[int] = set()

    def walk(item: object, where: str) -> Iterator[tuple[str, _Leaf]]:
        if id(item) in seen:
            return
        if isinstance(item, kind):
            seen.add(id(item))
            yield where, item
        elif isinstance(item, CONTAINERS):
            seen.add(id(item))
            entries = item.items() if isinstance(item, dict) else enumerate(item)
            for key, child in entries:
                yield from walk(child, f"{where}[{key!r}]")

    return walk(value, path)


def map_tensors(
    value: _T,
    convert: Callable[[torch.Tensor], torch.Tensor],
    moved_by_own_to: Callable[[Any], Any] | None = None,
) -> _T:
    """Replace each tensor nested in ``value`` by ``convert(tensor)``; return the new value.

    Lists and dicts are updated in place, so that other references to them see the new tensors;
    tuples are rebuilt when an item changed (named tuples with ``_make``, which bypasses a custom
    ``__new__``). Each container is visited once, so shared and cyclic structures are safe.
    Nothing is changed unless every conversion succeeds: an exception from ``convert`` or from
    rebuilding a tuple leaves ``value`` as it was. ``moved_by_own_to``, if given, converts a tuple
    that defines its own ``.to()`` (a ``PackedSequence``) as a whole.
    """
    new_of: dict[int, Any] = {}  # id(container) -> what it becomes
    writes: list[tuple[Any, Any, Any]] = []  # (list or dict, key, new item): applied at the end

    def walk(item: Any) -> Any:
        if isinstance(item, torch.Tensor):
            return convert(item)
        if not isinstance(item, CONTAINERS):
            return item
        if id(item) in new_of:  # shared, or a cycle: visited once
            return new_of[id(item)]
        new_of[id(item)] = item
        if isinstance(item, (list, dict)):
            entries = list(item.items() if isinstance(item, dict) else enumerate(item))
            for key, child in entries:
                new = walk(child)
                if new is not child:
                    writes.append((item, key, new))
            return item
        if moved_by_own_to is not None and callable(getattr(item, "to", None)):
            new_of[id(item)] = moved = moved_by_own_to(item)
            return moved
        items = [walk(child) for child in item]
        if all(new is old for new, old in zip(items, item, strict=True)):
            return item
        if hasattr(item, "_make"):
            rebuilt = item._make(items)
        else:
            rebuilt = tuple(items) if type(item) is tuple else type(item)(items)
        new_of[id(item)] = rebuilt
        return rebuilt

    result: _T = walk(value)
    for container, key, new in writes:
        container[key] = new
    return result


def loose_tensors(module: nn.Module, value: object) -> list[tuple[str, torch.Tensor]]:
    """The tensors in ``value`` that only autoreg would move: no weight (a parameter, by its type,
    or a leaf that requires grad: autoreg never converts one it carries), no buffer of ``module``
    or of a module below it.

    The buffers are looked up module by module from ``module`` down, until every candidate is
    found: a container of registered state costs what it holds, not the model's size (a truly
    loose tensor is what strict mode refuses and warn mode reports, once)."""
    found = [
        (path, t)
        for path, t in iter_tensors(value)
        if not (isinstance(t, nn.Parameter) or (t.requires_grad and t.is_leaf))
    ]
    if not found:
        return found
    missing = {id(t) for _, t in found}
    for below in module.modules():
        for buffer in below._buffers.values():
            missing.discard(id(buffer))
        if not missing:
            return []
    return [(path, t) for path, t in found if id(t) in missing]


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
