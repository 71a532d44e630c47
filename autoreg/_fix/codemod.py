"""The LibCST codemod: one file's edits applied to its source, every other byte kept.

Each edit is checked against the code before it is made; an edit whose code is not the simple
shape it expects is refused and comes back as a ``HandEdit`` with the reason. Made edits are
collected by node (``changes``) and applied in one pass (``_Apply``); ``import autoreg`` (and
``import torch``, when the file has no name for ``torch.nn``) is added by ``imports``, where isort
would put it, and only when the file does not already import it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, TypeVar, cast

import libcst as cst
from libcst.metadata import MetadataWrapper

from .._messages.fix import FIX_HAND_STALE_EDIT, FIX_HAND_UNPARSED
from .changes import Changes
from .edits import Edit, HandEdit
from .imports import add_import
from .source import Index

__all__ = ["Rewrite", "rewrite"]

_Node = TypeVar("_Node", bound=cst.CSTNode)


@dataclasses.dataclass
class Rewrite:
    """The new source (bytes, in the file's own ``encoding``), the edits made, the edits
    refused."""

    code: bytes
    encoding: str
    made: list[Edit]
    hand: list[HandEdit]


def rewrite(source: bytes, filename: str, edits: Sequence[Edit]) -> Rewrite:
    """Apply ``edits`` (all of the file ``filename``) to ``source``."""
    try:
        parsed = cst.parse_module(source)
    except cst.ParserSyntaxError as error:  # newer syntax than this LibCST reads, say
        reason = FIX_HAND_UNPARSED.format(error=str(error).splitlines()[0])
        hand = [HandEdit(filename, error.raw_line, "", reason, FIX_HAND_STALE_EDIT)]
        return Rewrite(source, "utf-8", [], hand)
    index = Index(MetadataWrapper(parsed, unsafe_skip_copy=True))
    changes = Changes(index, filename)
    for edit in edits:
        changes.make(edit)
    module = index.module.visit(_Apply(changes))
    for name in sorted(changes.imports):
        module = add_import(module, name)
    return Rewrite(module.bytes, module.encoding, changes.made, changes.hand)


def _declare_plain(body: cst.BaseSuite, names: list[tuple[str, str]]) -> cst.BaseSuite:
    """``body`` with ``name: autoreg.Plain  # comment`` for each of ``names`` (name, comment)
    first (after a docstring)."""
    if not isinstance(body, cst.IndentedBlock):
        return body
    statements = list(body.body)
    first = statements[0] if statements else None
    docstring = (
        isinstance(first, cst.SimpleStatementLine)
        and isinstance(first.body[0], cst.Expr)
        and isinstance(first.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )
    lines = [
        cst.SimpleStatementLine(
            [cst.AnnAssign(cst.Name(name), cst.Annotation(cst.parse_expression("autoreg.Plain")))],
            trailing_whitespace=cst.TrailingWhitespace(
                whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment(comment)
            ),
        )
        for name, comment in dict(names).items()
    ]
    at = 1 if docstring else 0
    return body.with_changes(body=[*statements[:at], *lines, *statements[at:]])


class _Apply(cst.CSTTransformer):
    """Carries out ``Changes`` on the tree they were found in."""

    def __init__(self, changes: Changes) -> None:
        super().__init__()
        self.changes = changes

    def on_leave(
        self, original_node: _Node, updated_node: _Node
    ) -> _Node | cst.RemovalSentinel | cst.FlattenSentinel[_Node]:
        updated = super().on_leave(original_node, updated_node)
        changes = self.changes
        new: Any = updated
        if isinstance(original_node, cst.ClassDef) and original_node in changes.bases:
            new = updated_node.with_changes(bases=changes.bases[original_node])
            plain = changes.plain.get(original_node, [])
            if plain:
                new = new.with_changes(body=_declare_plain(new.body, plain))
        elif isinstance(original_node, cst.BaseSmallStatement):
            new = changes.replaced.get(original_node, updated)
        elif isinstance(original_node, cst.SimpleStatementLine) and original_node in changes.after:
            new = cst.FlattenSentinel([updated, *changes.after[original_node]])
        return cast("_Node | cst.RemovalSentinel | cst.FlattenSentinel[_Node]", new)
