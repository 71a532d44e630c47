"""Shared test set-up: every test starts without AUTOREG_MODE, whatever the shell exported.

The suite runs on every torch from 2.5 on (``nox -t matrix``). A test that checks behaviour torch
itself changed says so: an expected value that depends on the version compares
``torch.__version__`` (a ``TorchVersion``: ``torch.__version__ >= "2.14"``, the local part ``+cpu``
does not count); ``@pytest.mark.requires_torch("2.9", reason=...)`` marks a test of something older
torch lacks, and skips it there with the reason (CI's default torch, 2.13, skips none).

tests/integrations needs the ``integrations`` extra (lightning, transformers, ...): without it the
directory is not collected and the summary says why; ``AUTOREG_REQUIRE_INTEGRATIONS=1`` (set by the
default nox session) makes a missing package an error instead.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
import torch

from autoreg._config import ENV_VAR

INTEGRATIONS_DIR = Path(__file__).parent / "integrations"
INTEGRATIONS = (
    "lightning",
    "transformers",
    "accelerate",
    "torchmetrics",
    "timm",
    "onnx",
    "onnxscript",
    "onnxruntime",
)
REQUIRE_INTEGRATIONS = "AUTOREG_REQUIRE_INTEGRATIONS"


def _missing_integrations() -> list[str]:
    return [name for name in INTEGRATIONS if importlib.util.find_spec(name) is None]


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if collection_path != INTEGRATIONS_DIR:
        return None
    missing = _missing_integrations()
    if not missing:
        return None
    if os.environ.get(REQUIRE_INTEGRATIONS) == "1":
        raise pytest.UsageError(
            f"{REQUIRE_INTEGRATIONS}=1 but {', '.join(missing)} cannot be imported: "
            "pip install -e '.[test,integrations]'"
        )
    config.stash[_SKIPPED_INTEGRATIONS] = missing
    return True


_SKIPPED_INTEGRATIONS = pytest.StashKey[list[str]]()


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    missing = config.stash.get(_SKIPPED_INTEGRATIONS, None)
    if missing:
        terminalreporter.write_line(
            f"SKIPPED tests/integrations (not collected): {', '.join(missing)} not installed; "
            "pip install -e '.[test,integrations]' to run them",
            yellow=True,
        )


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("requires_torch"):
        (minimum,) = mark.args
        if torch.__version__ < minimum:
            reason = mark.kwargs["reason"]
            pytest.skip(f"needs torch >= {minimum}, this is {torch.__version__}: {reason}")


@pytest.fixture(autouse=True)
def _no_autoreg_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
