"""Every tensor reachable from a module, with its path: what the move check counts.

Deliberately independent of autoreg: it looks at what is there, not at what autoreg registered.
Reachable means: parameters and buffers of every submodule; tensors stored as plain attributes;
tensors inside list, tuple, set and dict attributes (recursively); and the same for modules that
sit in such containers without being registered (``.to()`` misses those too).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

__all__ = ["fingerprint", "reachable_tensors", "stayed_behind"]

# nn.Module's own bookkeeping (_parameters, _buffers, hook dicts, ...): walked through its API.
_INTERNALS = frozenset(vars(nn.Module()))
_MAX_DEPTH = 6


def reachable_tensors(module: nn.Module) -> dict[str, torch.Tensor]:
    """``{path: tensor}`` for every tensor reachable from ``module`` (see the module docstring)."""
    found: dict[str, torch.Tensor] = {}
    seen: set[int] = set()
    pending: list[tuple[str, nn.Module]] = [("", module)]
    while pending:
        prefix, root = pending.pop()
        for name, sub in root.named_modules(prefix=prefix, remove_duplicate=False):
            if id(sub) in seen:
                continue
            seen.add(id(sub))
            dot = f"{name}." if name else ""
            for key, tensor in sub._parameters.items():
                if tensor is not None:
                    found[dot + key] = tensor
            for key, tensor in sub._buffers.items():
                if tensor is not None:
                    found[dot + key] = tensor
            for key, value in vars(sub).items():
                if key in _INTERNALS:
                    continue
                for path, item in _items(dot + key, value, 0):
                    if isinstance(item, torch.Tensor):
                        found[path] = item
                    elif id(item) not in seen:
                        pending.append((path, item))
    return found


def _items(path: str, value: Any, depth: int) -> Iterator[tuple[str, torch.Tensor | nn.Module]]:
    """Tensors and unregistered modules in ``value``, a plain attribute, with their paths."""
    if isinstance(value, torch.Tensor | nn.Module):
        yield path, value
    elif depth < _MAX_DEPTH and isinstance(value, list | tuple | set | frozenset):
        for index, item in enumerate(value):
            yield from _items(f"{path}[{index}]", item, depth + 1)
    elif depth < _MAX_DEPTH and isinstance(value, dict):
        for key, item in value.items():
            yield from _items(f"{path}[{key!r}]", item, depth + 1)


def stayed_behind(
    tensors: dict[str, torch.Tensor], device: torch.device | None, dtype: torch.dtype | None
) -> list[str]:
    """Paths of the tensors that ``.to(device)`` or ``.to(dtype)`` should have moved but did not.

    A device move should move every tensor. A dtype move converts floating-point tensors only, as
    ``nn.Module.to`` does: an integer index tensor that keeps its dtype has not stayed behind.
    """
    behind = []
    for path, tensor in tensors.items():
        wrong_device = device is not None and not _on(tensor.device, device)
        wrong_dtype = dtype is not None and tensor.is_floating_point() and tensor.dtype != dtype
        if wrong_device or wrong_dtype:
            behind.append(path)
    return sorted(behind)


def _on(actual: torch.device, wanted: torch.device) -> bool:
    return actual.type == wanted.type and (wanted.index is None or actual.index == wanted.index)


def fingerprint(module: nn.Module) -> list[tuple[str, tuple[int, ...], bytes]]:
    """The reachable tensors' dtypes, shapes and bytes, in a canonical order, names left out.

    Two variants of a zoo model name some tensors differently (``anchors[0]`` in a list against a
    buffer ``anchors_0``); equal fingerprints mean they hold the same tensors all the same.
    """
    return sorted(
        (str(tensor.dtype), tuple(tensor.shape), tensor.detach().cpu().numpy().tobytes())
        for tensor in reachable_tensors(module).values()
    )
