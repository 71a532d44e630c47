"""A Hamiltonian network: a permutation matrix from a method, torch.autograd.grad in forward."""

import torch
from torch import nn


class HNN(nn.Module):
    def __init__(self, dim, canonical=True):
        super().__init__()
        self.canonical = canonical
        self.net = nn.Sequential(nn.Linear(dim, 16), nn.Tanh(), nn.Linear(16, 1))
        self.M = self.permutation(dim)

    def permutation(self, n):
        if self.canonical:
            M = torch.eye(n)
            return torch.cat([M[n // 2 :], -M[: n // 2]])
        M = torch.ones(n, n)
        M *= 1 - torch.eye(n)
        return M

    def forward(self, x):
        with torch.enable_grad():
            x = x.detach().requires_grad_(True)
            energy = self.net(x).sum()
            (grad,) = torch.autograd.grad(energy, x, create_graph=self.training)
        return grad @ self.M.t()


class VectorField(nn.Module):
    """The field a training loop integrates: torch.autograd.grad on its inputs, no enable_grad."""

    def __init__(self, hnn):
        super().__init__()
        self.hnn = hnn
        self.D = torch.eye(hnn.M.shape[0])

    def forward(self, x):
        energy = self.hnn.net(x).sum()
        (grad,) = torch.autograd.grad(energy, x, create_graph=True)
        return grad @ self.hnn.M.t() + x @ self.D


def build():
    return HNN(4), (torch.rand(3, 4),)


def field():
    return VectorField(HNN(4)), (torch.rand(3, 4, requires_grad=True),)
