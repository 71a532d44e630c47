"""The package's layout, as the design page describes it: layered imports, every module listed.

The design page's module table lists ``autoreg``'s modules (a subpackage counts as one) from the
bottom of the import graph up. These tests read every import in the package, those under
``if TYPE_CHECKING:`` included, and check that each module imports only modules listed above it,
which also rules out cycles.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.docs.pages import DOCS, ROOT

PACKAGE = ROOT / "autoreg"
ROW = re.compile(r"^\| `(?P<unit>[\w.]+)` \|", re.MULTILINE)


def unit_of(module: str) -> str:
    """The unit of an absolute module name: ``autoreg._fix.plan`` -> ``_fix``, ``autoreg`` ->
    ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def is_module(module: str) -> bool:
    path = ROOT.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imports(path: Path) -> set[str]:
    """The absolute names of the ``autoreg`` modules the file at ``path`` imports."""
    package = ["autoreg", *path.relative_to(PACKAGE).parts[:-1]]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "autoreg")
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            if module.split(".")[0] != "autoreg":
                continue
            # from package import submodule: the submodule; from module import name: the module
            submodules = (
                {f"{module}.{a.name}" for a in node.names} if node.module is None else set()
            )
            found.update({m for m in submodules if is_module(m)} or {module})
    return found


def graph() -> dict[str, set[str]]:
    """Each unit of the package -> the other units it imports."""
    edges: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        unit = relative.parts[0] if len(relative.parts) > 1 else relative.stem
        edges.setdefault(unit, set()).update({unit_of(m) for m in imports(path)} - {unit})
    return edges


def table_order() -> list[str]:
    page = (DOCS / "design.md").read_text(encoding="utf-8")
    return ROW.findall(page[page.index("## Module layout") :])


def test_the_design_page_lists_every_module_once() -> None:
    listed = table_order()
    assert len(listed) == len(set(listed))
    assert sorted(listed) == sorted(graph()), "docs/design.md's module table is out of date"


def test_each_module_imports_only_modules_listed_above_it() -> None:
    order = {unit: position for position, unit in enumerate(table_order())}
    upward = sorted(
        f"{unit} imports {target}"
        for unit, targets in graph().items()
        for target in targets
        if order[target] >= order[unit]
    )
    assert upward == []


def test_the_import_reader_sees_each_shape_of_import() -> None:
    # the reader these checks rest on, on each shape of import the package uses
    edges = graph()
    assert "_record" in edges["_contract"]  # from ._record import ClassRecord
    assert "_forward_audit" in edges["_fix"]  # from .._forward_audit... in a subpackage
    assert "_audit_cli" in edges["_fix"]  # from .. import _audit_cli
    assert "__init__" in edges["_cli"]  # from . import __version__: a name, not a module
    assert "_errors" in edges["_forward_audit"]
    assert "_mixin" in edges["__init__"]
