"""A neural-ODE block: the integration times kept in a plain tensor, cast in forward."""

import torch
from torch import nn


def odeint(func, y0, t, steps=4):
    """Fixed-step RK4 from t[0] to t[-1] (a stand-in for an ODE solver library)."""
    counts = torch.cat([t, t.new_tensor([])]).unique(return_counts=True)[1]
    if (counts > 1).any():  # as adaptive solvers check their step times
        raise ValueError("repeated times")
    h = (t[-1] - t[0]) / steps
    y, s = y0, t[0]
    for _ in range(steps):
        k1 = func(s, y)
        k2 = func(s + h / 2, y + h * k1 / 2)
        k3 = func(s + h / 2, y + h * k2 / 2)
        k4 = func(s + h, y + h * k3)
        y, s = y + h * (k1 + 2 * k2 + 2 * k3 + k4) / 6, s + h
    return torch.stack([y0, y])


class ODEFunc(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, 8), nn.Tanh(), nn.Linear(8, dim))
        self.nfe = 0

    def forward(self, t, x):
        self.nfe += 1
        return self.net(x)


class ODEBlock(nn.Module):
    def __init__(self, func):
        super().__init__()
        self.func = func
        self.integration_time = torch.tensor([0, 1]).float()

    def forward(self, x):
        self.integration_time = self.integration_time.type_as(x)
        return odeint(self.func, x, self.integration_time)[1]


def build():
    return ODEBlock(ODEFunc(3)), (torch.rand(2, 3),)
