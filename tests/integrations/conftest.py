"""Fixtures shared by the framework tests in this folder."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture
def quiet_transformers() -> Iterator[None]:
    """transformers without its progress bars (``from_pretrained`` draws one per load)."""
    import transformers  # only the transformers tests ask for this fixture

    transformers.utils.logging.disable_progress_bar()
    yield
    transformers.utils.logging.enable_progress_bar()
