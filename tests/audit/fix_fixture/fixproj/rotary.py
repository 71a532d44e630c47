# ruff: noqa
# fmt: off
"""Rotary tables computed by a helper function outside the class."""
import torch
from torch.nn import Module


def init_tables(module, dim, base=10000.0):
    """Stores the tables on ``module``: the class never assigns them itself."""
    module.inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))


class Rotary(Module):
    def __init__(self, dim):
        super().__init__()
        init_tables(self, dim)

    def forward(self, x):
        return x * torch.cos(self.inv_freq).sum()
