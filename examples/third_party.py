"""Stands for an installed library you cannot edit: it keeps a constant in a plain attribute."""

from __future__ import annotations

import torch
from torch import nn


class RotaryEmbedding(nn.Module):
    """Rotates pairs of features by position-dependent angles (rotary position embedding)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.inv_freq = 1.0 / 10000 ** (torch.arange(0, dim, 2) / dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(x.shape[-2], device=x.device, dtype=x.dtype)
        angles = torch.outer(positions, self.inv_freq)
        cos, sin = angles.cos(), angles.sin()
        even, odd = x[..., 0::2], x[..., 1::2]
        return torch.cat((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
