# ruff: noqa
# fmt: off
"""Layers: one that registers what it keeps, two that do not."""
import torch
from torch import nn


class Clean(nn.Module):
    """Registers its buffer: no finding, so never touched."""

    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.register_buffer("scale", torch.ones(dim), persistent=False)

    def forward(self, x):
        return self.proj(x) * self.scale


class CausalMask( nn.Module ):   # keeps its mask in a plain attribute
    def __init__(self, size: int) -> None:
        super().__init__()
        # position i sees positions <= i
        self.mask = torch.tril(torch.ones(size, size,
                                          dtype=torch.bool))  # odd, but kept
        self.size = size

    def forward(self, x):
        return x @ self.mask.to(x.dtype)


class ScaledLinear(nn.Linear):
    """An nn.Linear whose gain is set by a method that __init__ calls."""

    def __init__(self, n_in, n_out):
        super().__init__(n_in, n_out)
        self._reset_gain()

    def _reset_gain(self):
        self.gain = torch.full(
            (self.out_features,),
            0.5,
        )

    def forward(self, x):
        return super().forward(x) * self.gain
