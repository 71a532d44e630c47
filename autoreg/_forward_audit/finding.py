"""``ForwardFinding``: one tensor of a forward pass that stays behind when the model moves."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from .._frames import location
from .._messages.audits import FORWARD_FINDING, OP_AT, OP_AT_LINE, STORED_FINDING

__all__ = ["ForwardFinding", "Kind", "ModeChoice", "ModeName", "Stored", "op_where", "operation_at"]

Kind = Literal["device", "dtype", "stored"]
# What forward stored, for a "stored" finding: a tensor that is state of a run (a plain one, or an
# autograd result), a list or dict of tensors, or anything else (a weight: a leaf that requires
# grad; a tensor an autoreg module keeps where autoreg cannot carry it).
Stored = Literal["", "tensor", "container", "other"]
ModeName = Literal["train", "eval"]  # the mode a pass ran the model in
ModeChoice = Literal["train", "eval", "both"]  # what audit_forward(mode=...) takes


@dataclasses.dataclass(frozen=True)
class ForwardFinding:
    """A tensor of a forward pass that stays behind when the model moves, and how to fix it.

    ``kind`` is ``"device"`` (a CPU tensor that would meet the model's device: CUDA raises),
    ``"dtype"`` (a tensor of another dtype that promotes or breaks an operation of the model in
    its own dtype or in ``bfloat16``) or ``"stored"`` (a tensor forward stores on a module where
    ``.to()`` leaves it behind: ``self.h = ...`` in a plain ``nn.Module``).
    ``filename`` and ``lineno`` are the user's line that made the tensor, or, for one made before
    ``forward`` (``entered``), the line where it first entered it; for ``"stored"``, the line
    that stored it. ``source`` is that line's text.
    ``op`` is the first operation that mixed it in, at ``op_filename:op_lineno`` (empty and 0 for
    ``"stored"``); ``tensor`` describes it (``float32[2, 3] cpu``); ``fix`` is what to write.
    ``class_name`` and ``module_path`` name the module whose code made the tensor (for a
    plain attribute and for ``"stored"``: the module that holds it), its path dotted from the
    audited model (``""`` for the model itself); ``attribute`` is the attribute, dotted from that
    module (``"cfg.weights"`` for a field of an object it holds; ``""`` for a tensor made in
    the pass). ``mode`` is the mode the pass that found it first ran the model in: ``"train"``
    or ``"eval"``; ``modes``, every mode whose pass found it, in that order. ``dtype``,
    ``shape`` and ``device`` describe the tensor as the model given has it
    (``device`` is ``"cpu"`` for a tensor left on the default device); ``reason`` says what the
    operation does with it. The device row and the dtype row of one site share one ``fix``.
    ``stored`` says, for ``"stored"``, what forward stored: ``"tensor"`` (state of a run: a
    tensor, or an autograd result), ``"container"`` (a list or dict of tensors) or ``"other"`` (a
    weight: a leaf that requires grad; on an autoreg module, a tensor under a name autoreg cannot
    carry); ``""`` for the other kinds.
    """

    kind: Kind
    filename: str
    lineno: int
    source: str
    op: str
    op_filename: str
    op_lineno: int
    tensor: str
    entered: bool
    fix: str
    attribute: str
    class_name: str
    module_path: str
    mode: ModeName
    dtype: str = ""
    shape: tuple[int, ...] = ()
    device: str = ""
    reason: str = ""
    stored: Stored = ""
    modes: tuple[ModeName, ...] = ()

    def __str__(self) -> str:
        template = STORED_FINDING if self.kind == "stored" else FORWARD_FINDING
        return template.format(finding=self, where=self.where, op=op_where(self))

    @property
    def where(self) -> str:
        """``path/to/file.py:12``, relative to the working directory when it lies under it."""
        return location(self.filename, self.lineno)

    def as_dict(self) -> dict[str, Any]:
        """The finding as JSON-ready values (what ``autoreg audit --forward --json`` prints)."""
        return dataclasses.asdict(self)


def op_where(finding: ForwardFinding) -> str:
    """The operation that mixed the stray in, with its line when that is another line."""
    at = (finding.op_filename, finding.op_lineno)
    return operation_at(finding.op, at, (finding.filename, finding.lineno)) or finding.op


def operation_at(op: str, at: tuple[str, int], stray: tuple[str, int]) -> str | None:
    """``op`` at ``at`` (file, line), said from the stray's line ``stray``: ``op (line 20)`` in
    the same file, ``op (file.py:20)`` in another; None on the stray's own line."""
    if at == stray:
        return None
    if at[0] == stray[0]:
        return OP_AT_LINE.format(op=op, lineno=at[1])
    return OP_AT.format(op=op, where=location(*at))
