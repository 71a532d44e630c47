"""Stores of a name the buffer style would register, made through another name than ``self``,
and the values the project passes to a parameter a store stores as it is.

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
  from them (``ProjectSource.naming``; not one whose own class statements have those names,
  another ``Attention``), read as a store that did not run (``stores.value_kind``: a tensor or
  None, or listed).

A parameter a store stores as it is passed (``self.scale = scale``: the factory passed a
tensor) is judged by what the project passes it (``_passes``): a call of the class, of the
method or of the function in those files, or a subclass's ``super().__init__(0.5, n)``, that
passes a value the source shows outside what the store takes lists the name. A value passed in
from outside the project, or through the caller's own parameter without a default, is not seen.

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
import libcst.matchers as m
from libcst.metadata import MetadataWrapper

from .._messages.fix import (
    FIX_HAND_ANOTHER_VALUE_EDIT,
    FIX_HAND_PASSED,
    FIX_HAND_THROUGH,
    FIX_HAND_THROUGH_EDIT,
    FIX_OF_PARAMETER,
    FIX_THROUGH_OTHER,
    FIX_THROUGH_UNKNOWN,
)
from .project import ProjectSource, _Class, classes_of
from .source import Index, Statement, dotted, literal, self_name_of
from .stores import (
    construction_methods,
    other_value,
    passed_parameters,
    stores_of,
    value_kind,
)
from .strays import Kind, Stray

__all__ = ["with_stores_elsewhere"]

# What a store made outside the class's construction may store: nn.Module puts a parameter or a
# module in a buffer's place.
_TAKES: Final = frozenset({"tensor", "none", "parameter", "module"})
_BUILT: Final = frozenset({"tensor", "none"})  # register_buffer, while the module is built


def with_stores_elsewhere(
    strays: Iterable[Stray], root: str, excluded: Sequence[str]
) -> list[Stray]:
    """``strays``, each tensor attribute that a store through another name may give what a
    buffer refuses listed (``Kind.HAND``), with the first such store in its reason."""
    source = ProjectSource(root, excluded)
    files = _Files(root, excluded)
    found = []
    for stray in strays:
        if stray.kind is Kind.TENSOR and not stray.subclass:  # (a subclass's store lists it)
            refused = _refused(stray, source, files, root)
            if refused is not None:
                reason, edit = refused
                stray = dataclasses.replace(stray, kind=Kind.HAND, reason=reason, edit=edit)
        found.append(stray)
    return found


@dataclasses.dataclass(frozen=True)
class _Through:
    """A store of the name through another name: its file, the statement and the small
    statement in it, the value (None: the source does not show it, as in ``x.t, y = pair``),
    the function it is in and that function's ``self`` ("" outside a method)."""

    filename: str
    statement: Statement
    small: cst.BaseSmallStatement
    value: cst.BaseExpression | None
    function: cst.FunctionDef
    self_name: str


def _refused(
    stray: Stray, source: ProjectSource, files: _Files, root: str
) -> tuple[str, str] | None:
    """Why a store of ``stray``'s name may give it what a buffer refuses, and the edit to make:
    a store through another name (``FIX_HAND_THROUGH``), or a parameter stored as it is passed
    that the project passes such a value (``FIX_HAND_PASSED``); None if none may."""
    attribute = stray.attribute
    through = FIX_HAND_THROUGH_EDIT.format(attribute=attribute)
    passing: list[tuple[str, cst.FunctionDef, str, frozenset[str]]] = []
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
                return _reason(store, root, FIX_THROUGH_UNKNOWN), through
            other = other_value(
                store.value, store.function, store.self_name, attribute, torch_names, _TAKES
            )
            if other is not None:
                return _reason(store, root, _other(*other)), through
            for parameter in passed_parameters(store.value, store.function, torch_names):
                passing.append((filename, store.function, parameter, _TAKES))
    classes = classes_of(stray)
    names = [name for _, name in classes]
    homes = {filename for filename, _ in classes if filename is not None}
    for filename, _ in source.naming(classes):  # what the run did not make, in code naming them
        index = files.get(filename)
        if index is None or (
            os.path.realpath(filename) not in homes and all(n in index.named for n in names)
        ):
            continue  # none, or a file whose own classes of those names are the ones it names
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
                    return _reason(store, root, FIX_THROUGH_UNKNOWN), through
    passing += _own_passing(stray, files)
    for filename, function, parameter, takes in passing:
        found = _passes(source, files, classes, filename, function, parameter, takes, attribute)
        if found is not None:
            where, line, value = found
            text = {"parameter": parameter, "function": function.name.value, "value": value}
            reason = FIX_HAND_PASSED.format(where=f"{_short(where, root)}:{line}", **text)
            return reason, FIX_HAND_ANOTHER_VALUE_EDIT.format(attribute=attribute)
    return None


def _own_passing(
    stray: Stray, files: _Files
) -> list[tuple[str, cst.FunctionDef, str, frozenset[str]]]:
    """Each parameter a store of the name in the methods of ``stray``'s classes stores as it
    is passed (``self.scale = scale``): the file, the method, the parameter, and what the
    store may take (a construction method's ``register_buffer`` takes a tensor or None)."""
    ran = {site.function.rpartition(".")[2] for site in stray.sites if site.construction}
    found = []
    for info in stray.classes:
        index = files.get(info.filename) if info.filename is not None else None
        cls = index.find_class(info.qualname, info.lineno) if index is not None else None
        if index is None or cls is None or info.filename is None:
            continue
        built = construction_methods(cls, ran)
        torch_names = index.torch_names()
        for store in stores_of(index, cls, stray.attribute):
            if store.form not in ("assign", "setattr") or store.value is None:
                continue
            takes = _BUILT if store.method.name.value in built else _TAKES
            for parameter in passed_parameters(store.value, store.method, torch_names):
                found.append((info.filename, store.method, parameter, takes))
    return found


def _passes(
    source: ProjectSource,
    files: _Files,
    classes: Sequence[_Class],
    filename: str,
    function: cst.FunctionDef,
    parameter: str,
    takes: frozenset[str],
    attribute: str,
) -> tuple[str, int, str] | None:
    """A call in the project that passes ``parameter`` of ``function`` (of the file
    ``filename``) a value the source shows outside ``takes``: where it is (file, line) and the
    value, in ``FIX_HAND_PASSED``'s words; None if none does. The calls read, in the files that
    name ``classes`` or the function: of an ``__init__``, a call of its class (by its name, or
    the name a file imports it under), ``super().__init__(...)`` in a class statement deriving
    from it, and ``Class.__init__(self, ...)``; of another method, ``<anything>.name(...)``; of
    a function, ``name(...)``."""
    index = files.get(filename)
    owner = _owner(index, function) if index is not None else None
    name = function.name.value
    params = function.params
    positional = [p.name.value for p in (*params.posonly_params, *params.params)]
    static = self_name_of(function) is None
    shift = 1 if owner is not None and not static else 0
    position = positional.index(parameter) if parameter in positional else None
    keyword = parameter not in [p.name.value for p in params.posonly_params]
    for other, _ in source.naming(classes, [name]):
        index = files.get(other)
        if index is None:
            continue
        named = _aliases(index, owner.name.value) if owner is not None else set()
        elsewhere = os.path.realpath(other) != os.path.realpath(filename)
        if owner is not None and elsewhere and owner.name.value in index.named:
            named.discard(owner.name.value)  # there, the name is the file's own class
        derived = _deriving(index, named)
        torch_names = index.torch_names()
        for statement, call in files.calls(other):
            skip = _skipped(call, statement, name, owner is not None, named, derived, shift)
            if skip is None:
                continue
            value = _argument(call, position, skip, parameter if keyword else None)
            if value is None:
                continue
            caller = statement.function() or files.top(other)
            inner = self_name_of(caller) or ""
            found = other_value(value, caller, inner, attribute, torch_names, takes)
            if found is not None:
                return other, statement.start, _value(*found)
    return None


def _owner(index: Index, function: cst.FunctionDef) -> cst.ClassDef | None:
    """The class ``function`` is a method of (None: a function)."""
    for nodes in index.named.values():
        for cls in nodes:
            if any(node is function for node in cls.body.body):
                return cls
    return None


def _aliases(index: Index, cls: str) -> set[str]:
    """``cls`` and the names the file imports it under (``from m import Scaled as Layer``)."""
    found = {cls}
    for node in m.findall(index.module, m.ImportAlias()):
        assert isinstance(node, cst.ImportAlias)
        if dotted(node.name).rpartition(".")[2] == cls and node.asname is not None:
            found.add(dotted(node.asname.name))
    return found


def _deriving(index: Index, names: set[str]) -> set[str]:
    """The class statements of the file deriving from one of ``names``, through others of the
    file: their names."""
    found: set[str] = set()
    grown = True
    while grown:
        grown = False
        for name, nodes in index.named.items():
            bases = {dotted(arg.value).rpartition(".")[2] for node in nodes for arg in node.bases}
            if name not in found and bases & (names | found):
                found.add(name)
                grown = True
    return found


def _skipped(
    call: cst.Call,
    statement: Statement,
    name: str,
    method: bool,
    named: set[str],
    derived: set[str],
    shift: int,
) -> int | None:
    """How many of the function's positional parameters ``call`` of it does not pass (its
    ``self``, when bound), or None when ``call`` is no call of it."""
    func = call.func
    last = dotted(func).rpartition(".")[2]
    if name == "__init__" and named:
        if last in named:
            return 1  # Scaled(...)
        if not m.matches(func, m.Attribute(attr=m.Name("__init__"))):
            return None
        receiver = func.value  # type: ignore[attr-defined]
        if m.matches(receiver, m.Call(func=m.Name("super"))):
            inside = {n.name.value for n in statement.ancestors if isinstance(n, cst.ClassDef)}
            return 1 if inside & derived else None  # super().__init__(...) in a subclass
        return 0 if dotted(receiver).rpartition(".")[2] in named else None
    if method:
        return shift if isinstance(func, cst.Attribute) and func.attr.value == name else None
    return 0 if last == name else None


def _argument(
    call: cst.Call, position: int | None, skip: int, keyword: str | None
) -> cst.BaseExpression | None:
    """The argument ``call`` passes the parameter at ``position`` (counting the ``skip``
    parameters it does not pass) or by ``keyword``; None if it passes none the source shows
    (after a ``*args``, or through ``**options``)."""
    index = 0
    for arg in call.args:
        if arg.star:
            if arg.star == "*":
                position = None  # what follows is not where it seems
            continue
        if arg.keyword is not None:
            if keyword is not None and arg.keyword.value == keyword:
                return arg.value
            continue
        if position is not None and index + skip == position:
            return arg.value
        index += 1
    return None


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
    return FIX_THROUGH_OTHER.format(value=_value(value, parameter))


def _value(value: cst.BaseExpression, parameter: str | None) -> str:
    """``value`` on one line (shortened past 40 characters), as the default of ``parameter``
    if one (``FIX_OF_PARAMETER``)."""
    code = " ".join(cst.Module([]).code_for_node(value).split())
    if len(code) > 40:
        code = code[:37] + "..."
    if parameter is not None:
        code = FIX_OF_PARAMETER.format(value=code, parameter=parameter)
    return code


def _short(filename: str, root: str) -> str:
    relative = os.path.relpath(filename, root)
    return filename if relative.startswith("..") else relative


class _Files:
    """Each file's ``Index``, parsed once (None: not one of the user's files under ``root``
    and under none of ``excluded``, not read, or not parsed); its top-level code as a function
    (``top``): what a store outside any function reads its names in; and its calls with their
    statements (``calls``)."""

    def __init__(self, root: str, excluded: Sequence[str]) -> None:
        self.root = os.path.join(os.path.realpath(root), "")
        self.excluded = tuple(os.path.join(os.path.realpath(d), "") for d in excluded)
        self._indexes: dict[str, Index | None] = {}
        self._tops: dict[str, cst.FunctionDef] = {}
        self._calls: dict[str, list[tuple[Statement, cst.Call]]] = {}

    def calls(self, filename: str) -> list[tuple[Statement, cst.Call]]:
        if filename not in self._calls:
            index = self.get(filename)
            self._calls[filename] = [
                (statement, call)
                for statement in (index.statements if index is not None else [])
                for call in m.findall(statement.node, m.Call())
                if isinstance(call, cst.Call)
            ]
        return self._calls[filename]

    def top(self, filename: str) -> cst.FunctionDef:
        if filename not in self._tops:
            index = self.get(filename)
            body = list(index.module.body) if index is not None else []
            block = cst.IndentedBlock(body or [cst.SimpleStatementLine([cst.Pass()])])
            self._tops[filename] = cst.FunctionDef(cst.Name("_"), cst.Parameters(), block)
        return self._tops[filename]

    def get(self, filename: str) -> Index | None:
        if filename not in self._indexes:
            path = os.path.realpath(filename)
            if not path.startswith(self.root) or path.startswith(self.excluded):
                self._indexes[filename] = None
                return None
            try:
                with open(filename, "rb") as file:
                    module = cst.parse_module(file.read())
                index: Index | None = Index(MetadataWrapper(module, unsafe_skip_copy=True))
            except (OSError, cst.ParserSyntaxError):
                index = None
            self._indexes[filename] = index
        return self._indexes[filename]
