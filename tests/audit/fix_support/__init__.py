"""Helpers for the tests of ``autoreg fix``: a small project written to a temporary directory,
and ``autoreg fix`` run on it in this process, on freshly imported code."""

from __future__ import annotations

import importlib
import sys
import textwrap
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoreg._cli import main


class Project:
    """A package ``name`` in ``root`` (the working directory while a test runs), whose modules
    the tests write and ``autoreg fix`` rewrites."""

    def __init__(self, root: Path, name: str) -> None:
        self.root = root
        self.name = name
        (root / name).mkdir(parents=True)
        (root / name / "__init__.py").write_text("")

    def write(self, module: str, source: str) -> Path:
        path = self.root / self.name / f"{module}.py"
        path.write_text(textwrap.dedent(source))
        return path

    def read(self, module: str) -> str:
        return (self.root / self.name / f"{module}.py").read_text()

    def forget(self) -> None:
        for name in [n for n in sys.modules if n == self.name or n.startswith(self.name + ".")]:
            del sys.modules[name]

    def load(self, module: str = "m") -> types.ModuleType:
        """``module`` imported afresh: the source as it is on disk now (after a ``--write``)."""
        self.forget()
        return importlib.import_module(f"{self.name}.{module}")

    def run(self, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
        """``autoreg *argv`` in this process, on freshly imported code: status, out, err."""
        capsys.readouterr()
        self.forget()
        try:
            status = main(list(argv))
        finally:
            self.forget()
        out, err = capsys.readouterr()
        return status, out, err

    def fix(self, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
        """``autoreg fix *args``: status, out, err."""
        return self.run(capsys, "fix", *args)


@pytest.fixture
def project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[Project]:
    """An empty package, named after the test, in the working directory."""
    name = "p_" + "".join(c if c.isalnum() else "_" for c in request.node.name)[:60]
    made = Project(tmp_path / "project", name)
    monkeypatch.chdir(made.root)
    monkeypatch.syspath_prepend(str(made.root))
    yield made
    made.forget()
