"""The project's source the run did not load: subclasses in modules the factory never imports.

The buffer style registers a name in a class; a subclass that stores something else under it (a
float default) then raises. Loaded subclasses are read from their code (``collect``); a subclass
in a module nothing imported is found here, in the source of the ``.py`` files under the working
directory (the files ``fix`` may edit): a ``class`` statement (or a ``type(name, bases,
namespace)`` call) naming one of the classes among its bases, directly or through another such
statement, whose methods store ``self.<name>``. A base is read as Python would find it, through
the file's imports and assignments and those of the modules they name (``from pkg import
Layer``, where ``pkg/__init__.py`` has ``from .base import Scaled as Layer``), so a class of the
same name elsewhere is not the class; a name that cannot be followed (a module outside the
working directory, too long a chain) is known by its name alone, which lists a store ``fix``
could have rewritten, never the other way round.
"""

from __future__ import annotations

import ast
import copy
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
from .strays import Kind, Site, Stray

if TYPE_CHECKING:
    import libcst as cst

    from .plan import Plan

__all__ = [
    "ProjectSource",
    "classes_of",
    "function_stores",
    "mangle",
    "with_unloaded_subclasses",
    "without_refused_bases",
]

# Never read: virtual environments (a folder holding pyvenv.cfg), installed packages, caches.
_SKIPPED_DIRS: Final = frozenset(("__pycache__", "site-packages", "dist-packages", "node_modules"))


# A class of the project as a base names it: its file (a real path) and its name; the file None
# where the name could not be followed to one (known by its name alone: any class of that name).
_Class = tuple[str | None, str]

# How long a chain of imports and assignments is followed (a re-export of a re-export, ...).
_DEPTH: Final = 8


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
            classes = classes_of(stray)
            skip = [(c.filename, c.lineno) for c in stray.classes if c.filename is not None]
            if not stray.subclass:
                subclass = source.subclass_storing(
                    classes, stray.attribute, skip
                ) or source.subclass_overriding(classes, stray.attribute, stray.sites, skip)
                stray = dataclasses.replace(stray, subclass=subclass)
            if not stray.probed:
                probed = source.subclass_probing(classes, stray.attribute, skip)
                stray = dataclasses.replace(stray, probed=probed)
            if stray.hidden is None and not stray.answers:
                hidden = source.subclass_hiding(classes, stray.attribute, skip)
                answers = source.subclass_getattr(classes, skip)
                stray = dataclasses.replace(stray, hidden=hidden, answers=answers)
            setter = stray.setter or source.subclass_setter(classes, stray.attribute, skip)
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


def classes_of(stray: Stray) -> list[_Class]:
    """The classes of ``stray`` as the project's searches know a class: its file and name."""
    return [
        (os.path.realpath(c.filename) if c.filename else None, c.qualname.rpartition(".")[2])
        for c in stray.classes
    ]


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
    about, or when a base names one of their names (``from m import Scaled``)."""

    def __init__(self, root: str, excluded: Sequence[str]) -> None:
        self.root = root
        self.excluded = tuple(os.path.join(os.path.abspath(d), "") for d in excluded)
        self._sources: dict[str, bytes] | None = None  # by file (its real path)
        self._modules: dict[str, list[str]] = {}  # a dotted name a file may be imported by -> files
        self._parsed: dict[str, _Parsed] = {}  # by file, once parsed
        self._resolved: dict[int, list[_Class]] = {}  # a class statement's bases, by its id
        self._trees: dict[str, cst.Module] = {}  # by file, once asked about probes (LibCST)

    def subclass_storing(
        self, classes: Sequence[_Class], attribute: str, skip: Sequence[tuple[str, int]]
    ) -> str:
        """The name of the first class statement under the root, none of ``skip`` (file, first
        line: the classes the run built), that derives from one of ``classes`` (through others
        of the project, ``_derived``) and whose methods, or those of another of its bases in the
        project (a mixin), store ``self.<attribute>``; ``""`` if none."""
        for _, node, known, bases in self._derived(classes, skip):
            if _stores_self(node, attribute) or any(
                self._defining(base, set(known), lambda n: _stores_self(n, attribute)) is not None
                for base in bases
                if not _among(base, known)
            ):
                return node.name
        return ""

    def subclass_overriding(
        self,
        classes: Sequence[_Class],
        attribute: str,
        sites: Sequence[Site],
        skip: Sequence[tuple[str, int]],
    ) -> str:
        """As ``subclass_storing``, for a class statement that defines a method whose result a
        store of ``attribute`` at one of ``sites`` takes (``self.scale = self.make_scale(n)``:
        what the override returns, the run never saw), in another file than the store's (the
        codemod reads what an override in that file returns: ``changes._callees``); ``""`` if
        none."""
        called = self._called_by_stores(attribute, sites)
        files = {os.path.realpath(site.filename) for site in sites}
        for filename, node, _, _ in self._derived(classes, skip) if called else ():
            if filename not in files and any(_defined_in(node, name) for name in called):
                return node.name
        return ""

    def _called_by_stores(self, attribute: str, sites: Sequence[Site]) -> set[str]:
        """The methods the stores of ``<first argument>.<attribute>`` at ``sites``, in the
        methods of the class statements of the project, call on that argument
        (``self.make_scale(n)``)."""
        called: set[str] = set()
        for site in sites:
            filename = os.path.realpath(site.filename)
            if filename not in self._read():
                continue
            for cls in self._parse(filename).classes:
                for function in cls.body:
                    if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        called |= _called_by_store(function, cls.name, attribute, site.lineno)
        return called

    def subclass_setter(
        self, classes: Sequence[_Class], attribute: str, skip: Sequence[tuple[str, int]]
    ) -> str:
        """As ``subclass_storing``, for a class statement that defines a setter for
        ``attribute`` (``_setter_in``), in ``FIX_HAND_SETTER``'s words; ``""`` if none."""
        for _, node, known, bases in self._derived(classes, skip):
            if _setter_in(node, attribute):
                return _setter_in(node, attribute)
            for base in bases:
                if _among(base, known):
                    continue
                mixin = self._defining(base, set(known), lambda n: bool(_setter_in(n, attribute)))
                if mixin is not None:
                    return _setter_in(mixin, attribute)
        return ""

    def subclass_hiding(
        self, classes: Sequence[_Class], attribute: str, skip: Sequence[tuple[str, int]]
    ) -> tuple[str, str] | None:
        """As ``subclass_storing``, for a class statement whose body defines ``attribute`` (a
        value, a method, a ``cached_property``; not a setter, ``_setter_in``'s), with how, in
        ``FIX_CLASS_LEVEL``'s words; None if none."""
        for _, node, _, _ in self._derived(classes, skip):
            what = _defined_in(node, attribute)
            if what and not _setter_in(node, attribute):
                return node.name, FIX_CLASS_LEVEL.format(what=what)
        return None

    def subclass_getattr(self, classes: Sequence[_Class], skip: Sequence[tuple[str, int]]) -> str:
        """As ``subclass_storing``, for a class statement that defines ``__getattr__``: its
        name; ``""`` if none."""
        for _, node, _, _ in self._derived(classes, skip):
            if _defined_in(node, "__getattr__"):
                return node.name
        return ""

    def subclass_probing(
        self, classes: Sequence[_Class], attribute: str, skip: Sequence[tuple[str, int]]
    ) -> str:
        """As ``subclass_storing``, for a class statement that asks whether ``attribute`` exists
        (``source.probes``: ``hasattr(self, "last")``; of a class ``type()`` makes, anywhere in its
        file); ``""`` if none. (LibCST is imported here, as in ``codemod``: ``collect``, which
        imports this module, runs where it is not installed.)"""
        import libcst as cst
        import libcst.matchers as m

        from .source import probes

        for filename, node, _, _ in self._derived(classes, skip):
            if filename not in self._trees:
                try:
                    self._trees[filename] = cst.parse_module(self._read()[filename])
                except cst.ParserSyntaxError:
                    self._trees[filename] = cst.Module(body=[])
            tree = self._trees[filename]
            statements = m.findall(tree, m.ClassDef(name=m.Name(node.name)))
            if any(probes(statement, attribute) for statement in statements or [tree]):
                return node.name
        return ""

    def subclass_refusing(self, cls: str, defining: str) -> tuple[str, str] | None:
        """Why a class statement under the root deriving from the class named ``cls`` of the file
        ``defining`` would break once that class is autoreg's, and the edit to make
        (``FIX_HAND_*`` words); None if none would: one that names autoreg's mixin (or
        ``autoreg.Module``) among its own bases (the mixin before ``cls``, an order Python
        refuses), or whose ``__init_subclass__`` calls no ``__init_subclass__`` (a registry's:
        autoreg's would not run for its own subclasses). A class of that name another file
        defines, or imports from elsewhere, is not that class (``class Net(nn.Module)`` then
        ``class Net(autoreg.AutoRegisterMixin, Net)``, a class migrated in place there)."""
        for _, node, _, bases in self._derived([(os.path.realpath(defining), cls)], []):
            text = {"cls": cls, "subclass": node.name}
            if any(name == "AutoRegisterMixin" for _, name in bases) or any(
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

    def naming(
        self, classes: Sequence[_Class], words: Sequence[str] = ()
    ) -> list[tuple[str, bytes]]:
        """Each file under the root (its real path, its source) that names one of ``classes``, a
        class statement deriving from them or one of ``words`` (a function's name), class
        statements or not: code that may build one, or be handed one (``elsewhere``)."""
        names = {name for _, name in classes} | set(words)
        names |= {node.name for _, node, _, _ in self._derived(classes, [])}
        alternatives = b"|".join(re.escape(name.encode()) for name in sorted(names))
        pattern = re.compile(rb"\b(?:" + alternatives + rb")\b")
        return [(name, source) for name, source in self._read().items() if pattern.search(source)]

    def _derived(
        self, classes: Sequence[_Class], skip: Sequence[tuple[str, int]]
    ) -> Iterator[tuple[str, ast.ClassDef, set[_Class], list[_Class]]]:
        """Each class statement under the root, none of ``skip`` (file, first line: the classes
        the run built), that derives from one of ``classes``, directly or through others of the
        project, each base read as its file names it (``_named``), with its file, the classes
        known to derive from them so far and its bases."""
        known = set(classes)
        words = {name for _, name in known}  # what a file that may name one of them mentions
        skipped = {(os.path.realpath(f), line) for f, line in skip}
        done: set[int] = set()
        grown = True
        while grown:
            grown = False
            for filename in self._mentioning(words):
                parsed = self._parse(filename)
                for new, old in parsed.renames:  # `Scaled as Layer`: a file may say Layer
                    if old in words and new not in words:
                        words.add(new)
                        grown = True
                for node in parsed.classes:
                    if id(node) in done or (filename, _first_line(node)) in skipped:
                        continue
                    bases = self._bases(filename, node)
                    if not any(_among(base, known) for base in bases):
                        continue
                    done.add(id(node))
                    yield filename, node, known, bases
                    if (filename, node.name) not in known:  # a subclass of it may store it
                        known.add((filename, node.name))
                        words.add(node.name)
                        grown = True

    def _defining(
        self, cls: _Class, seen: set[_Class], test: Callable[[ast.ClassDef], bool]
    ) -> ast.ClassDef | None:
        """The class statement of the project that ``cls`` is (a mixin), or one of its own bases
        in the project, that passes ``test``; None if none."""
        if _among(cls, seen):
            return None
        seen.add(cls)
        file, name = cls
        files = [file] if file is not None else list(self._mentioning({name}))
        for filename in files:
            for node in self._parse(filename).classes:
                if node.name != name:
                    continue
                if test(node):
                    return node
                for base in self._bases(filename, node):
                    found = self._defining(base, seen, test)
                    if found is not None:
                        return found
        return None

    def _bases(self, filename: str, node: ast.ClassDef) -> list[_Class]:
        """The classes the bases of ``node``, a class statement of ``filename``, may be."""
        if id(node) not in self._resolved:
            found: dict[_Class, None] = {}
            for base in node.bases:
                found.update(dict.fromkeys(sorted(self._named(filename, base, 0), key=str)))
            self._resolved[id(node)] = list(found)
        return self._resolved[id(node)]

    def _named(self, filename: str, expr: ast.expr, depth: int) -> set[_Class]:
        """The classes ``expr`` in ``filename`` may be: ``Name`` as the file binds it
        (``_lookup``), ``module.Name`` as that module's file does; a name not followed to a file
        is known by its name alone (``m.PosEnc`` of a module outside the root: ``PosEnc``)."""
        if isinstance(expr, ast.Name):
            return self._lookup(filename, expr.id, depth)
        if isinstance(expr, ast.Attribute):
            found: set[_Class] = set()
            for module in self._module_of(filename, expr.value, depth):
                found |= self._lookup(module, expr.attr, depth + 1)
            return found or {(None, expr.attr)}
        return set()

    def _lookup(self, filename: str, name: str, depth: int) -> set[_Class]:
        """The classes ``name`` may be in ``filename``: a class statement of it of that name, or
        what the module it imports the name from (``from .m import Scaled as Layer``, ``from m
        import *``) or the name it assigns it from (``Layer = m.Scaled``) binds; ``(None,
        name)`` where that leads to no file of the project, or too far (a cycle)."""
        parsed = self._parse(filename)
        bindings = parsed.bindings.get(name)
        if depth > _DEPTH or (bindings is None and not parsed.stars):
            return {(None, name)}
        found: set[_Class] = set()
        if bindings is None:
            for level, module in parsed.stars:
                for file in self._module_files(filename, level, module):
                    found |= self._lookup(file, name, depth + 1)
        for binding in bindings or []:
            if isinstance(binding, str):
                found.add((filename, binding))
            elif isinstance(binding, _From):
                files = self._module_files(filename, binding.level, binding.module)
                for file in files:
                    found |= self._lookup(file, binding.name, depth + 1)
                if not files:
                    found.add((None, binding.name))
            elif isinstance(binding, ast.expr):
                found |= self._named(filename, binding, depth + 1)
        return found or {(None, name)}

    def _module_of(self, filename: str, expr: ast.expr, depth: int) -> list[str]:
        """The files of the project the module ``expr`` in ``filename`` may be (``import m``,
        ``import m as alias``, ``from pkg import m``, ``pkg.m``); none if it is no such module."""
        if depth > _DEPTH:
            return []
        if isinstance(expr, ast.Attribute):
            return [
                file
                for package in self._module_of(filename, expr.value, depth + 1)
                for file in self._submodule(package, expr.attr)
            ]
        if not isinstance(expr, ast.Name):
            return []
        found = []
        for binding in self._parse(filename).bindings.get(expr.id, []):
            if isinstance(binding, _Import):
                found += self._module_files(filename, 0, binding.module)
            elif isinstance(binding, _From):
                for file in self._module_files(filename, binding.level, binding.module):
                    found += self._submodule(file, binding.name) or self._module_of(
                        file, ast.Name(binding.name), depth + 1
                    )
        return found

    def _module_files(self, filename: str, level: int, module: str) -> list[str]:
        """The files of the project ``from <level dots><module> import ...`` in ``filename`` may
        read: an absolute name by the end of a file's path under the root (``pkg.base`` is
        ``pkg/base.py`` or ``pkg/base/__init__.py``, at any depth), a relative one from the
        file's folder."""
        sources = self._read()
        if not level:
            return self._modules.get(module, [])
        package = os.path.dirname(filename)
        for _ in range(level - 1):
            package = os.path.dirname(package)
        stem = os.path.join(package, *module.split(".")) if module else package
        candidates = [os.path.join(stem, "__init__.py")]
        if module:
            candidates.append(stem + ".py")
        return [file for file in candidates if file in sources]

    def _submodule(self, package: str, name: str) -> list[str]:
        """The files of the module ``name`` of the package whose ``__init__.py`` is
        ``package``."""
        if os.path.basename(package) != "__init__.py":
            return []
        stem = os.path.join(os.path.dirname(package), name)
        candidates = (stem + ".py", os.path.join(stem, "__init__.py"))
        return [file for file in candidates if file in self._read()]

    def _mentioning(self, words: set[str]) -> Iterator[str]:
        """Each file whose source mentions one of ``words``."""
        alternatives = b"|".join(re.escape(word.encode()) for word in sorted(words))
        pattern = re.compile(rb"\b(?:" + alternatives + rb")\b")
        for filename, source in self._read().items():
            if pattern.search(source) is not None:
                yield filename

    def _read(self) -> dict[str, bytes]:
        if self._sources is None:
            self._sources = {}
            root = os.path.abspath(self.root)
            for path in self._files():
                try:
                    with open(path, "rb") as file:
                        source = file.read()
                except OSError:
                    continue
                filename = os.path.realpath(path)
                self._sources[filename] = source
                parts = os.path.relpath(path, root)[: -len(".py")].split(os.sep)
                if parts[-1] == "__init__":
                    parts.pop()
                for start in range(len(parts)):
                    self._modules.setdefault(".".join(parts[start:]), []).append(filename)
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

    def _parse(self, filename: str) -> _Parsed:
        if filename not in self._parsed:
            try:
                tree = ast.parse(self._read()[filename], filename)
            except (SyntaxError, ValueError):
                tree = ast.Module(body=[], type_ignores=[])
            made = list(_made_by_type(tree))
            classes = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
            parsed = _Parsed([*classes, *(cls for cls, _ in made)])
            for cls in parsed.classes:
                parsed.bind(cls.name, cls.name)
            for cls, bound in made:  # Half = type("Half", (Scaled,), {...})
                if bound:
                    parsed.bind(bound, cls.name)
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    for alias in node.names:
                        bound = alias.asname or alias.name.partition(".")[0]
                        parsed.bind(bound, _Import(alias.name if alias.asname else bound))
                elif isinstance(node, ast.ImportFrom):
                    module = node.module or ""
                    for alias in node.names:
                        if alias.name == "*":
                            parsed.stars.append((node.level, module))
                            continue
                        parsed.bind(
                            alias.asname or alias.name, _From(node.level, module, alias.name)
                        )
                        if alias.asname:
                            parsed.renames.append((alias.asname, alias.name))
            for statement in tree.body:  # Base = m.Scaled: a class under another name, assigned
                if (
                    isinstance(statement, ast.Assign)
                    and len(statement.targets) == 1
                    and isinstance(statement.targets[0], ast.Name)
                    and isinstance(statement.value, (ast.Name, ast.Attribute))
                ):
                    value = statement.value
                    name = value.id if isinstance(value, ast.Name) else value.attr
                    parsed.bind(statement.targets[0].id, value)
                    parsed.renames.append((statement.targets[0].id, name))
            self._parsed[filename] = parsed
        return self._parsed[filename]


@dataclasses.dataclass(frozen=True)
class _Import:
    module: str  # `import pkg.m as alias`: pkg.m; `import pkg.m`: pkg, the name it binds


@dataclasses.dataclass(frozen=True)
class _From:
    level: int  # the dots of a relative import
    module: str
    name: str  # the name imported from it


@dataclasses.dataclass
class _Parsed:
    """A file's class statements and what it binds names to: a class statement of it (its
    name), an import, or the expression it assigns (``Base = m.Scaled``)."""

    classes: list[ast.ClassDef]
    bindings: dict[str, list[str | _Import | _From | ast.expr]] = dataclasses.field(
        default_factory=dict
    )
    stars: list[tuple[int, str]] = dataclasses.field(default_factory=list)  # from m import *
    renames: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # (Layer, Scaled)

    def bind(self, name: str, binding: str | _Import | _From | ast.expr) -> None:
        self.bindings.setdefault(name, []).append(binding)


def _among(cls: _Class, classes: Iterable[_Class]) -> bool:
    """Whether ``cls`` may be one of ``classes`` (a name not followed to its file may be any
    class of that name)."""
    file, name = cls
    return any(n == name and (file is None or f is None or f == file) for f, n in classes)


def _made_by_type(tree: ast.Module) -> Iterator[tuple[ast.ClassDef, str]]:
    """Each class a ``type(name, (bases, ...), namespace)`` call of the file makes, as the class
    statement that would make it (named by its literal name, else the call; the namespace's
    literal entries as its body, ``_namespace_body``), with the name an assignment binds it to
    (``""`` if none)."""
    functions = {
        node.name: node
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    assigned = {
        id(node.value): node.targets[0].id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
    }
    for call in ast.walk(tree):
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id == "type"
            and len(call.args) == 3
        ):
            continue
        name, bases, namespace = call.args
        if not isinstance(bases, (ast.Tuple, ast.List)):
            continue
        shown = f"type({ast.unparse(name)}, ...)"
        if isinstance(name, ast.Constant) and isinstance(name.value, str):
            shown = name.value
        made = ast.ClassDef(
            name=shown,
            bases=list(bases.elts),
            keywords=[],
            body=_namespace_body(namespace, functions),
            decorator_list=[],
            lineno=call.lineno,
            col_offset=call.col_offset,
        )
        yield made, assigned.get(id(call), "")


def _namespace_body(
    namespace: ast.expr, functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]
) -> list[ast.stmt]:
    """The body of the class statement a ``type()`` call with ``namespace`` stands for: for each
    entry of a literal dict, a function of the file it names (``"__init__": init``), the
    functions defined in one of the file it calls (``"__init__": make_init(0.5)``, a factory), a
    ``lambda``, or an assignment of the value; where the file does not show what runs (another
    value than a literal, a namespace that is no literal dict, ``**more``), a method that may
    store any name (``_unread``)."""
    if not isinstance(namespace, ast.Dict):
        return [_unread()]
    body: list[ast.stmt] = []
    for key, value in zip(namespace.keys, namespace.values, strict=True):
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            body.append(_unread())
            continue
        made: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
        if isinstance(value, ast.Lambda):
            lambda_ = ast.FunctionDef(
                name="<lambda>", args=value.args, body=[ast.Return(value.body)], decorator_list=[]
            )
            made = [lambda_]
        elif isinstance(value, ast.Name) and value.id in functions:
            made = [functions[value.id]]
        elif (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id in functions
        ):
            factory = functions[value.func.id]
            made = [
                node
                for node in ast.walk(factory)
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node is not factory
            ] or [_unread()]
        if made:
            for function in made:
                function = copy.copy(function)
                function.name = key.value
                body.append(function)
            continue
        body.append(ast.Assign(targets=[ast.Name(key.value, ast.Store())], value=value, lineno=0))
        if not isinstance(value, ast.Constant):
            body.append(_unread())
    return body


def _unread() -> ast.FunctionDef:
    """A method whose code the source does not show: ``setattr(self, name, value)`` of a name
    the source does not spell, which ``function_stores`` takes as a store of any name."""
    function = ast.parse("def _(self):\n    setattr(self, name, value)\n").body[0]
    assert isinstance(function, ast.FunctionDef)
    function.name = "<unread>"
    return function


def _first_line(node: ast.ClassDef) -> int:
    """The first line of a class statement as ``inspect`` gives it (decorators included)."""
    return min([node.lineno, *(d.lineno for d in node.decorator_list)])


def _stores_self(node: ast.ClassDef, attribute: str) -> bool:
    """Whether a method of the class statement stores ``<its first argument>.<attribute>``."""
    return any(
        function_stores(function, attribute, node.name)
        for function in node.body
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
    )


def _called_by_store(
    function: ast.FunctionDef | ast.AsyncFunctionDef, owner: str, attribute: str, lineno: int
) -> set[str]:
    """The methods a store of ``<first argument>.<attribute>`` on line ``lineno`` of
    ``function``, a method of the class ``owner``, calls on that argument in its value."""
    arguments = [*function.args.posonlyargs, *function.args.args]
    first = arguments[0].arg if arguments else None
    called: set[str] = set()
    for node in ast.walk(function):
        if not (
            isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign))
            and node.value is not None
            and node.lineno <= lineno <= (node.end_lineno or node.lineno)
        ):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if any(
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == first
            and mangle(target.attr, owner) == attribute
            for target in targets
        ):
            called.update(
                call.func.attr
                for call in ast.walk(node.value)
                if isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and isinstance(call.func.value, ast.Name)
                and call.func.value.id == first
            )
    return called


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


def _none_stores(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[int]:
    """The targets (by id) of ``x.name = None`` (annotated or not) in ``function`` that no
    ``__init__`` call follows: a buffer takes None (nn.Module stores it in ``_buffers``), so such
    a store is no reason to hold a buffer back, unless a base's ``__init__`` runs after it and
    would find the attribute there (``register_buffer`` raises KeyError, "attribute ... already
    exists")."""
    inits = [
        node.lineno
        for node in ast.walk(function)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "__init__"
    ]
    found = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        elif isinstance(node, ast.AnnAssign):  # x.name: torch.Tensor | None = None
            target = node.target
        else:
            continue
        if (
            isinstance(target, ast.Attribute)
            and isinstance(node.value, ast.Constant)
            and node.value.value is None
            and not any(line > node.lineno for line in inits)
        ):
            found.add(id(target))
    return found


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


def mangle(name: str, owner: str) -> str:
    """The attribute ``name`` is when spelled ``self.<name>`` in the body of the class ``owner``:
    Python makes ``__x`` (not ``__x__``) ``_Owner__x``, the class name stripped of its leading
    underscores (a string, as ``setattr``'s, is never mangled)."""
    stripped = owner.lstrip("_")
    if name.startswith("__") and not name.endswith("__") and stripped:
        return f"_{stripped}{name}"
    return name
