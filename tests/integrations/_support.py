"""Shared helpers for the framework tests in this folder.

Each file compares an autoreg module with its *twin*: the same framework class with its buffers
registered by hand (``register_buffer(..., persistent=False)``) and its runtime tensors as plain
attributes. Every file starts with ``pytest.importorskip`` so that a missing framework skips it.
"""

from __future__ import annotations

import torch
from torch import nn

from tests.support import moves


def carried(module: nn.Module, name: str) -> bool:
    """Whether ``.to()`` converts what ``module.name`` holds, a plain attribute."""
    return name in vars(module) and moves(module, name)


def rotary_inv_freq(dim: int) -> torch.Tensor:
    """The inverse frequencies of rotary position embeddings: a derived, non-persistent buffer."""
    return 1.0 / 10_000 ** (torch.arange(0, dim, 2) / dim)
