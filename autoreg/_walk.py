"""Tensors held in plain containers: list, tuple and dict attributes, nested to any depth.

``.to()`` knows parameters and buffers only; a ``list`` of tensors assigned to a module stays where
it was. autoreg carries such containers (``AutoRegisterMixin._apply``) and audits them
(``find_unregistered``) with the two walkers here, which agree on what a container is: ``list``,
``tuple`` and ``dict``, their subclasses included (``OrderedDict``, named tuples). Anything else,
modules included, is a leaf.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar, cast

import torch
from torch import nn

__all__ = [
    "CONTAINERS",
    "iter_items",
    "iter_modules",
    "iter_tensors",
    "loose_tensors",
    "map_tensors",
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


def iter_items(container: object, path: str = "") -> Iterator[tuple[str, object]]:
    """Yield ``(path, item)`` for each item nested in ``container`` that is no container itself
    (a tensor, a module, a number, a plain object), each once."""
    if not isinstance(container, CONTAINERS):
        return iter(())
    return _iter_leaves(container, path, None)


def _iter_leaves(value: object, path: str, kind: type[_Leaf] | None) -> Iterator[tuple[str, _Leaf]]:
    """``kind``: None for every item that is no container."""
    # Depth first, with a stack of its own rather than recursion: a list nested thousands deep
    # is walked as any other (recursion raised RecursionError where nn.Module never looks).
    seen: set[int] = set()
    stack: list[Iterator[tuple[str, object]]] = [iter([(path, value)])]
    while stack:
        for where, item in stack[-1]:
            if id(item) in seen:
                continue
            if kind is not None and isinstance(item, kind):
                seen.add(id(item))
                yield where, item
            elif isinstance(item, CONTAINERS):
                seen.add(id(item))
                stack.append(_entries(where, item))
                break
            elif kind is None:
                seen.add(id(item))
                yield where, cast(_Leaf, item)
        else:
            stack.pop()


def _entries(where: str, container: Any) -> Iterator[tuple[str, object]]:
    entries = container.items() if isinstance(container, dict) else enumerate(container)
    for key, child in entries:
        yield f"{where}[{key!r}]", child


_PENDING: Any = object()


def map_tensors(
    value: _T,
    convert: Callable[[torch.Tensor], torch.Tensor],
    moved_by_own_to: Callable[[Any], Any] | None = None,
) -> _T:
    """Replace each tensor nested in ``value`` by ``convert(tensor)``; return the new value.

    Lists and dicts are updated in place, so that other references to them see the new tensors;
    tuples are rebuilt when an item changed (named tuples with ``_make``, which bypasses a custom
    ``__new__``). Each container is visited once, so shared and cyclic structures are safe, and
    at any depth (the walk keeps its own stack). Nothing is changed unless every conversion
    succeeds: an exception from ``convert``, from rebuilding a tuple or from a write into a list or
    dict (a subclass that refuses one) leaves ``value`` as it was, the writes already made taken
    back. ``moved_by_own_to``, if given, converts a tuple that defines its own ``.to()`` (a
    ``PackedSequence``) as a whole.
    """
    new_of: dict[int, Any] = {}  # id(container) -> what it becomes
    # (list or dict, key, old item, new item): applied at the end
    writes: list[tuple[Any, Any, Any, Any]] = []
    # One frame per container being walked: [container, its (key, item) entries, the new items]
    stack: list[tuple[Any, list[tuple[Any, Any]], list[Any]]] = []

    def enter(item: Any) -> Any:
        """What ``item`` becomes, or _PENDING for a container whose walk begins (a frame)."""
        if isinstance(item, torch.Tensor):
            return convert(item)
        if not isinstance(item, CONTAINERS):
            return item
        if id(item) in new_of:  # shared, or a cycle: visited once
            return new_of[id(item)]
        new_of[id(item)] = item
        if isinstance(item, dict):
            stack.append((item, list(item.items()), []))
        elif isinstance(item, list):
            stack.append((item, list(enumerate(item)), []))
        elif moved_by_own_to is not None and callable(getattr(item, "to", None)):
            new_of[id(item)] = moved = moved_by_own_to(item)
            return moved
        else:
            stack.append((item, list(enumerate(item)), []))
        return _PENDING

    def leave(item: Any, entries: list[tuple[Any, Any]], news: list[Any]) -> Any:
        """What a container whose items were all walked becomes."""
        if isinstance(item, (list, dict)):
            writes.extend(
                (item, key, old, new)
                for (key, old), new in zip(entries, news, strict=True)
                if new is not old
            )
            return item
        if all(new is old for new, (_, old) in zip(news, entries, strict=True)):
            return item
        if hasattr(item, "_make"):
            rebuilt = item._make(news)
        else:
            rebuilt = tuple(news) if type(item) is tuple else type(item)(news)
        new_of[id(item)] = rebuilt
        return rebuilt

    result = enter(value)
    while stack:
        item, entries, news = stack[-1]
        if len(news) < len(entries):
            new = enter(entries[len(news)][1])
            if new is not _PENDING:
                news.append(new)
            continue
        stack.pop()
        new = leave(item, entries, news)
        if stack:
            stack[-1][2].append(new)
        else:
            result = new
    for done, (container, key, _, new) in enumerate(writes):
        try:
            container[key] = new
        except BaseException:
            for written, at, old, _ in reversed(writes[:done]):
                written[at] = old
            raise
    return result  # type: ignore[no-any-return]


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
