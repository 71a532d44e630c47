"""The model docs/fix.md runs autoreg fix on: a mask, a state, heads in a plain list, a weight."""

import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim: int, max_len: int = 16) -> None:
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.mask = torch.ones(max_len, max_len, dtype=torch.bool).tril()  # causal

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        n = x.shape[-2]
        scores = (q @ k.T).masked_fill(~self.mask[:n, :n], float("-inf"))
        return scores.softmax(dim=-1) @ v


class Recurrent(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.cell = nn.GRUCell(dim, dim)
        self.h = None  # the state forward keeps between calls

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.h is None:
            self.h = torch.zeros_like(x)
        self.h = self.cell(x, self.h).detach()
        return self.h


class Model(nn.Module):
    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.attn = Attention(dim)
        self.rnn = Recurrent(dim)
        self.heads = [nn.Linear(dim, 2) for _ in range(2)]
        self.temperature = torch.ones((), requires_grad=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.rnn(self.attn(x))
        return torch.cat([head(x) for head in self.heads], dim=-1) / self.temperature


def build() -> tuple[Model, tuple[torch.Tensor]]:
    """The model and the inputs of one forward: autoreg fix audits the forward too."""
    return Model(), (torch.randn(4, 8),)
