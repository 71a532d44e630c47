"""The audits' reports, as text and JSON: what the command line prints and ``testing`` raises.

The text is for a person: each fix is said once. The tensors ``.to()`` leaves behind are grouped
by class, an attribute once however many instances hold it (``layers.0.attn.mask (+11)``), and a
class's fix follows its rows. The forward's strays are one row per site, its kinds together
(``device, dtype``), a row of a plain attribute points at its fix above, and a fix shared by rows
that follow each other is said after the last. Lines fit a terminal of 80 to 120 columns. JSON
keeps every finding and every field in full.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import textwrap
from collections.abc import Sequence
from typing import Final

import torch
from torch import nn

from ._audit import Finding
from ._forward_audit import LOW_PRECISION, ForwardFinding, ModeName
from ._forward_audit.finding import op_where
from ._messages.cli import (
    CLEAN,
    FIX_LINE,
    FIX_LINE_FOR,
    FORWARD_CLEAN,
    FORWARD_SUMMARY,
    MORE,
    NO_LOW_PRECISION,
    NOT_AUDITED,
    SEE_ABOVE,
    SUMMARY,
    SUMMARY_CLASSES,
    SUMMARY_IN,
)
from ._messages.describe import brief, dtype_name

__all__ = [
    "audit_json",
    "audit_table",
    "count_strays",
    "format_forward",
    "report_text",
    "report_width",
]

MIN_WIDTH: Final = 80
MAX_WIDTH: Final = 120
_NO_TERMINAL: Final = 100  # the width when stdout is not a terminal (a pipe, a file)
_INDENT: Final = "  "


def report_width() -> int:
    """The terminal's width, within 80 to 120 columns."""
    columns = shutil.get_terminal_size((_NO_TERMINAL, 24)).columns
    return min(max(columns, MIN_WIDTH), MAX_WIDTH)


@dataclasses.dataclass(frozen=True)
class Forward:
    """What the forward audit gave: its findings, the modes it ran in, what ran (``the forward
    of Net``, ``the step train_step of Net``), when it could not run to its end, why, and the
    dtype of its second pass (None: skipped); ``stopped_low``: only that second pass stopped
    (the pass in the model's own dtype ran to its end)."""

    findings: list[ForwardFinding]
    modes: Sequence[ModeName]
    what: str
    not_audited: str = ""
    low_precision: torch.dtype | None = LOW_PRECISION
    stopped_low: bool = False


def report_text(
    model: nn.Module, findings: list[Finding], forward: Forward | None = None, width: int = 0
) -> str:
    """The report the command prints: the tensors ``.to()`` would leave behind, then (when
    ``forward`` is given) what the forward pass leaves behind, or why it was not audited."""
    width = width or report_width()
    text = audit_table(model, findings, width)
    if forward is None:
        return text
    return f"{text}\n\n{format_forward(forward, findings, width)}"


def audit_table(model: nn.Module, findings: list[Finding], width: int = 0) -> str:
    """``find_unregistered``'s findings, grouped by class, with each class's fixes."""
    cls, width = type(model).__name__, width or report_width()
    if not findings:
        return _paragraph(CLEAN.format(cls=cls), width)
    groups: dict[str, dict[str, list[Finding]]] = {}
    for finding in findings:
        key = _attribute_key(finding)
        groups.setdefault(finding.class_name, {}).setdefault(key, []).append(finding)
    rows: list[tuple[str, ...]] = []
    after: dict[int, list[str]] = {}  # fix lines after the row at this index
    for name, attributes in groups.items():
        for members in attributes.values():
            first = members[0]
            path = first.path + (MORE.format(count=len(members) - 1) if len(members) > 1 else "")
            rows.append((path, name, brief(first.tensor)))
        after[len(rows) - 1] = _class_fixes([m[0] for m in attributes.values()], width)
    count, classes = len(findings), list(groups)
    tensors = "tensor" if count == 1 else "tensors"
    if classes == [cls]:
        summary = SUMMARY.format(count=count, tensors=tensors, cls=cls)
    elif len(classes) == 1:
        summary = SUMMARY_IN.format(count=count, tensors=tensors, inner=classes[0], cls=cls)
    else:
        summary = SUMMARY_CLASSES.format(
            count=count, tensors=tensors, classes=len(classes), cls=cls
        )
    lines = _table(("PATH", "CLASS", "TENSOR"), rows, after)
    return "\n".join([*lines, "", _paragraph(summary, width)])


def format_forward(forward: Forward, held: Sequence[Finding] = (), width: int = 0) -> str:
    """``audit_forward``'s findings, a row per site, with a fix for each run of rows, and why it
    was not audited to its end; ``held``: the attribute findings above, which the rows of plain
    attributes point at."""
    width = width or report_width()
    mode = " and ".join(forward.modes) or "its own"
    blocks: list[str] = []
    if forward.findings:
        count = count_strays(forward.findings)
        summary = FORWARD_SUMMARY.format(
            count=count, strays="stray" if count == 1 else "strays", what=forward.what, mode=mode
        )
        table = "\n".join(_forward_rows(forward, held, width))
        blocks += [table, _paragraph(summary, width)]
    if forward.not_audited:
        blocks.append(_paragraph(NOT_AUDITED.format(reason=forward.not_audited), width))
    elif not forward.findings:
        blocks.append(_paragraph(FORWARD_CLEAN.format(what=forward.what, mode=mode), width))
    if forward.low_precision is None:
        blocks[-1] += "\n" + _paragraph(NO_LOW_PRECISION, width)
    return "\n\n".join(blocks)


def _forward_rows(forward: Forward, held: Sequence[Finding], width: int) -> list[str]:
    several = len(forward.modes) > 1
    above = {(f.class_name, f.attribute) for f in held}  # the attributes reported above
    rows: list[tuple[str, ...]] = []
    fixes: list[str] = []
    for group in _sites(forward.findings):
        first = group[0]
        kinds = ", ".join(dict.fromkeys(f.kind for f in group))
        holders = len({(f.module_path, f.attribute) for f in group})
        where = _where(first) + (MORE.format(count=holders - 1) if holders > 1 else "")
        op = op_where(first) if first.op else f"{first.class_name}.{first.attribute}"
        mode_cell = (", ".join(first.modes or (first.mode,)),) if several else ()
        rows.append((where, kinds, *mode_cell, first.tensor, op))
        root = _root(first.attribute)
        if (first.entered or first.kind == "stored") and (first.class_name, root) in above:
            shown = root if holders > 1 else first.attribute
            fixes.append(SEE_ABOVE.format(cls=first.class_name, attribute=shown))
        else:
            fixes.append(first.fix)
    after: dict[int, list[str]] = {}
    for index, fix in enumerate(fixes):
        if index + 1 == len(fixes) or fixes[index + 1] != fix:
            after[index] = _wrapped(FIX_LINE.format(fix=fix), width)
    header = ("WHERE", "KIND", *(("MODE",) if several else ()), "TENSOR", "OP")
    return _table(header, rows, after)


def audit_json(
    target: str, model: nn.Module, findings: list[Finding], forward: Forward | None = None
) -> dict[str, object]:
    """What ``audit --json`` prints: the target, the model's class and the findings; with
    ``forward``, what ran, the mode it ran in (``train``, ``eval`` or ``both``), its findings,
    why it was not audited (``null`` when it was), and the dtype of its second pass (``null``:
    skipped)."""
    report: dict[str, object] = {
        "target": target,
        "class": type(model).__name__,
        "findings": [finding.as_dict() for finding in findings],
    }
    if forward is not None:
        report["forward_mode"] = "both" if len(forward.modes) > 1 else "".join(forward.modes)
        report["forward_of"] = forward.what
        report["forward"] = [finding.as_dict() for finding in forward.findings]
        report["not_audited"] = forward.not_audited or None
        low = forward.low_precision
        report["low_precision"] = dtype_name(low) if low is not None else None
    return report


# --- grouping -------------------------------------------------------------------------------------


def _attribute_key(finding: Finding) -> str:
    """The attribute a finding is in, the same in every instance of its class: the path after
    the module's own (``mask``, ``anchors[0]``, ``cfg.weights``)."""
    prefix, _, tail = finding.path.partition(finding.attribute)
    return finding.attribute + tail if prefix == "" or prefix.endswith(".") else finding.path


def _class_fixes(firsts: list[Finding], width: int) -> list[str]:
    """The fix lines of a class: each fix once, with the attributes it is for when there are
    several; one that several attributes share is said with ``name`` for each of them."""
    by_fix: dict[str, list[Finding]] = {}
    for finding in firsts:
        by_fix.setdefault(_generic(finding), []).append(finding)
    lines: list[str] = []
    for generic, members in by_fix.items():
        attributes = list(dict.fromkeys(m.attribute for m in members))
        names = ", ".join(attributes)
        if len(attributes) == 1:  # one attribute (its items, maybe): its own fix
            fix = members[0].fix
            text = (
                FIX_LINE.format(fix=fix)
                if len(by_fix) == 1
                else FIX_LINE_FOR.format(names=names, fix=fix)
            )
        else:
            text = FIX_LINE_FOR.format(names=names, fix=generic)
        lines.extend(_wrapped(text, width))
    return lines


def _generic(finding: Finding) -> str:
    """The fix of ``finding`` with its attribute's name as ``name``: the same for every
    attribute that needs the same edit."""
    name = finding.attribute
    return finding.fix.replace(f"'{name}'", "name").replace(f"self.{name} ", "self.name ")


def count_strays(findings: list[ForwardFinding]) -> int:
    """How many strays ``findings`` are, as the report counts them: one per row (a site, its
    kinds together; one attribute however many instances hold it)."""
    return len(_sites(findings))


def _sites(findings: list[ForwardFinding]) -> list[list[ForwardFinding]]:
    """The findings grouped by site (one row each), in the order of their first finding: the
    kinds of one line together, one attribute of several instances (or the items of one list
    attribute) together."""
    groups: dict[tuple[object, ...], list[ForwardFinding]] = {}
    for finding in findings:
        stored = finding.kind == "stored"
        attribute = _root(finding.attribute)
        fix = "" if attribute else finding.fix
        key = (finding.filename, finding.lineno, attribute, fix, finding.mode, stored)
        groups.setdefault(key, []).append(finding)
    return list(groups.values())


def _root(attribute: str) -> str:
    """The module attribute a path starts with: ``prototypes`` for ``prototypes[2]``."""
    return re.split(r"[.\[]", attribute, maxsplit=1)[0]


# --- layout ---------------------------------------------------------------------------------------


def _where(finding: ForwardFinding) -> str:
    """``path/file.py:12`` from the working directory; a path outside it as its last two parts
    (``.../llama/model.py:282``): the table fits, and JSON keeps the path in full."""
    where = finding.where
    if os.path.isabs(where):
        parts = where.split(os.sep)
        where = os.sep.join(["...", *parts[-2:]])
    return where


def _table(
    header: Sequence[str], rows: Sequence[Sequence[str]], after: dict[int, list[str]]
) -> list[str]:
    """Rows padded to their columns' widest cells, the lines ``after`` a row below it."""
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        return "".join(cell.ljust(w + 2) for cell, w in zip(row, widths, strict=True)).rstrip()

    lines = [line(header)]
    for index, row in enumerate(rows):
        lines.append(line(row))
        lines.extend(after.get(index, ()))
    return lines


def _wrapped(text: str, width: int) -> list[str]:
    """``text`` wrapped under a row: indented, continued two columns further in."""
    return textwrap.wrap(
        text,
        width,
        initial_indent=_INDENT,
        subsequent_indent=_INDENT * 2,
        break_long_words=False,
        break_on_hyphens=False,
    )


def _paragraph(text: str, width: int) -> str:
    return "\n".join(textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False))
