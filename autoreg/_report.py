"""The audits' reports, as text and JSON: what the command line prints and ``testing`` raises.

Tables fit a terminal of 80 to 120 columns: each column is as wide as its widest cell, and the
last one (the fix) is wrapped to the room left; when too little is left, the fix goes under its
row. JSON keeps every field in full.
"""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Sequence
from typing import Final

from torch import nn

from ._audit import Finding
from ._forward_audit import ForwardFinding, ModeName
from ._forward_audit.finding import op_where
from ._messages.cli import CLEAN, FORWARD_CLEAN, FORWARD_SUMMARY, SUMMARY
from ._messages.describe import brief

__all__ = ["audit_json", "audit_table", "format_forward", "report_text", "report_width"]

MIN_WIDTH: Final = 80
MAX_WIDTH: Final = 120
_NO_TERMINAL: Final = 100  # the width when stdout is not a terminal (a pipe, a file)
_MIN_FIX: Final = 32  # the fewest columns the fix is wrapped to beside its row


def report_width() -> int:
    """The terminal's width, within 80 to 120 columns."""
    columns = shutil.get_terminal_size((_NO_TERMINAL, 24)).columns
    return min(max(columns, MIN_WIDTH), MAX_WIDTH)


def report_text(
    model: nn.Module,
    findings: list[Finding],
    forward: list[ForwardFinding] | None = None,
    modes: Sequence[ModeName] = (),
    width: int | None = None,
) -> str:
    """The tables the command prints: the tensors ``.to()`` would leave behind, then (when
    ``forward`` is given) what the forward pass, run in ``modes``, leaves behind."""
    width = width or report_width()
    text = audit_table(model, findings, width)
    if forward is None:
        return text
    return f"{text}\n\n{format_forward(forward, type(model).__name__, modes, width)}"


def audit_table(model: nn.Module, findings: list[Finding], width: int | None = None) -> str:
    """``find_unregistered``'s findings as a table, with a summary line."""
    cls, width = type(model).__name__, width or report_width()
    if not findings:
        return _paragraph(CLEAN.format(cls=cls), width)
    header = ("PATH", "CLASS", "TENSOR", "FIX")
    rows = [(f.path, f.class_name, brief(f.tensor), f.fix) for f in findings]
    count = len(findings)
    summary = SUMMARY.format(count=count, tensors="tensor" if count == 1 else "tensors", cls=cls)
    return "\n".join([*table(header, rows, width), "", _paragraph(summary, width)])


def format_forward(
    findings: list[ForwardFinding],
    cls: str,
    modes: Sequence[ModeName] = (),
    width: int | None = None,
) -> str:
    """``audit_forward``'s findings as a table, with a summary line that says the ``modes`` the
    model ran in (and a MODE column when there are several)."""
    mode, width = " and ".join(modes) or "its own", width or report_width()
    if not findings:
        return _paragraph(FORWARD_CLEAN.format(cls=cls, mode=mode), width)
    several = len(modes) > 1
    header = ("WHERE", "KIND", *(("MODE",) if several else ()), "TENSOR", "OP", "FIX")
    rows = [
        (
            f.where,
            f.kind,
            *((f.mode,) if several else ()),
            f.tensor,
            op_where(f) if f.op else f"{f.class_name}.{f.attribute}",
            f.fix,
        )
        for f in findings
    ]
    count = len(findings)
    summary = FORWARD_SUMMARY.format(
        count=count, strays="stray" if count == 1 else "strays", cls=cls, mode=mode
    )
    return "\n".join([*table(header, rows, width), "", _paragraph(summary, width)])


def audit_json(
    target: str,
    model: nn.Module,
    findings: list[Finding],
    forward: list[ForwardFinding] | None = None,
    modes: Sequence[ModeName] = (),
) -> dict[str, object]:
    """What ``audit --json`` prints: the target, the model's class and the findings; with
    ``forward``, the mode the forward ran in (``train``, ``eval`` or ``both``) and its
    findings."""
    report: dict[str, object] = {
        "target": target,
        "class": type(model).__name__,
        "findings": [finding.as_dict() for finding in findings],
    }
    if forward is not None:
        report["forward_mode"] = "both" if len(modes) > 1 else "".join(modes)
        report["forward"] = [finding.as_dict() for finding in forward]
    return report


def table(header: Sequence[str], rows: Sequence[Sequence[str]], width: int) -> list[str]:
    """The lines of a table of ``width`` columns: every column padded to its widest cell, the
    last wrapped to the room left; where less than ``_MIN_FIX`` is left, or a word of the last
    column does not fit, the last column goes under each row, indented."""
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header) - 1)]
    indent = sum(widths) + 2 * len(widths)
    longest = max(len(word) for row in rows for word in row[-1].split())

    def left(row: Sequence[str]) -> str:
        return "".join(cell.ljust(w + 2) for cell, w in zip(row[:-1], widths, strict=True))

    lines: list[str] = []
    if width - indent >= max(_MIN_FIX, longest):
        for row in (header, *rows):
            parts = _wrap(row[-1], width - indent) or [""]
            lines.append(left(row) + parts[0])
            lines.extend(" " * indent + part for part in parts[1:])
        return lines
    label = f"    {header[-1].lower()}: "
    lines.append(left(header).rstrip())
    for row in rows:
        lines.append(left(row).rstrip())
        lines.extend(
            textwrap.wrap(
                row[-1],
                width,
                initial_indent=label,
                subsequent_indent=" " * len(label),
                break_on_hyphens=False,
            )
        )
    return lines


def _paragraph(text: str, width: int) -> str:
    return "\n".join(_wrap(text, width))


def _wrap(text: str, width: int) -> list[str]:
    return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False)
