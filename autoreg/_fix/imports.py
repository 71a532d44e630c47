"""``import autoreg`` (or ``import torch``) added where isort and ruff would put it.

A file that needs ``autoreg`` imports torch: the new line goes into the block of imports that
holds the first top-level torch import, sorted as isort's default profile sorts (plain imports
before ``from`` imports, by name, ignoring case), so that ``ruff check --select I`` stays quiet.
A file without a top-level torch import gets LibCST's ``AddImportsVisitor`` placement (after the
last import).
"""

from __future__ import annotations

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor, ImportItem

from .source import dotted

__all__ = ["add_import"]


def add_import(module: cst.Module, name: str) -> cst.Module:
    """``module`` with ``import name`` (a top-level name), unless it already has it."""
    body = list(module.body)
    imports = [i for i, statement in enumerate(body) if _imported(statement)]
    if any(_binds(body[i], name) for i in imports):
        return module
    first = next(
        (i for i in imports if any(n.startswith("torch") for n in _imported(body[i]))), None
    )
    if first is None:
        context = CodemodContext()
        return AddImportsVisitor(context, [ImportItem(name)]).transform_module(module)
    start, end = first, first
    while start - 1 in imports and not _blank_before(body[start]):
        start -= 1
    while end + 1 in imports and not _blank_before(body[end + 1]):
        end += 1
    position = next(
        (
            i
            for i in range(start, end + 1)
            if not _plain(body[i]) or _imported(body[i])[0].lower() > name.lower()
        ),
        end + 1,
    )
    line = cst.SimpleStatementLine([cst.Import([cst.ImportAlias(cst.Name(name))])])
    if position <= end:  # the new line takes the place, and the leading lines, of that one
        line = line.with_changes(leading_lines=body[position].leading_lines)
        body[position] = body[position].with_changes(leading_lines=())
    body.insert(position, line)
    return module.with_changes(body=body)


def _imported(statement: cst.CSTNode) -> list[str]:
    """The modules a top-level import line imports (``[]`` for any other statement)."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return []
    small = statement.body[0]
    if isinstance(small, cst.Import):
        return [dotted(alias.name) for alias in small.names]
    if isinstance(small, cst.ImportFrom):
        return ["." * len(small.relative) + dotted(small.module)]
    return []


def _binds(statement: cst.CSTNode, name: str) -> bool:
    """Whether ``statement`` is ``import name`` (among others, not renamed)."""
    assert isinstance(statement, cst.SimpleStatementLine)
    small = statement.body[0]
    return isinstance(small, cst.Import) and any(
        dotted(alias.name) == name and alias.asname is None for alias in small.names
    )


def _plain(statement: cst.CSTNode) -> bool:
    """Whether ``statement`` is ``import x`` rather than ``from x import y``."""
    assert isinstance(statement, cst.SimpleStatementLine)
    return isinstance(statement.body[0], cst.Import)


def _blank_before(statement: cst.CSTNode) -> bool:
    """Whether a blank line precedes ``statement``: a new block of imports starts there."""
    assert isinstance(statement, cst.SimpleStatementLine)
    return any(line.comment is None for line in statement.leading_lines)
