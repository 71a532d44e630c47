"""What each forward finding says: the fix, in the names the code at the finding's line has.

A fix names a tensor whose device (or dtype) to use: ``device=x.device``. The name is the one the
code that made the stray has for it: a local of that frame (``x``), else a parameter or buffer of
the module whose ``self`` that frame has (``self.cell.bias_hh``), never a path from the audited
model. A tensor that has one of the inputs' dimensions is made anew at each call and is never
called a constant.
"""

from __future__ import annotations

import itertools
import linecache

import torch
from torch import nn

from .._audit import Finding
from .._messages.audits import (
    FIX_ATTRIBUTE,
    FIX_COPIED_BACK,
    FIX_CREATED,
    FIX_CREATED_SHAPED,
    FIX_ENTERED,
    FIX_NO_REFERENCE,
    FIX_PROMOTES,
    FIX_RAISES,
    FIX_RANDOM,
    FIX_RANDOM_LIKE,
    FIX_STORED,
    FIX_STORED_CONTAINER,
)
from .._messages.describe import brief, dtype_name
from .._mixin import AutoRegisterMixin
from .finding import ForwardFinding, Kind, ModeName
from .rules import STAND_IN
from .sites import Site

__all__ = ["stored_fix", "stray_finding"]


def stray_finding(
    kind: Kind,
    site: Site,
    tensor: torch.Tensor,
    op: str,
    op_line: tuple[str, int],
    candidates: list[torch.Tensor],
    low: torch.dtype | None,
    result: torch.dtype | None,
    mode: ModeName,
) -> ForwardFinding:
    """The finding for ``tensor``, from ``site``, that ``op`` mixed in at ``op_line`` next to
    ``candidates`` (in ``low``); ``result``: the dtype ``op`` promoted to, ``None`` when it
    raised (or would on CUDA)."""
    if kind == "device":
        ref = reference(site, candidates, None)
        fix = device_fix(site, ref) if ref else FIX_NO_REFERENCE.format(what="device")
    else:
        ref = reference(site, candidates, low)
        fix = dtype_fix(ref, op, tensor.dtype, low, result) if ref else ""
        fix = fix or FIX_NO_REFERENCE.format(what="dtype")
    return ForwardFinding(
        kind=kind,
        filename=site.filename,
        lineno=site.lineno,
        source=linecache.getline(site.filename, site.lineno).strip(),
        op=op,
        op_filename=op_line[0],
        op_lineno=op_line[1],
        tensor=brief(tensor),
        entered=site.entered,
        fix=fix,
        attribute="",
        class_name=site.class_name,
        module_path=site.module_path,
        mode=mode,
    )


def reference(site: Site, candidates: list[torch.Tensor], dtype: torch.dtype | None) -> str:
    """The name the code at ``site`` has for a tensor on the model's device (in ``dtype``): one
    of ``candidates`` (the operation's) if it names one, else any it names; ``""`` if none."""

    def fits(tensor: torch.Tensor) -> bool:
        return tensor.device.type == STAND_IN.type and dtype in (None, tensor.dtype)

    named = [(name, t) for name, t in site.refs if fits(t)]
    members = [(f"self.{name}", t) for name, t in _state(site.owner) if fits(t)]
    wanted = {id(t) for t in candidates}
    for name, tensor in itertools.chain(named, members):
        if id(tensor) in wanted:
            return name
    return next((name for name, _ in itertools.chain(named, members)), "")


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
    if site.random:
        return FIX_RANDOM.format(ref=ref)
    return (FIX_CREATED_SHAPED if site.shaped else FIX_CREATED).format(ref=ref)


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


def _state(module: nn.Module | None) -> list[tuple[str, torch.Tensor]]:
    if module is None:
        return []
    return [*module.named_parameters(), *module.named_buffers()]
