"""What each forward finding says: one fix per site, in the names the code at the site has.

The passes record what they see (``Record``: a kind of stray, the site it came from, the
operation that met it); ``finish`` turns the records into ``ForwardFinding``s, with one fix per
site, whatever kinds it was found for: a plain attribute gets its attribute's fix on the device
row and the dtype row alike, a ``torch.rand`` that is both gets ``torch.rand_like(x)`` on both.

A fix names a tensor whose device (or dtype) to use: ``device=x.device``. The name is the one the
code that made the stray has for it: a local of that frame (``x``), else a parameter or buffer of
the module whose ``self`` that frame has (``self.cell.bias_hh``), never a path from the audited
model. A tensor that has one of the inputs' dimensions is made anew at each call and is never
called a constant.
"""

from __future__ import annotations

import dataclasses
import linecache
from collections.abc import Callable

import torch
from torch import nn

from .._audit import Finding
from .._messages.audits import (
    FIX_ATTRIBUTE,
    FIX_CAST,
    FIX_CAST_BACK,
    FIX_COMPUTED_DTYPE,
    FIX_COMPUTED_NO_REFERENCE,
    FIX_COPIED_BACK,
    FIX_CREATED,
    FIX_CREATED_SHAPED,
    FIX_DEVICE_ATTRIBUTE,
    FIX_DTYPE,
    FIX_DTYPE_WRITTEN,
    FIX_ENTERED,
    FIX_HELD,
    FIX_JOINED,
    FIX_MOVED,
    FIX_NO_REFERENCE,
    FIX_NO_REFERENCE_DTYPE,
    FIX_NUMPY_CALL,
    FIX_RANDOM,
    FIX_RANDOM_LIKE,
    FIX_STORED,
    FIX_STORED_CONTAINER,
    OP_HERE,
    RETURNED,
    WHY_DEVICE,
    WHY_PROMOTES,
    WHY_RAISES,
    WHY_RETURNED,
)
from .._messages.describe import dtype_name
from .._mixin import AutoRegisterMixin
from .finding import ForwardFinding, Kind, ModeName, Stored, operation_at
from .sites import Site

__all__ = ["Record", "Records", "finish", "record", "stored_fix"]


@dataclasses.dataclass(frozen=True)
class Record:
    """A stray as a pass saw it: ``kind``, the ``site`` it came from, its dtype and shape, and
    ``op``, the first operation that met it, at ``op_line``; ``ref``: the name the code at the
    site has for a tensor of the model; ``low``: the pass's dtype; ``result``: the dtype ``op``
    promoted to (``None`` when it raised, or would on CUDA)."""

    kind: Kind
    site: Site
    dtype: torch.dtype
    shape: tuple[int, ...]
    op: str
    op_line: tuple[str, int]
    ref: str
    low: torch.dtype | None
    result: torch.dtype | None
    mode: ModeName
    host: bool  # the tensor was on the default device when the operation met it
    modes: list[ModeName] = dataclasses.field(default_factory=list)  # every pass's that met it


Records = dict[tuple[object, ...], Record]


def record(
    kind: Kind,
    site: Site,
    tensor: torch.Tensor,
    op: str,
    op_line: tuple[str, int],
    model: list[torch.Tensor],
    follows: Callable[[torch.Tensor], bool],
    low: torch.dtype | None,
    result: torch.dtype | None,
    mode: ModeName,
) -> Record:
    """The record of ``tensor``, from ``site``, that ``op`` met at ``op_line`` next to ``model``
    (tensors of the model); ``follows`` tells a tensor of the model."""
    ref = reference(site, model, follows, low if kind == "dtype" else None, tensor)
    shape = tuple(tensor.shape)
    host = not follows(tensor)
    return Record(
        kind, site, tensor.dtype, shape, op, op_line, ref, low, result, mode, host, [mode]
    )


def finish(records: Records, device: str) -> list[ForwardFinding]:
    """The findings of ``records``, in order, each site with one fix for all its kinds;
    ``device`` is where the model given is (how tensors that follow it are described)."""
    by_site: dict[tuple[object, ...], list[Record]] = {}
    for entry in records.values():
        by_site.setdefault(entry.site.key, []).append(entry)
    fixes = {key: _fix(group) for key, group in by_site.items()}
    return [_finding(entry, fixes[entry.site.key], device) for entry in records.values()]


def _finding(entry: Record, fix: str, device: str) -> ForwardFinding:
    site = entry.site
    where = "cpu" if entry.host else device
    shape = ", ".join(map(str, entry.shape))
    tensor = f"{dtype_name(entry.dtype)}[{shape}]" + (" cpu" if entry.host else "")
    attribute = site.attribute
    return ForwardFinding(
        kind=entry.kind,
        filename=site.filename,
        lineno=site.lineno,
        source=linecache.getline(site.filename, site.lineno).strip(),
        op=entry.op,
        op_filename=entry.op_line[0],
        op_lineno=entry.op_line[1],
        tensor=tensor,
        entered=site.entered,
        fix=fix,
        attribute=_relative(attribute.path, site.module_path) if attribute else "",
        class_name=site.class_name,
        module_path=site.module_path,
        mode=entry.mode,
        modes=tuple(entry.modes),
        dtype=dtype_name(entry.dtype),
        shape=entry.shape,
        device=where,
        reason=_why(entry),
    )


def _why(entry: Record) -> str:
    if entry.op == RETURNED:
        where = "on the model's device" if entry.kind == "device" else dtype_name(entry.low)
        return WHY_RETURNED.format(where=where)
    if entry.kind == "device":
        return WHY_DEVICE.format(op=entry.op)
    names = {"op": entry.op, "stray": dtype_name(entry.dtype), "low": dtype_name(entry.low)}
    if entry.result is None:
        return WHY_RAISES.format(**names)
    return WHY_PROMOTES.format(**names, result=dtype_name(entry.result))


def _fix(group: list[Record]) -> str:
    """One fix for a site, whatever kinds it was found for."""
    site = group[0].site
    kinds = {entry.kind for entry in group}
    ref = next((entry.ref for entry in group if entry.ref), "")
    if site.origin == "numpy":
        return FIX_NUMPY_CALL
    if site.attribute is not None:
        path = _relative(site.attribute.path, site.module_path)
        if site.attribute.kind == "tensor":
            return FIX_ATTRIBUTE.format(path=path, fix=site.attribute.fix)
        return FIX_HELD.format(path=path, fix=site.attribute.fix)
    if kinds == {"dtype"} and site.joined:
        entry = next(e for e in group if e.kind == "dtype")
        return FIX_JOINED.format(stray=dtype_name(entry.dtype), op=_met_at(entry))
    if kinds == {"dtype"} and (not ref or site.origin == "computed"):
        # converted where it meets the model: where the code holds none of the model's tensors,
        # the one place it can be; for floats computed from integers, the one place it loses
        # nothing (FIX_COMPUTED_DTYPE says why)
        op = _met_at(group[0])
        if site.origin == "computed":
            return (
                FIX_COMPUTED_DTYPE.format(ref=ref, op=op)
                if ref
                else (FIX_COMPUTED_NO_REFERENCE.format(op=op))
            )
        return FIX_NO_REFERENCE_DTYPE.format(op=op)
    if not ref:
        return FIX_NO_REFERENCE.format(what="device")
    if site.entered:
        return FIX_ENTERED.format(ref=ref)
    if site.copied_back:
        return FIX_COPIED_BACK.format(ref=ref)
    both = f"device={ref}.device" + (f", dtype={ref}.dtype" if "dtype" in kinds else "")
    if site.device_attribute:
        return FIX_DEVICE_ATTRIBUTE.format(attribute=site.device_attribute, fix=both)
    if site.origin == "moved":
        return FIX_MOVED.format(ref=ref)
    if site.origin == "cast":
        entry = next(e for e in group if e.kind == "dtype")
        template = FIX_CAST_BACK if site.island else FIX_CAST
        return template.format(ref=ref, op=entry.op, stray=dtype_name(entry.dtype))
    if kinds == {"dtype"}:
        return (FIX_DTYPE_WRITTEN if site.written else FIX_DTYPE).format(ref=ref)
    if site.random in ("rand", "randn"):
        return FIX_RANDOM_LIKE.format(fix=both, ref=ref, op=site.random)
    if site.random:
        return FIX_RANDOM.format(fix=both, ref=ref)
    return (FIX_CREATED_SHAPED if site.shaped else FIX_CREATED).format(fix=both, ref=ref)


def _met_at(entry: Record) -> str:
    """The operation that met ``entry``'s stray, with where it is when not on the stray's line."""
    site = entry.site
    where = operation_at(entry.op, entry.op_line, (site.filename, site.lineno))
    return where or OP_HERE.format(op=entry.op)


def _relative(path: str, module_path: str) -> str:
    """``path`` (dotted from the audited model) from the module at ``module_path``."""
    return path[len(module_path) + 1 :] if module_path and path.startswith(module_path) else path


def reference(
    site: Site,
    candidates: list[torch.Tensor],
    follows: Callable[[torch.Tensor], bool],
    dtype: torch.dtype | None,
    stray: torch.Tensor,
) -> str:
    """The name the code at ``site`` has for a tensor of the model (in ``dtype``): a local of
    that code (one of ``candidates``, the operation's, if it names one), else a parameter or
    buffer of its module (the same way); ``""`` if none. One floating as ``stray`` is, or not,
    first: ``dtype=dst.dtype`` or ``.to(dst)`` of an index ``dst`` would make floats integers."""
    floating = stray.is_floating_point()

    def fits(tensor: torch.Tensor) -> bool:
        return follows(tensor) and dtype in (None, tensor.dtype)

    # The operation's tensors, then what they are views of (``self.table.reshape(...)``)
    operands = {id(t) for t in candidates}
    viewed = {id(t._base) for t in candidates if t._base is not None}
    named = [(name, t) for name, t in site.refs if fits(t)]
    members = [(f"self{_python(name)}", t) for name, t in _named_state(site.owner) if fits(t)]
    for alike in (True, False):
        for group in (named, members):  # a local of that code first, then its module's state
            group = [(n, t) for n, t in group if not alike or t.is_floating_point() == floating]
            for wanted in (operands, viewed):
                for name, tensor in group:
                    if id(tensor) in wanted:
                        return name
            if group:
                return group[0][0]
    return ""


def _python(name: str) -> str:
    """A parameter's dotted name as Python reads it: ``.emb[1].bias`` for ``emb.1.bias``."""
    return "".join(f"[{part}]" if part.isdigit() else f".{part}" for part in name.split("."))


def stored_fix(holder: nn.Module, finding: Finding) -> tuple[str, Stored]:
    """The fix for a tensor forward stored on ``holder``, where ``.to()`` leaves it, and what
    forward stored there (``ForwardFinding.stored``)."""
    tensor, value = finding.tensor, holder.__dict__.get(finding.attribute)
    if (tensor.requires_grad and tensor.is_leaf) or isinstance(holder, AutoRegisterMixin):
        # a weight, or a name autoreg cannot carry: the audit's own fix
        result = tensor.requires_grad and not tensor.is_leaf
        return finding.fix, "tensor" if result else "other"
    if value is tensor:
        return FIX_STORED.format(name=finding.attribute), "tensor"
    kind = "dict" if isinstance(value, dict) else "list"
    return FIX_STORED_CONTAINER.format(kind=kind), "container"


def _named_state(module: nn.Module | None) -> list[tuple[str, torch.Tensor]]:
    if module is None:
        return []
    return [*module.named_parameters(), *module.named_buffers()]
