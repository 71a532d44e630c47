"""Shared helpers for the framework tests in this folder.

Each file compares an autoreg module with its *twin*: the same framework class with its buffers
registered by hand (``register_buffer(..., persistent=False)``) and its runtime tensors as plain
attributes. Every file starts with ``pytest.importorskip`` so that a missing framework skips it.
"""

from __future__ import annotations

from torch import nn

# The instance record autoreg keeps in ``__dict__``: {name: role} for the names it decided about.
OWNED = "_autoreg_owned"
CARRYING = frozenset({"carried", "container"})  # the roles whose tensors autoreg's _apply converts


def carried(module: nn.Module, name: str) -> bool:
    """Whether autoreg carries ``module.name`` (converts it in ``_apply``)."""
    return vars(module).get(OWNED, {}).get(name) in CARRYING
