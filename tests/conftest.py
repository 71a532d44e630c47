"""Shared test set-up: every test starts without AUTOREG_MODE, whatever the shell exported.

``pytest`` (the README's command) skips the tests marked ``slow`` (each takes seconds: subprocesses,
builds, distributed, compile, benchmarks), so that it stays within a few minutes on 2 cores as the
suite grows; ``AUTOREG_TEST_SLOW=1`` runs them, and every nox session sets it (CI runs the whole
suite with the same command). A ``-m`` expression that names ``slow`` decides for itself
(``pytest -m slow`` runs only them). The header of a run says which it was.

The suite runs on every torch from 2.5 on (``nox -t matrix``). A test that checks behaviour torch
itself changed says so: an expected value that depends on the version compares
``torch.__version__`` (a ``TorchVersion``: ``torch.__version__ >= "2.14"``, the local part ``+cpu``
does not count); ``@pytest.mark.requires_torch("2.9", reason=...)`` marks a test of something older
torch lacks, and skips it there with the reason (CI's default torch, 2.13, skips none).

Each file of tests/integrations skips (``pytest.importorskip``) when its framework cannot be
imported; ``AUTOREG_REQUIRE_INTEGRATIONS=1`` (set by the default nox session, which CI runs) makes
a framework of the ``integrations`` extra that is not installed an error instead. timm has an extra
of its own (``timm``: it needs a torchvision built for the installed torch, and the registry has
none for the CPU build of torch 2.13), so its tests skip where it is not installed, even in CI.
"""

from __future__ import annotations

import importlib.util
import os

import pytest
import torch

from autoreg._config import ENV_VAR

INTEGRATIONS = (  # the `integrations` extra of pyproject.toml
    "lightning",
    "transformers",
    "accelerate",
    "torchmetrics",
    "onnx",
    "onnxscript",
    "onnxruntime",
    "pyro",  # pyro-ppl
    "cloudpickle",
)
REQUIRE_INTEGRATIONS = "AUTOREG_REQUIRE_INTEGRATIONS"
SLOW = "AUTOREG_TEST_SLOW"


def _runs_slow(config: pytest.Config) -> bool:
    return os.environ.get(SLOW) == "1" or "slow" in (config.option.markexpr or "")


def pytest_report_header(config: pytest.Config) -> str:
    if os.environ.get(SLOW) == "1":
        return f"slow tests: run ({SLOW}=1)"
    if _runs_slow(config):
        return "slow tests: as -m selects them"
    return f"slow tests: skipped ({SLOW}=1 runs them, as CI does)"


def pytest_sessionstart(session: pytest.Session) -> None:
    missing = [name for name in INTEGRATIONS if importlib.util.find_spec(name) is None]
    if missing and os.environ.get(REQUIRE_INTEGRATIONS) == "1":
        raise pytest.UsageError(
            f"{REQUIRE_INTEGRATIONS}=1 but {', '.join(missing)} cannot be imported, so "
            "tests/integrations would skip them: pip install -e '.[test,integrations]'"
        )


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("slow") is not None and not _runs_slow(item.config):
        pytest.skip(f"slow: {SLOW}=1 runs it (CI does)")
    for mark in item.iter_markers("requires_torch"):
        (minimum,) = mark.args
        if torch.__version__ < minimum:
            reason = mark.kwargs["reason"]
            pytest.skip(f"needs torch >= {minimum}, this is {torch.__version__}: {reason}")


@pytest.fixture(autouse=True)
def _no_autoreg_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
