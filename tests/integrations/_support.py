"""Shared helpers for the framework tests in this folder.

Each file compares an autoreg module with its *twin*: the same framework class with its buffers
registered by hand (``register_buffer(..., persistent=False)``) and its runtime tensors as plain
attributes. Every file starts with ``pytest.importorskip`` so that a missing framework skips it.
"""

from __future__ import annotations

from torch import nn

from tests.support import moves


def carried(module: nn.Module, name: str) -> bool:
    """Whether ``.to()`` converts what ``module.name`` holds, a plain attribute."""
    return name in vars(module) and moves(module, name)
