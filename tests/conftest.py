"""Shared test set-up: every test starts without AUTOREG_MODE, whatever the shell exported."""

from __future__ import annotations

import pytest

from autoreg._config import ENV_VAR


@pytest.fixture(autouse=True)
def _no_autoreg_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
