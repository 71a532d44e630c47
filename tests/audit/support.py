"""Helpers shared by the audit tests: source lines, and the command line run as users run it."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def line_of(obj: Any, text: str) -> int:
    """The number of the first line of ``obj``'s source (a class, function or module) that
    contains ``text``."""
    lines, start = inspect.getsourcelines(obj)
    return max(start, 1) + next(n for n, line in enumerate(lines) if text in line)


def modules_in(factory: pytest.TempPathFactory, sources: dict[str, str]) -> Iterator[Path]:
    """A fresh directory holding the modules ``sources`` names (name -> source); they are
    forgotten by ``sys.modules`` after the tests that import them."""
    directory = factory.mktemp("targets")
    for name, source in sources.items():
        (directory / f"{name}.py").write_text(source)
    yield directory
    for name in sources:
        sys.modules.pop(name, None)


def environment(**extra: str) -> dict[str, str]:
    """This process's environment without ``AUTOREG_MODE``, with the checkout importable."""
    env = {key: value for key, value in os.environ.items() if key != "AUTOREG_MODE"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return {**env, **extra}


def run_cli(directory: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m autoreg *args`` in a fresh process, run from ``directory``."""
    return subprocess.run(
        [sys.executable, "-m", "autoreg", *args],
        cwd=directory,
        env=environment(**env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
