"""The audit tests see reports as a 100-column terminal would, wherever they run; the command
line tests import their targets from a directory of their own."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _report_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")


@pytest.fixture
def importable(model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The test module's ``model_dir``, importable and the working directory."""
    monkeypatch.syspath_prepend(str(model_dir))
    monkeypatch.chdir(model_dir)
    return model_dir
