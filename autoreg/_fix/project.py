"""The project's source the run did not load: subclasses in modules the factory never imports.

The buffer style registers a name in a class; a subclass that stores something else under it (a
float default) then raises. Loaded subclasses are read from their code (``collect``); a subclass
in a module nothing imported is found here, in the source of the ``.py`` files under the working
directory (the files ``fix`` may edit): a ``class`` statement naming one of the classes among its
bases, directly or through another such statement, whose methods store ``self.<name>``. Source
knows classes only by name, so a class of the same name elsewhere holds the name back too: that
lists a store ``fix`` could have rewritten, never the other way round.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Final

from .._messages.fix import (
    FIX_CLASS_LEVEL,
    FIX_HAND_INIT_SUBCLASS_BELOW,
    FIX_HAND_INIT_SUBCLASS_EDIT,
    FIX_HAND_MIXIN_SUBCLASS,
    FIX_HAND_MIXIN_SUBCLASS_EDIT,
    FIX_HAND_SETTER,
    FIX_HAND_SETTER_EDIT,
    FIX_SETTER_DESCRIPTOR,
    FIX_SETTER_SETATTR,
)
from .edits import HandEdit, MakeAutoreg
from .strays import Kind, Stray

if TYPE_CHECKING:
    from .plan import Plan

__all__ = [
    "ProjectSource",
    "function_stores",
    "mangle",
    "with_unloaded_subclasses",
    "without_refused_bases",
]

# Never read: virtual environments (a folder holding pyvenv.cfg), installed packages, caches.
_SKIPPED_DIRS: Final = frozenset(("__pycache__", "site-packages", "dist-packages", "node_modules"))


def with_unloaded_subclasses(
    strays: Iterable[Stray], root: str, excluded: Sequence[str]
) -> list[Stray]:
    """``strays``, each tensor attribute that no loaded subclass stores given the first class of
    the source under ``root`` (outside ``excluded``) that stores it (``Stray.subclass``), and
    each that a setter ``register_buffer`` would skip listed (``Stray.setter``: loaded; or a
    class statement of the source deriving from its classes that defines one for the name)."""
    source = ProjectSource(root, excluded)
    found = []
    for stray in strays:
        if stray.kind is Kind.TENSOR:
            names = [c.qualname.rpartition(".")[2] for c in stray.classes]
            skip = [(c.filename, c.lineno) for c in stray.classes if c.filename is not None]
            if not stray.subclass:
                subclass = source.subclass_storing(names, stray.attribute, skip)
                stray = dataclasses.replace(stray, subclass=subclass)
            if stray.hidden is None and not stray.answers:
                hidden = source.subclass_hiding(names, stray.attribute, skip)
                answers = source.subclass_getattr(names, skip)
                stray = dataclasses.replace(stray, hidden=hidden, answers=answers)
            setter = stray.setter or source.subclass_setter(names, stray.attribute, skip)
            if setter:
                text = {"setter": setter, "attribute": stray.attribute}
                stray = dataclasses.replace(
                    stray,
                    kind=Kind.HAND,
                    reason=FIX_HAND_SETTER.format(**text),
                    edit=FIX_HAND_SETTER_EDIT.format(**text),
                )
        found.append(stray)
    return found


def without_refused_bases(plan: Plan, root: str, excluded: Sequence[str]) -> None:
    """Base style: each class ``plan`` makes autoreg's that a class statement under ``root``
    deriving from it would then break (``ProjectSource.subclass_refusing``), listed instead, in
    ``plan.hand``, and left as it is. Loaded or not, a subclass is read from its source."""
    source = ProjectSource(root, excluded)
    for filename, edits in plan.edits.items():
        kept = []
        for edit in edits:
            found = None
            if isinstance(edit, MakeAutoreg):
                found = source.subclass_refusing(edit.cls.qualname.rpartition(".")[2], filename)
            if found is None:
                kept.append(edit)
                continue
            reason, fix = found
            name = edit.cls.short
            plan.list_hand(HandEdit(filename, edit.cls.lineno, name, reason, fix))
        plan.edits[filename] = kept


class ProjectSource:
    """The ``.py`` files under ``root`` and under none of ``excluded``, read once (as bytes: a
    file's coding line is Python's to read), parsed when a class name they mention is asked
    about."""

    def __init__(self, root: str, excluded: Sequence[str]) -> None:
        self.root = root
        self.excluded = tuple(os.path.join(os.path.abspath(d), "") for d in excluded)
        self._sources: dict[str, bytes] | None = None
        self._parsed: dict[str, _Parsed] = {}  # by file, once parsed

    def subclass_storing(
        self, classes: Sequence[str], attribute: str, skip: Sequence[tuple[str, int]]
    ) -> str:
        """The name of the first class statement under the root, none of ``skip`` (file, first
        line: the classes the run built), that derives from a class named in ``classes`` (through
        others of the project, or under another name it imports it as) and whose methods, or
        those of another of its bases in the project (a mixin), store ``self.<attribute>``;
        ``""`` if none."""
        for _, node, names, bases in self._derived(classes, skip):
            if _stores_self(node, attribute) or any(
                self._defining(base, set(names), lambda n: _stores_self(n, attribute)) is not None
                for base in bases - names
            ):
                return node.name
        return ""

    def subclass_setter(
        self, classes: Sequence[str], attribute: str, skip: Sequence[tuple[str, int]]
    ) -> str:
        """As ``subclass_storing``, for a class statement that defines a setter for
        ``attribute`` (``_setter_in``), in ``FIX_HAND_SETTER``'s words; ``""`` if none."""
        for _, node, names, bases in self._derived(classes, skip):
            if _setter_in(node, attribute):
                return _setter_in(node, attribute)
            for base in sorted(bases - names):
                mixin = self._defining(base, set(names), lambda n: bool(_setter_in(n, attribute)))
                if mixin is not None:
                    return _setter_in(mixin, attribute)
        return ""

    def subclass_hiding(
        self, classes: Sequence[str], attribute: str, skip: Sequence[tuple[str, int]]
    ) -> tuple[str, str] | None:
        """As ``subclass_storing``, for a class statement whose body defines ``attribute`` (a
        value, a method, a ``cached_property``; not a setter, ``_setter_in``'s), with how, in
        ``FIX_CLASS_LEVEL``'s words; None if none."""
        for _, node, _, _ in self._derived(classes, skip):
            what = _defined_in(node, attribute)
            if what and not _setter_in(node, attribute):
                return node.name, FIX_CLASS_LEVEL.format(what=what)
        return None

    def subclass_getattr(self, classes: Sequence[str], skip: Sequence[tuple[str, int]]) -> str:
        """As ``subclass_storing``, for a class statement that defines ``__getattr__``: its
        name; ``""`` if none."""
        for _, node, _, _ in self._derived(classes, skip):
            if _defined_in(node, "__getattr__"):
                return node.name
        return ""

    def subclass_refusing(self, cls: str, defining: str) -> tuple[str, str] | None:
        """Why a class statement under the root deriving from the class named ``cls`` of the file
        ``defining`` would break once that class is autoreg's, and the edit to make
        (``FIX_HAND_*`` words); None if none would: one that names autoreg's mixin (or
        ``autoreg.Module``) among its own bases (the mixin before ``cls``, an order Python
        refuses), or whose ``__init_subclass__`` calls no ``__init_subclass__`` (a registry's:
        autoreg's would not run for its own subclasses). In another file that has a class
        statement of that name of its own, the name is that class (``class Net(nn.Module)`` then
        ``class Net(autoreg.AutoRegisterMixin, Net)``, a class migrated in place there)."""
        defining = os.path.abspath(defining)
        for filename, node, _, bases in self._derived([cls], []):
            if (
                cls in bases
                and os.path.abspath(filename) != defining
                and any(
                    other is not node and other.name == cls
                    for other in self._parse(filename, self._read()[filename]).classes
                )
            ):
                continue
            text = {"cls": cls, "subclass": node.name}
            if "AutoRegisterMixin" in bases or any(
                ast.unparse(base) == "autoreg.Module" for base in node.bases
            ):
                return (
                    FIX_HAND_MIXIN_SUBCLASS.format(**text),
                    FIX_HAND_MIXIN_SUBCLASS_EDIT.format(**text),
                )
            if _hides_subclasses(node):
                return (
                    FIX_HAND_INIT_SUBCLASS_BELOW.format(**text),
                    FIX_HAND_INIT_SUBCLASS_EDIT.format(cls=node.name),
                )
        return None

    def _derived(
        self, classes: Sequence[str], skip: Sequence[tuple[str, int]]
    ) -> Iterator[tuple[str, ast.ClassDef, set[str], set[str]]]:
        """Each class statement under the root, none of ``skip`` (file, first line: the classes
        the run built), that derives from a class named in ``classes`` (through others of the
        project, or under another name it imports it as), with its file, the names of the
        classes known to derive from them so far and its bases' names."""
        names = set(classes)
        skipped = {(os.path.abspath(f), line) for f, line in skip}
        done: set[int] = set()
        grown = True
        while grown:
            grown = False
            for filename, node, aliases in self._statements(names):
                if id(node) in done or (filename, _first_line(node)) in skipped:
                    continue
                bases = set(_base_names(node, aliases))
                if not names.intersection(bases):
                    continue
                done.add(id(node))
                yield filename, node, names, bases
                if node.name not in names:  # a subclass of it may store it: read again
                    names.add(node.name)
                    grown = True

    def _defining(
        self, name: str, seen: set[str], test: Callable[[ast.ClassDef], bool]
    ) -> ast.ClassDef | None:
        """The class statement of the project named ``name`` (a mixin), or one of its own bases
        in the project, that passes ``test``; None if none."""
        if name in seen:
            return None
        seen.add(name)
        for _, node, aliases in self._statements({name}):
            if node.name != name:
                continue
            if test(node):
                return node
            for base in _base_names(node, aliases):
                found = self._defining(base, seen, test)
                if found is not None:
                    return found
        return None

    def _statements(self, names: set[str]) -> Iterator[tuple[str, ast.ClassDef, dict[str, str]]]:
        """Each class statement of the files that mention one of ``names``, with the names the
        file imports classes under (``from m import Base as Alias``)."""
        alternatives = b"|".join(re.escape(name.encode()) for name in sorted(names))
        pattern = re.compile(rb"\b(?:" + alternatives + rb")\b")
        for filename, source in self._read().items():
            if pattern.search(source) is None:
                continue
            parsed = self._parse(filename, source)
            for node in parsed.classes:
                yield filename, node, parsed.aliases

    def _read(self) -> dict[str, bytes]:
        if self._sources is None:
            self._sources = {}
            for filename in self._files():
                try:
                    with open(filename, "rb") as file:
                        source = file.read()
                except OSError:
                    continue
                if b"class " in source:
                    self._sources[filename] = source
        return self._sources

    def _files(self) -> Iterator[str]:
        for top, dirs, files in os.walk(os.path.abspath(self.root)):
            if os.path.exists(os.path.join(top, "pyvenv.cfg")) or os.path.join(top, "").startswith(
                self.excluded
            ):
                dirs[:] = []
                continue
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIPPED_DIRS)
            yield from (os.path.join(top, f) for f in sorted(files) if f.endswith(".py"))

    def _parse(self, filename: str, source: bytes) -> _Parsed:
        if filename not in self._parsed:
            try:
                tree = ast.parse(source, filename)
            except (SyntaxError, ValueError):
                tree = ast.Module(body=[], type_ignores=[])
            aliases = {
                alias.asname: alias.name
                for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom)
                for alias in node.names
                if alias.asname
            }
            for node in tree.body:  # Base = m.Scaled: a class under another name, assigned
                if (
                    isinstance(node, ast.Assign)
                    and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name)
                    and isinstance(node.value, (ast.Name, ast.Attribute))
                ):
                    value = node.value
                    name = value.id if isinstance(value, ast.Name) else value.attr
                    aliases[node.targets[0].id] = aliases.get(name, name)
            classes = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
            self._parsed[filename] = _Parsed(classes, aliases)
        return self._parsed[filename]


@dataclasses.dataclass(frozen=True)
class _Parsed:
    classes: list[ast.ClassDef]
    aliases: dict[str, str]  # the name a file imports or assigns a class under -> its own name


def _first_line(node: ast.ClassDef) -> int:
    """The first line of a class statement as ``inspect`` gives it (decorators included)."""
    return min([node.lineno, *(d.lineno for d in node.decorator_list)])


def _base_names(node: ast.ClassDef, aliases: dict[str, str]) -> Iterator[str]:
    """The last name of each base: ``PosEnc`` for ``PosEnc``, ``m.PosEnc``, and ``Alias`` where
    the file imports ``PosEnc as Alias`` or assigns ``Alias = m.PosEnc``."""
    for base in node.bases:
        if isinstance(base, ast.Name):
            yield aliases.get(base.id, base.id)
        elif isinstance(base, ast.Attribute):
            yield base.attr


def _stores_self(node: ast.ClassDef, attribute: str) -> bool:
    """Whether a method of the class statement stores ``<its first argument>.<attribute>``."""
    return any(
        function_stores(function, attribute, node.name)
        for function in node.body
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
    )


def _hides_subclasses(node: ast.ClassDef) -> bool:
    """Whether the class statement defines an ``__init_subclass__`` that calls no
    ``__init_subclass__`` (as ``changes._hides_subclasses`` asks of the class it edits)."""
    return any(
        isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef))
        and statement.name == "__init_subclass__"
        and not any(
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == "__init_subclass__"
            for call in ast.walk(statement)
        )
        for statement in node.body
    )


def _defined_in(node: ast.ClassDef, attribute: str) -> str:
    """What the body of the class statement binds ``attribute`` to: ``"function"`` for a
    ``def`` (its last decorator's name if decorated: ``cached_property``), ``"value"`` for an
    assignment; ``""`` if it does not."""
    for statement in node.body:
        if (
            isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef))
            and mangle(statement.name, node.name) == attribute
        ):
            decorators = [ast.unparse(d).rpartition(".")[2] for d in statement.decorator_list]
            return decorators[-1] if decorators else "function"
        targets: list[ast.expr] = []
        if isinstance(statement, ast.Assign):
            targets = statement.targets
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            targets = [statement.target]
        if any(isinstance(t, ast.Name) and mangle(t.id, node.name) == attribute for t in targets):
            return "value"
    return ""


def _setter_in(node: ast.ClassDef, attribute: str) -> str:
    """What the body of the class statement defines that runs on ``self.<attribute> = ...``:
    a ``__setattr__``, a property with a setter, or a class attribute of the name made by a
    call (``property(...)``, any descriptor), in ``FIX_HAND_SETTER``'s words; ``""`` if none."""
    for statement in node.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if statement.name == "__setattr__":
                return FIX_SETTER_SETATTR.format(owner=node.name)
            if mangle(statement.name, node.name) == attribute and any(
                isinstance(d, ast.Attribute) and d.attr == "setter"
                for d in statement.decorator_list
            ):
                what = "property"
                return FIX_SETTER_DESCRIPTOR.format(owner=node.name, attribute=attribute, what=what)
        targets: list[ast.expr] = []
        if isinstance(statement, ast.Assign):
            targets = statement.targets
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            targets = [statement.target]
        if (
            isinstance(statement, (ast.Assign, ast.AnnAssign))
            and isinstance(statement.value, ast.Call)
            and any(
                isinstance(t, ast.Name) and mangle(t.id, node.name) == attribute for t in targets
            )
        ):
            function = statement.value.func
            what = (
                "property"
                if isinstance(function, ast.Name) and function.id == "property"
                else "data descriptor"
            )
            return FIX_SETTER_DESCRIPTOR.format(owner=node.name, attribute=attribute, what=what)
    return ""


def mangle(name: str, owner: str) -> str:
    """The attribute ``name`` is when spelled ``self.<name>`` in the body of the class ``owner``:
    Python makes ``__x`` (not ``__x__``) ``_Owner__x``, the class name stripped of its leading
    underscores (a string, as ``setattr``'s, is never mangled)."""
    stripped = owner.lstrip("_")
    if name.startswith("__") and not name.endswith("__") and stripped:
        return f"_{stripped}{name}"
    return name


def _none_stores(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[int]:
    """The targets (by id) of ``x.name = None`` in ``function`` that no ``__init__`` call
    follows: a buffer takes None (nn.Module stores it in ``_buffers``), so such a store is no
    reason to hold a buffer back, unless a base's ``__init__`` runs after it and would find the
    attribute there (``register_buffer`` raises KeyError, "attribute ... already exists")."""
    inits = [
        node.lineno
        for node in ast.walk(function)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "__init__"
    ]
    return {
        id(node.targets[0])
        for node in ast.walk(function)
        if isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Attribute)
        and isinstance(node.value, ast.Constant)
        and node.value.value is None
        and not any(line > node.lineno for line in inits)
    }


def function_stores(
    function: ast.FunctionDef | ast.AsyncFunctionDef, attribute: str, owner: str
) -> bool:
    """Whether ``function``, a method of the class ``owner``, stores ``<its first argument>.
    <attribute>``: an assignment (plain, annotated, augmented, a ``for`` or ``with`` target; a
    private name as Python mangles it; not a None a buffer takes, ``_none_stores``), or
    ``setattr(self, name, ...)`` where ``name`` is ``attribute`` or no literal (it may be)."""
    arguments = [*function.args.posonlyargs, *function.args.args]
    if not arguments:
        return False
    first = arguments[0].arg
    harmless = _none_stores(function)
    for node in ast.walk(function):
        if (
            isinstance(node, ast.Attribute)
            and id(node) not in harmless
            and isinstance(node.ctx, ast.Store)
            and mangle(node.attr, owner) == attribute
            and isinstance(node.value, ast.Name)
            and node.value.id == first
        ):
            return True
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "setattr"
            and len(node.args) >= 2
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id == first
            and (not isinstance(node.args[1], ast.Constant) or node.args[1].value == attribute)
        ):
            return True
    return False
