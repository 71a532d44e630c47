"""Helpers shared by the test areas: what a name is on a module, as a user can observe it."""

from __future__ import annotations

import torch
from torch import nn

from autoreg._walk import iter_tensors


def role(module: nn.Module, name: str) -> str:
    """What ``module.name`` is, observed from outside: "parameter", "module",
    "persistent buffer" / "non-persistent buffer", "carried" (a plain attribute that ``.to()``
    converts), "plain" (one it leaves where it is) or "absent"."""
    if name in module._parameters:
        return "parameter"
    if name in module._modules:
        return "module"
    if name in module._buffers:
        persistent = name not in module._non_persistent_buffers_set
        return "persistent buffer" if persistent else "non-persistent buffer"
    if name not in vars(module):
        return "absent"
    return "carried" if moves(module, name) else "plain"


def moves(module: nn.Module, name: str) -> bool:
    """Whether ``.to()`` converts (some tensor of) the plain attribute ``module.name``: the
    module's ``_apply`` - what ``.to()`` runs - is given a function that records the tensors it is
    called with and returns them unchanged."""
    held = {id(t) for _, t in iter_tensors(vars(module)[name])}
    seen: set[int] = set()

    def record(tensor: torch.Tensor) -> torch.Tensor:
        seen.add(id(tensor))
        return tensor

    module._apply(record)
    return bool(held & seen)
