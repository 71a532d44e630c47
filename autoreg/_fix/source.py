"""A file's syntax tree, indexed for the questions the codemod asks: which class has this
qualified name, which statement of it is at this line, what encloses that statement, how the file
spells ``torch.nn``.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterator, Sequence

import libcst as cst
import libcst.matchers as m
from libcst.metadata import MetadataWrapper, PositionProvider

from .project import mangle

__all__ = [
    "Index",
    "Statement",
    "assigns",
    "before_init",
    "dotted",
    "is_self_attribute",
    "probes",
    "self_name_of",
    "super_init",
]


@dataclasses.dataclass(frozen=True)
class Statement:
    """A line of simple statements (a line of its own, or the one-line suite of ``if c: a = b``,
    ``else: ...``, ``def f(self): ...``), its first and last line, and the nodes that enclose it
    (outermost first)."""

    node: cst.SimpleStatementLine | cst.SimpleStatementSuite
    start: int
    end: int
    ancestors: tuple[cst.CSTNode, ...]

    def function(self) -> cst.FunctionDef | None:
        """The innermost function the statement is in."""
        return next((n for n in reversed(self.ancestors) if isinstance(n, cst.FunctionDef)), None)

    def between(self, outer: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
        """The nodes between ``outer`` (excluded) and the statement."""
        return self.ancestors[self.ancestors.index(outer) + 1 :]

    def excludes(self, other: Statement) -> bool:
        """Whether the statement and ``other`` are in the two branches of one ``if`` (its body
        and its ``else``/``elif``): one never runs where the other does, in one pass."""
        mine, theirs = (*self.ancestors, self.node), (*other.ancestors, other.node)
        return any(
            isinstance(node, cst.If)
            and node.orelse is not None
            and (
                (node.body in mine and node.orelse in theirs)
                or (node.orelse in mine and node.body in theirs)
            )
            for node in self.ancestors
        )


class Index(cst.CSTVisitor):
    """Every class (by qualified name) and every line of simple statements of a module, the
    one-line suites (``if c: self.x = v``) included: a store there is a store."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, wrapper: MetadataWrapper) -> None:
        super().__init__()
        self.module = wrapper.module
        self.classes: dict[str, list[tuple[cst.ClassDef, int, int]]] = {}
        # Every class statement of the file by its own name, in order, and the module-level
        # functions by name: what a store's calls may run (changes._callees), read once a file.
        self.named: dict[str, list[cst.ClassDef]] = {}
        self.statements: list[Statement] = []
        self._stack: list[cst.CSTNode] = []
        wrapper.visit(self)
        self.functions = {
            n.name.value: n for n in self.module.body if isinstance(n, cst.FunctionDef)
        }

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.ClassDef):
            first = node.decorators[0] if node.decorators else node
            start = self.get_metadata(PositionProvider, first).start.line
            end = self.get_metadata(PositionProvider, node).end.line
            self.classes.setdefault(self._qualname(node), []).append((node, start, end))
            self.named.setdefault(node.name.value, []).append(node)
        elif isinstance(node, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            where = self.get_metadata(PositionProvider, node)
            self.statements.append(
                Statement(node, where.start.line, where.end.line, tuple(self._stack))
            )
        self._stack.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self._stack.pop()

    def _qualname(self, node: cst.ClassDef) -> str:
        parts = []
        for outer in self._stack:
            if isinstance(outer, cst.ClassDef):
                parts.append(outer.name.value)
            elif isinstance(outer, cst.FunctionDef):
                parts += [outer.name.value, "<locals>"]
        return ".".join([*parts, node.name.value])

    def find_class(self, qualname: str, lineno: int) -> cst.ClassDef | None:
        """The class ``qualname`` whose statement holds ``lineno`` (the only one, if only one)."""
        found = self.classes.get(qualname, [])
        if len(found) == 1:
            return found[0][0]
        return next((node for node, start, end in found if start <= lineno <= end), None)

    def statement(self, cls: cst.ClassDef | None, lineno: int) -> Statement | None:
        """The statement at ``lineno`` (inside ``cls`` if given): the one that starts there,
        else the innermost that spans it."""
        spanning = [
            s
            for s in self.statements
            if s.start <= lineno <= s.end and (cls is None or cls in s.ancestors)
        ]
        starting = [s for s in spanning if s.start == lineno]
        found = starting or spanning
        return found[-1] if found else None

    def body_statements(self, function: cst.FunctionDef) -> list[Statement]:
        """The statements directly in ``function``'s body, in order."""
        return [
            s
            for s in self.statements
            if len(s.ancestors) > 1
            and s.ancestors[-2] is function
            and s.ancestors[-1] is function.body
        ]

    def torch_names(self) -> frozenset[str]:
        """The names the module binds to ``torch`` at its top level."""
        names = set()
        for node in _top_imports(self.module):
            if isinstance(node, cst.Import):
                for alias in node.names:
                    if dotted(alias.name) == "torch" or (
                        dotted(alias.name).startswith("torch.") and alias.asname is None
                    ):
                        names.add(_bound(alias).partition(".")[0])
        return frozenset(names)

    def binds_elsewise(self, name: str) -> bool:
        """Whether the module binds ``name`` at its top level to anything but ``import name``
        (a function, a class, an assignment, another import): ``name.X`` is then that."""
        for statement in _top_statements(self.module.body):
            if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
                if statement.name.value == name:
                    return True
                continue
            for small in statement.body if isinstance(statement, cst.SimpleStatementLine) else ():
                if isinstance(small, (cst.Import, cst.ImportFrom)):
                    names = () if isinstance(small.names, cst.ImportStar) else small.names
                    plain = isinstance(small, cst.Import)
                    if any(
                        _bound(alias) == name and not (plain and dotted(alias.name) == name)
                        for alias in names
                    ):
                        return True
                elif isinstance(small, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
                    targets = (
                        [t.target for t in small.targets]
                        if isinstance(small, cst.Assign)
                        else [small.target]
                    )
                    if any(m.findall(t, m.Name(name)) for t in targets):
                        return True
        return False

    def binds_around(self, cls: cst.ClassDef, name: str) -> bool:
        """Whether a function around the statement of ``cls`` binds ``name`` (a parameter, an
        assignment, an import as, a loop or ``with`` target, a nested def): the class body
        reads ``name`` there."""
        outer = next(
            (s.ancestors[: s.ancestors.index(cls)] for s in self.statements if cls in s.ancestors),
            (),
        )
        target = m.Name(name)
        holds: m.MatchIfTrue[cst.BaseAssignTargetExpression] = m.MatchIfTrue(
            lambda node: bool(m.findall(node, target))  # in a tuple target too
        )
        for function in (node for node in outer if isinstance(node, cst.FunctionDef)):
            params = function.params
            every = [*params.posonly_params, *params.params, *params.kwonly_params]
            every += [p for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)]
            if any(param.name.value == name for param in every):
                return True
            if m.findall(
                function.body,
                m.AssignTarget(target=holds)
                | m.AnnAssign(target=target)
                | m.AugAssign(target=target)
                | m.For(target=holds)
                | m.AsName(name=target)
                | m.NamedExpr(target=target)
                | m.FunctionDef(name=target)
                | m.ClassDef(name=target),
            ):
                return True
        return False

    def torch_nn(self) -> tuple[str, bool]:
        """How the module spells ``torch.nn`` at its top level, and whether ``import torch``
        must be added for that spelling."""
        torch = None
        for node in _top_imports(self.module):
            if isinstance(node, cst.ImportFrom):
                if dotted(node.module) == "torch" and not isinstance(node.names, cst.ImportStar):
                    for alias in node.names:
                        if dotted(alias.name) == "nn":
                            return _bound(alias), False
                continue
            for alias in node.names:
                name = dotted(alias.name)
                if name == "torch.nn" and alias.asname is not None:
                    return _bound(alias), False
                if name in ("torch", "torch.nn") and torch is None:
                    torch = (_bound(alias) if name == "torch" else "torch") + ".nn"
        return (torch, False) if torch else ("torch.nn", True)


def is_self_attribute(node: cst.BaseExpression, self_name: str, attribute: str, owner: str) -> bool:
    """Whether ``node``, in the class ``owner``, is ``<self_name>.<attribute>`` (``self.__x`` is
    ``_Owner__x``: ``project.mangle``)."""
    return (
        isinstance(node, cst.Attribute)
        and m.matches(node.value, m.Name(self_name))
        and mangle(node.attr.value, owner) == attribute
    )


def super_init(statement: Statement, self_name: str) -> bool:
    """Whether ``statement`` calls ``super().__init__(...)``, ``super(C, self).__init__(...)``
    or ``Base.__init__(self, ...)``."""
    for small in statement.node.body:
        if not m.matches(small, m.Expr(m.Call(func=m.Attribute(attr=m.Name("__init__"))))):
            continue
        call = small.value  # type: ignore[attr-defined]
        owner = call.func.value
        if m.matches(owner, m.Call(func=m.Name("super"))):
            return True
        if call.args and m.matches(call.args[0].value, m.Name(self_name)):
            return True
    return False


def assigns(
    small: cst.BaseSmallStatement, self_name: str | None, attribute: str, owner: str
) -> bool:
    """Whether ``small``, in the class ``owner``, is ``self.attribute = value`` (annotated or
    not) with one target."""
    if self_name is None:
        return False
    if isinstance(small, cst.Assign):
        return len(small.targets) == 1 and is_self_attribute(
            small.targets[0].target, self_name, attribute, owner
        )
    if isinstance(small, cst.AnnAssign):
        return small.value is not None and is_self_attribute(
            small.target, self_name, attribute, owner
        )
    return False


def self_name_of(function: cst.FunctionDef) -> str | None:
    """The name of a method's first parameter (None for a static method or no parameter)."""
    static = any(m.matches(d.decorator, m.Name("staticmethod")) for d in function.decorators)
    params = function.params.posonly_params or function.params.params
    return None if static or not params else params[0].name.value


def before_init(
    index: Index, method: cst.FunctionDef, statement: Statement, self_name: str
) -> bool:
    """Whether ``statement`` in ``__init__`` comes before its ``super().__init__()`` call."""
    if method.name.value != "__init__":
        return False
    body = index.body_statements(method)
    calls = [s.start for s in body if super_init(s, self_name)]
    return bool(calls) and statement.start < calls[0]


def probes(cls: cst.CSTNode, attribute: str) -> bool:
    """Whether ``cls`` (a class statement; or a file) asks whether ``attribute`` exists:
    ``hasattr(x, "a")``, ``getattr(x, "a", default)``, through ``__dict__`` / ``vars()``, or by
    reading ``x.a`` in a ``try`` whose handler catches ``AttributeError`` or in ``with
    contextlib.suppress(...)`` that does; or may: ``hasattr(x, name)`` / ``getattr(x, name,
    default)`` of a name it computes (which fix cannot read)."""
    name = m.SimpleString(m.MatchIfTrue(lambda text: literal(text) == attribute))
    computed: m.MatchIfTrue[cst.BaseExpression] = m.MatchIfTrue(
        lambda node: not isinstance(node, (cst.SimpleString, cst.Integer, cst.Float))
    )
    asked = m.Arg(name) | m.Arg(computed)
    asks = m.Call(func=m.Name("hasattr"), args=[m.DoNotCare(), asked]) | m.Call(
        func=m.Name("getattr"), args=[m.DoNotCare(), asked, m.DoNotCare()]
    )
    through = m.Call(
        func=m.Attribute(value=m.Attribute(attr=m.Name("__dict__")) | m.Call(m.Name("vars"))),
        args=[m.Arg(name), m.ZeroOrMore()],
    ) | m.Comparison(
        left=name,
        comparisons=[m.ComparisonTarget(m.In(), m.Attribute(attr=m.Name("__dict__")))],
    )
    if m.findall(cls, asks | through):
        return True
    reads = m.Attribute(attr=m.Name(attribute))
    if any(  # with contextlib.suppress(AttributeError): self.h
        any(
            dotted(item.item.func).rpartition(".")[2] == "suppress"
            and any(_catches_attribute_error(arg.value) for arg in item.item.args)
            for item in node.items
            if isinstance(item.item, cst.Call)
        )
        and m.findall(node.body, reads)
        for node in m.findall(cls, m.With())
        if isinstance(node, cst.With)
    ):
        return True
    return any(  # try: self.h / except AttributeError (or anything that catches it)
        any(_catches_attribute_error(handler.type) for handler in node.handlers)
        and m.findall(node.body, reads)
        for node in m.findall(cls, m.Try())
        if isinstance(node, cst.Try)
    )


def _catches_attribute_error(caught: cst.BaseExpression | None) -> bool:
    """Whether an ``except`` clause catching ``caught`` (None: a bare ``except:``) catches an
    ``AttributeError``."""
    if caught is None:
        return True
    if isinstance(caught, cst.Tuple):
        return any(_catches_attribute_error(element.value) for element in caught.elements)
    return dotted(caught).rpartition(".")[2] in {"AttributeError", "Exception", "BaseException"}


def literal(text: str) -> object:
    """The value of a string literal's source text (None if it is not one)."""
    try:
        return ast.literal_eval(text)
    except (SyntaxError, ValueError):
        return None


def _top_statements(body: Sequence[cst.BaseStatement]) -> Iterator[cst.BaseStatement]:
    """The statements of a module's top level, into ``if``, ``try`` and ``with`` blocks (which
    bind names there too), never into functions or classes."""
    for statement in body:
        yield statement
        if isinstance(statement, (cst.If, cst.Try, cst.With, cst.For, cst.While)):
            blocks: list[cst.BaseSuite] = [statement.body]
            orelse = getattr(statement, "orelse", None)
            while orelse is not None:
                blocks.append(orelse.body)
                orelse = getattr(orelse, "orelse", None)
            for handler in getattr(statement, "handlers", ()):
                blocks.append(handler.body)
            final = getattr(statement, "finalbody", None)
            if final is not None:
                blocks.append(final.body)
            for block in blocks:
                if isinstance(block, cst.IndentedBlock):
                    yield from _top_statements(block.body)


def _top_imports(module: cst.Module) -> Iterator[cst.Import | cst.ImportFrom]:
    for statement in module.body:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)):
                    yield small


def dotted(node: cst.BaseExpression | None) -> str:
    """``a.b.c`` for a dotted name, '' for anything else."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{dotted(node.value)}.{node.attr.value}"
    return ""


def _bound(alias: cst.ImportAlias) -> str:
    """The name an import binds: its ``as`` name, else the imported name."""
    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
        return alias.asname.name.value
    return dotted(alias.name)
