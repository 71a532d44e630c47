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
from typing import Any, Final, TypeVar, cast

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
    """``body`` with each of ``names`` (name, comment) declared ``autoreg.Plain``: an
    annotation of the name in the body (``running: torch.Tensor``, in a branch of it too) is
    given that type in place, as the last annotation of a name in a class body is the one
    ``__annotations__`` keeps; a name the body does not annotate gets
    ``name: autoreg.Plain  # comment`` first (after a docstring). The class's own annotation
    overrides a base's for autoreg too (``_declarations.read_declarations``)."""
    if not isinstance(body, cst.IndentedBlock):
        return body
    plain = dict(names)
    retyped = _Retype(plain)
    body = cast("cst.IndentedBlock", body.visit(retyped))
    statements = list(body.body)
    first = statements[0] if statements else None
    docstring = (
        isinstance(first, cst.SimpleStatementLine)
        and isinstance(first.body[0], cst.Expr)
        and isinstance(first.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )
    lines = [
        cst.SimpleStatementLine(
            [cst.AnnAssign(cst.Name(name), cst.Annotation(_PLAIN))],
            trailing_whitespace=cst.TrailingWhitespace(
                whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment(comment)
            ),
        )
        for name, comment in plain.items()
        if name not in retyped.found
    ]
    at = 1 if docstring else 0
    return body.with_changes(body=[*statements[:at], *lines, *statements[at:]])


_PLAIN: Final = cst.parse_expression("autoreg.Plain")
_SPACE: Final = cst.SimpleWhitespace("  ")


class _Retype(cst.CSTTransformer):
    """Gives each annotation of one of ``names`` (name: comment) in a class body (not in its
    methods or nested classes) the type ``autoreg.Plain``, and its line the comment if it has
    none; ``found``: the names it retyped."""

    def __init__(self, names: dict[str, str]) -> None:
        super().__init__()
        self.names = names
        self.found: set[str] = set()
        self.line: list[str] = []  # the names retyped on the line being visited

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.SimpleStatementLine):
            self.line = []
        return not isinstance(node, (cst.FunctionDef, cst.ClassDef))

    def on_leave(
        self, original_node: _Node, updated_node: _Node
    ) -> _Node | cst.RemovalSentinel | cst.FlattenSentinel[_Node]:
        new: Any = updated_node
        if isinstance(new, cst.AnnAssign):
            target = new.target
            if isinstance(target, cst.Name) and target.value in self.names:
                self.found.add(target.value)
                self.line.append(target.value)
                new = new.with_changes(annotation=new.annotation.with_changes(annotation=_PLAIN))
        elif isinstance(new, cst.SimpleStatementLine) and self.line:
            trailing = new.trailing_whitespace
            if trailing.comment is None:
                comment = cst.Comment(self.names[self.line[0]])
                spaced = trailing.with_changes(whitespace=_SPACE, comment=comment)
                new = new.with_changes(trailing_whitespace=spaced)
        return cast("_Node | cst.RemovalSentinel | cst.FlattenSentinel[_Node]", new)


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
