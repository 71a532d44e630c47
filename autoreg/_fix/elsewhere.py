"""Stores of a name the buffer style would register, made through another name than ``self``.

``stores.stores_of`` reads a class's own ``self.<name> = v``. A buffer changes every store of the
name on an instance of the class, wherever it is made: a classmethod's ``head.temperature = t``,
a parent's ``self.head.temperature = fixed``, a helper's ``model.temperature = t``. A buffer
refuses anything but a tensor or None (or a parameter or a module, which ``nn.Module`` puts in
its place), so each such store must be shown to store one, or the name is listed: the stray
becomes ``Kind.HAND``, as ``project`` lists a subclass's store.

Which stores are read:

- each store the run recorded (``Site``: made on the module, whatever the code calls it), read
  as a store of the class's that ran (``stores.other_value``: another configuration may store
  another value there);
- each ``<x>.<name> = v`` (or ``setattr(x, "<name>", v)``) the run did not make, in a ``.py``
  file under the working directory that names one of the stray's classes or a class deriving
  from them (``ProjectSource.naming``), read as a store that did not run (``stores.value_kind``:
  a tensor or None, or listed).

Not read: a method's store through its own first parameter (``self.x = v``: the class's own
attribute, read by ``stores_of`` for the stray's classes, by ``project`` for a subclass, and
another class's attribute otherwise), and ``setattr(x, name, v)`` under a computed name the run
did not make. The limit is that of the project's other searches, where a class is known by its
name in the source: a store through another name in a file that never names the class (a script
handed a built model: ``model.head.temperature = 2.0``) is not seen; a file that names it and
stores the name on another object (``options.temperature = 0.7``) holds the name back, which
lists a store ``fix`` could have rewritten, never the other way round. A name common to many
classes (``weight``) is held back only by code that names one of these classes, and only by a
store whose value the source does not show a tensor, a parameter or None.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import Final

import libcst as cst
from libcst.metadata import MetadataWrapper

from .._messages.fix import (
    FIX_HAND_THROUGH,
    FIX_HAND_THROUGH_EDIT,
    FIX_OF_PARAMETER,
    FIX_THROUGH_OTHER,
    FIX_THROUGH_UNKNOWN,
)
from .project import ProjectSource
from .source import Index, Statement, dotted, literal, self_name_of
from .stores import other_value, value_kind
from .strays import Kind, Stray

__all__ = ["with_stores_elsewhere"]

# What a store made outside the class's construction may store: nn.Module puts a parameter or a
# module in a buffer's place.
_TAKES: Final = frozenset({"tensor", "none", "parameter", "module"})


def with_stores_elsewhere(
    strays: Iterable[Stray], root: str, excluded: Sequence[str]
) -> list[Stray]:
    """``strays``, each tensor attribute that a store through another name may give what a
    buffer refuses listed (``Kind.HAND``), with the first such store in its reason."""
    source = ProjectSource(root, excluded)
    files = _Files()
    found = []
    for stray in strays:
        if stray.kind is Kind.TENSOR:
            reason = _refused(stray, source, files, root)
            if reason:
                edit = FIX_HAND_THROUGH_EDIT.format(attribute=stray.attribute)
                stray = dataclasses.replace(stray, kind=Kind.HAND, reason=reason, edit=edit)
        found.append(stray)
    return found


@dataclasses.dataclass(frozen=True)
class _Through:
    """A store of the name through another name: its file, the statement and the small
    statement in it, the value (None: the source
    does not show it, as in ``x.t, y = pair``), the function it is in and that function's
    ``self`` ("" outside a method)."""

    filename: str
    statement: Statement
    small: cst.BaseSmallStatement
    value: cst.BaseExpression | None
    function: cst.FunctionDef
    self_name: str


def _refused(stray: Stray, source: ProjectSource, files: _Files, root: str) -> str:
    """Why a store of ``stray``'s name through another name may give it what a buffer refuses
    (``FIX_HAND_THROUGH``); ``""`` if none may."""
    attribute = stray.attribute
    recorded: dict[tuple[str, int], set[str]] = {}
    for site in stray.sites:
        recorded.setdefault((site.filename, site.lineno), set()).add(site.value)
    for (filename, lineno), kinds in recorded.items():  # what the run made: it ran
        index = files.get(filename)
        statement = index.statement(None, lineno) if index is not None else None
        if index is None or statement is None:
            continue
        torch_names = index.torch_names()
        for store in _stores_through(files, filename, statement, attribute):
            if store.value is None:
                continue  # unpacked: what ran is what the run saw
            if not kinds <= _TAKES:
                return _reason(store, root, FIX_THROUGH_UNKNOWN)
            other = other_value(
                store.value, store.function, store.self_name, attribute, torch_names, _TAKES
            )
            if other is not None:
                return _reason(store, root, _other(*other))
    names = [c.qualname.rpartition(".")[2] for c in stray.classes]
    for filename, _ in source.naming(names):  # what the run did not make, in code naming them
        index = files.get(filename)
        if index is None:
            continue
        torch_names = index.torch_names()
        for statement in index.statements:
            lines = range(statement.start, statement.end + 1)
            if any((filename, line) in recorded for line in lines):
                continue  # read above
            for store in _stores_through(files, filename, statement, attribute):
                kind = (
                    value_kind(store.value, store.function, store.self_name, attribute, torch_names)
                    if store.value is not None
                    else None
                )
                if kind not in _TAKES:
                    return _reason(store, root, FIX_THROUGH_UNKNOWN)
    return ""


def _stores_through(
    files: _Files, filename: str, statement: Statement, attribute: str
) -> Iterator[_Through]:
    """The stores of ``<x>.<attribute>`` in ``statement`` where ``<x>`` is not the ``self`` of
    the method it is in (in a function nested in it too): ``<x>.<attribute> = v`` (annotated or
    not; among several targets or unpacked, with no value), ``setattr(x, "<attribute>", v)``."""
    function = statement.function() or files.top(filename)
    methods = [
        node
        for outer, inner, node in zip(
            statement.ancestors, statement.ancestors[1:], statement.ancestors[2:], strict=False
        )
        if isinstance(outer, cst.ClassDef)
        and isinstance(inner, cst.IndentedBlock)
        and isinstance(node, cst.FunctionDef)
    ]
    own = self_name_of(methods[-1]) if methods else None  # the method's self, closures included

    def through(target: cst.BaseExpression) -> bool:
        return (
            isinstance(target, cst.Attribute)
            and target.attr.value == attribute
            and not (isinstance(target.value, cst.Name) and target.value.value == own)
        )

    def make(small: cst.BaseSmallStatement, value: cst.BaseExpression | None) -> _Through:
        self_name = self_name_of(function) or ""
        return _Through(filename, statement, small, value, function, self_name)

    for small in statement.node.body:
        if isinstance(small, cst.Assign):
            single = len(small.targets) == 1
            for assigned in small.targets:
                for target in _flat(assigned.target):
                    if through(target):
                        whole = single and target is assigned.target
                        yield make(small, small.value if whole else None)
        elif isinstance(small, cst.AnnAssign) and small.value is not None:
            if through(small.target):
                yield make(small, small.value)
        elif (
            isinstance(small, cst.Expr)
            and isinstance(small.value, cst.Call)
            and dotted(small.value.func) == "setattr"
            and len(small.value.args) == 3
        ):
            holder, name, value = (arg.value for arg in small.value.args)
            own_store = isinstance(holder, cst.Name) and holder.value == own
            if (
                not own_store
                and isinstance(name, cst.SimpleString)
                and literal(name.value) == attribute
            ):
                yield make(small, value)


def _flat(target: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    """The targets an assignment to ``target`` stores, unpacked."""
    if isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from _flat(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from _flat(target.value)
    else:
        yield target


def _reason(store: _Through, root: str, what: str) -> str:
    """``FIX_HAND_THROUGH`` for ``store``: where it is (relative to ``root``), its code on one
    line (shortened past 60 characters), ``what`` it may store; braces kept as they are."""
    small = store.small.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
    code = " ".join(cst.Module([]).code_for_node(small).split())
    if len(code) > 60:
        code = code[:57] + "..."
    where = f"{_short(store.filename, root)}:{store.statement.start}"
    return FIX_HAND_THROUGH.format(where=where, code=code, what=what)


def _other(value: cst.BaseExpression, parameter: str | None) -> str:
    """``FIX_THROUGH_OTHER`` for ``value`` (the default of ``parameter``, if one)."""
    code = " ".join(cst.Module([]).code_for_node(value).split())
    if len(code) > 40:
        code = code[:37] + "..."
    if parameter is not None:
        code = FIX_OF_PARAMETER.format(value=code, parameter=parameter)
    return FIX_THROUGH_OTHER.format(value=code)


def _short(filename: str, root: str) -> str:
    relative = os.path.relpath(filename, root)
    return filename if relative.startswith("..") else relative


class _Files:
    """Each file's ``Index``, parsed once (None: not read, or not parsed), and its top-level
    code as a function (``top``): what a store outside any function reads its names in."""

    def __init__(self) -> None:
        self._indexes: dict[str, Index | None] = {}
        self._tops: dict[str, cst.FunctionDef] = {}

    def top(self, filename: str) -> cst.FunctionDef:
        if filename not in self._tops:
            index = self.get(filename)
            body = list(index.module.body) if index is not None else []
            block = cst.IndentedBlock(body or [cst.SimpleStatementLine([cst.Pass()])])
            self._tops[filename] = cst.FunctionDef(cst.Name("_"), cst.Parameters(), block)
        return self._tops[filename]

    def get(self, filename: str) -> Index | None:
        if filename not in self._indexes:
            try:
                with open(filename, "rb") as file:
                    module = cst.parse_module(file.read())
                index: Index | None = Index(MetadataWrapper(module, unsafe_skip_copy=True))
            except (OSError, cst.ParserSyntaxError):
                index = None
            self._indexes[filename] = index
        return self._indexes[filename]
