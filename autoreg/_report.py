"""The audits' reports as text and JSON: what the command line prints and ``testing`` raises."""

from __future__ import annotations

from torch import nn

from ._audit import Finding
from ._forward_audit import ForwardFinding
from ._forward_audit.finding import op_where
from ._messages import CLEAN, SUMMARY, brief

__all__ = ["audit_json", "audit_table", "format_forward", "report_text"]


def report_text(
    model: nn.Module, findings: list[Finding], forward: list[ForwardFinding] | None = None
) -> str:
    """The tables the command prints: the tensors ``.to()`` would leave behind, then (when
    ``forward`` is given) the strays of the forward pass."""
    text = audit_table(model, findings)
    if forward is None:
        return text
    return f"{text}\n\n{format_forward(forward, type(model).__name__)}"


def audit_table(model: nn.Module, findings: list[Finding]) -> str:
    cls = type(model).__name__
    if not findings:
        return CLEAN.format(cls=cls)
    header = ("PATH", "CLASS", "TENSOR", "FIX")
    rows = [header] + [(f.path, f.class_name, brief(f.tensor), f.fix) for f in findings]
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True))
        + "  "
        + row[3]
        for row in rows
    ]
    return "\n".join(
        [
            *lines,
            "",
            SUMMARY.format(
                count=len(findings), tensors="tensor" if len(findings) == 1 else "tensors", cls=cls
            ),
        ]
    )


def audit_json(target: str, model: nn.Module, findings: list[Finding]) -> dict[str, object]:
    """What ``audit --json`` prints: the target, the model's class and the findings."""
    return {
        "target": target,
        "class": type(model).__name__,
        "findings": [finding.as_dict() for finding in findings],
    }


def format_forward(findings: list[ForwardFinding], cls: str) -> str:
    """The findings as a table, one line each, with a summary line (empty list: one line)."""
    if not findings:
        return f"Nothing in the forward of {cls} stays behind when it moves."
    header = ("WHERE", "KIND", "TENSOR", "OP")
    rows = [header] + [(f.where, f.kind, f.tensor, op_where(f)) for f in findings]
    widths = [max(len(row[column]) for row in rows) for column in range(4)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) + "  " + fix
        for row, fix in zip(rows, ["FIX"] + [f.fix for f in findings], strict=True)
    ]
    count = len(findings)
    summary = (
        f"{count} {'stray' if count == 1 else 'strays'} in the forward of {cls}: "
        "tensors that stay on the default device or dtype when the model moves."
    )
    return "\n".join([*lines, "", summary])
