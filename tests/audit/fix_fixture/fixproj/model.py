# ruff: noqa
# fmt: off
"""The model: every kind of stray autoreg fix meets, and the factories the tests name."""
import torch
import torch.nn

from fixproj.layers import CausalMask, Clean, ScaledLinear
from fixproj.rotary import Rotary


class Recurrent(torch.nn.Module):
    """Keeps its state between calls: first stored by forward."""

    def __init__(self, dim):
        super(Recurrent, self).__init__()
        self.cell = torch.nn.GRUCell(dim, dim)
        self.h = None   # no state until the first call

    def forward(self, x):
        if self.h is None or self.h.shape != x.shape:
            self.h = torch.zeros_like(x)
        self.h = self.cell(x, self.h).detach()
        return self.h


def make_head(dim):
    """A class defined in a function."""

    class Head(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bias_table = torch.linspace(-1.0, 1.0, dim)

        def forward(self, x):
            return x + self.bias_table

    return Head()


class Model(torch.nn.Module):
    offset = None   # a class-level default: this name cannot hold a buffer

    def __init__(self, dim=4):
        super().__init__()
        self.clean = Clean(dim)
        self.causal = CausalMask(dim)
        self.rotary = Rotary(dim)
        self.recurrent = Recurrent(dim)
        self.head = make_head(dim)
        self.blocks = [ScaledLinear(dim, dim) for _ in range(2)]  # a plain list of modules
        self.anchors = [torch.ones(dim), torch.zeros(dim)]  # a plain list of tensors
        for i, value in enumerate((0.5, 2.0)):
            setattr(self, f"freq_{i}", torch.tensor(value))  # names computed in a loop
        self.offset = torch.zeros(dim)
        self.temperature = torch.ones((), requires_grad=True)  # a weight? only its author knows

    def forward(self, x):
        x = self.causal(self.clean(x))
        x = self.rotary(x) + self.head(x)
        for block in self.blocks:
            x = block(x)
        x = x + self.anchors[0] - self.anchors[1] + self.offset
        x = x * self.freq_0 * self.freq_1 / self.temperature
        return self.recurrent(x)


def build():
    """The model as built."""
    return Model()


def clean():
    """A layer that keeps nothing behind."""
    return Clean(4)


def build_with_inputs():
    """The model and the inputs of one forward: autoreg fix audits the forward too."""
    return Model(), (torch.randn(2, 4),)


def build_after_a_step():
    """The model after one forward: its state is stored."""
    model = Model()
    model(torch.randn(2, 4))
    return model
