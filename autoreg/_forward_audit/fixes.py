"""The fix each forward finding suggests, chosen from what the pass knows about the tensor."""

from __future__ import annotations

import torch
from torch import nn

from .._audit import Finding
from .._messages import (
    FIX_ATTRIBUTE,
    FIX_COPIED_BACK,
    FIX_CREATED,
    FIX_ENTERED,
    FIX_PROMOTES,
    FIX_RAISES,
    FIX_RANDOM,
    FIX_RANDOM_LIKE,
    FIX_STORED,
    FIX_STORED_CONTAINER,
)
from .._mixin import AutoRegisterMixin
from .sites import Site

__all__ = ["device_fix", "dtype_fix", "dtype_name", "stored_fix"]


def device_fix(site: Site, ref: str) -> str:
    """How to make the tensor ``site`` made (or let in) on the device of ``ref``."""
    if site.attribute is not None:
        return FIX_ATTRIBUTE.format(path=site.attribute.path, fix=site.attribute.fix)
    if site.copied_back:
        return FIX_COPIED_BACK.format(ref=ref)
    if site.entered:
        return FIX_ENTERED.format(ref=ref)
    if site.random in ("rand", "randn"):
        return FIX_RANDOM_LIKE.format(ref=ref, op=site.random)
    return (FIX_RANDOM if site.random else FIX_CREATED).format(ref=ref)


def dtype_fix(
    ref: str, op: str, stray: torch.dtype, low: torch.dtype | None, result: torch.dtype | None
) -> str:
    """How to give a tensor of dtype ``stray`` that met ``op`` in ``low`` the dtype of ``ref``;
    ``result`` is the dtype ``op`` promoted to, ``None`` when it raised (or would on CUDA)."""
    names = {"ref": ref, "op": op, "stray": dtype_name(stray), "low": dtype_name(low)}
    if result is None:
        return FIX_RAISES.format(**names)
    return FIX_PROMOTES.format(**names, result=dtype_name(result))


def stored_fix(holder: nn.Module, finding: Finding) -> str:
    """The fix for a tensor forward stored on ``holder``, where ``.to()`` leaves it."""
    tensor, value = finding.tensor, holder.__dict__.get(finding.attribute)
    if tensor.requires_grad or isinstance(holder, AutoRegisterMixin):
        return finding.fix  # an autograd result, a weight, a name autoreg cannot carry
    if value is tensor:
        return FIX_STORED.format(name=finding.attribute)
    kind = "dict" if isinstance(value, dict) else "list"
    return FIX_STORED_CONTAINER.format(kind=kind)


def dtype_name(dtype: torch.dtype | None) -> str:
    return str(dtype).removeprefix("torch.")
