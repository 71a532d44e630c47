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
from collections.abc import Iterable, Iterator, Sequence
from typing import Final

from .strays import Kind, Stray

__all__ = ["ProjectSource", "with_unloaded_subclasses"]

# Never read: virtual environments (a folder holding pyvenv.cfg), installed packages, caches.
_SKIPPED_DIRS: Final = frozenset(("__pycache__", "site-packages", "dist-packages", "node_modules"))


def with_unloaded_subclasses(
    strays: Iterable[Stray], root: str, excluded: Sequence[str]
) -> list[Stray]:
    """``strays``, each tensor attribute that no loaded subclass stores given the first class of
    the source under ``root`` (outside ``excluded``) that stores it (``Stray.subclass``)."""
    source = ProjectSource(root, excluded)
    found = []
    for stray in strays:
        if stray.kind is Kind.TENSOR and not stray.subclass:
            names = [c.qualname.rpartition(".")[2] for c in stray.classes]
            skip = [(c.filename, c.lineno) for c in stray.classes if c.filename is not None]
            subclass = source.subclass_storing(names, stray.attribute, skip)
            stray = dataclasses.replace(stray, subclass=subclass)
        found.append(stray)
    return found


class ProjectSource:
    """The ``.py`` files under ``root`` and under none of ``excluded``, read once, parsed when a
    class name they mention is asked about."""

    def __init__(self, root: str, excluded: Sequence[str]) -> None:
        self.root = root
        self.excluded = tuple(os.path.join(os.path.abspath(d), "") for d in excluded)
        self._texts: dict[str, str] | None = None
        self._classes: dict[str, list[ast.ClassDef]] = {}  # by file, once parsed

    def subclass_storing(
        self, classes: Sequence[str], attribute: str, skip: Sequence[tuple[str, int]]
    ) -> str:
        """The name of the first class statement under the root, none of ``skip`` (file, first
        line: the classes the run built), that derives from a class named in ``classes`` (through
        others of the project) and whose methods store ``self.<attribute>``; ``""`` if none."""
        names = set(classes)
        skipped = {(os.path.abspath(f), line) for f, line in skip}
        done: set[int] = set()
        grown = True
        while grown:
            grown = False
            for filename, node in self._statements(names):
                if id(node) in done or (filename, _first_line(node)) in skipped:
                    continue
                if not names.intersection(_base_names(node)):
                    continue
                done.add(id(node))
                if _stores_self(node, attribute):
                    return node.name
                if node.name not in names:  # a subclass of it may store it: read again
                    names.add(node.name)
                    grown = True
        return ""

    def _statements(self, names: set[str]) -> Iterator[tuple[str, ast.ClassDef]]:
        """Each class statement of the files whose text mentions one of ``names``."""
        alternatives = "|".join(map(re.escape, sorted(names)))
        pattern = re.compile(rf"\b(?:{alternatives})\b")
        for filename, text in self._read().items():
            if pattern.search(text) is None:
                continue
            for node in self._parsed(filename, text):
                yield filename, node

    def _read(self) -> dict[str, str]:
        if self._texts is None:
            self._texts = {}
            for filename in self._files():
                try:
                    with open(filename, encoding="utf-8") as file:
                        text = file.read()
                except (OSError, UnicodeDecodeError):
                    continue
                if "class " in text:
                    self._texts[filename] = text
        return self._texts

    def _files(self) -> Iterator[str]:
        for top, dirs, files in os.walk(os.path.abspath(self.root)):
            if os.path.exists(os.path.join(top, "pyvenv.cfg")) or os.path.join(top, "").startswith(
                self.excluded
            ):
                dirs[:] = []
                continue
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIPPED_DIRS)
            yield from (os.path.join(top, f) for f in sorted(files) if f.endswith(".py"))

    def _parsed(self, filename: str, text: str) -> list[ast.ClassDef]:
        if filename not in self._classes:
            try:
                tree = ast.parse(text, filename)
            except (SyntaxError, ValueError):
                tree = ast.Module(body=[], type_ignores=[])
            self._classes[filename] = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
        return self._classes[filename]


def _first_line(node: ast.ClassDef) -> int:
    """The first line of a class statement as ``inspect`` gives it (decorators included)."""
    return min([node.lineno, *(d.lineno for d in node.decorator_list)])


def _base_names(node: ast.ClassDef) -> Iterator[str]:
    """The last name of each base: ``PosEnc`` for ``PosEnc`` and for ``m.PosEnc``."""
    for base in node.bases:
        if isinstance(base, ast.Name):
            yield base.id
        elif isinstance(base, ast.Attribute):
            yield base.attr


def _stores_self(node: ast.ClassDef, attribute: str) -> bool:
    """Whether a method of the class statement stores ``<its first argument>.<attribute>``."""
    for function in node.body:
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        arguments = [*function.args.posonlyargs, *function.args.args]
        if not arguments:
            continue
        first = arguments[0].arg
        if any(
            isinstance(n, ast.Attribute)
            and isinstance(n.ctx, ast.Store)
            and n.attr == attribute
            and isinstance(n.value, ast.Name)
            and n.value.id == first
            for n in ast.walk(function)
        ):
            return True
    return False
