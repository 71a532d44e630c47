"""Before: a model written with nn.Module, as research code often is (docs/migrating.md).

``python -m examples.legacy_model`` moves it to float64 - on a machine without a GPU, the stand-in
for ``.cuda()`` - and runs it: a tensor left behind makes the forward pass fail.
"""

from __future__ import annotations

import torch
from torch import nn

from examples.third_party import RotaryEmbedding


class Attention(nn.Module):
    def __init__(self, dim: int, max_len: int) -> None:
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.rotary = RotaryEmbedding(dim)
        self.mask = torch.ones(max_len, max_len, dtype=torch.bool).tril()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k = self.rotary(q), self.rotary(k)
        n = x.shape[-2]
        scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
        scores = scores.masked_fill(~self.mask[:n, :n], float("-inf"))
        return scores.softmax(dim=-1) @ v


class Block(nn.Module):
    def __init__(self, dim: int, max_len: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.attn = Attention(dim, max_len)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.attn(self.norm(x))


class Head(nn.Module):
    """Scores the pooled features against fixed class prototypes, at a learned temperature."""

    def __init__(self, dim: int, classes: int) -> None:
        super().__init__()
        self.prototypes = [torch.randn(dim) for _ in range(classes)]
        self.temperature = torch.ones((), requires_grad=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ torch.stack(self.prototypes).T / self.temperature


class Classifier(nn.Module):
    def __init__(self, dim: int = 8, max_len: int = 16, depth: int = 2, classes: int = 3) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(dim, max_len) for _ in range(depth))
        self.head = Head(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(x.mean(dim=-2))


def build() -> Classifier:
    torch.manual_seed(0)
    return Classifier()


if __name__ == "__main__":
    model = build().to(torch.float64)
    print(model(torch.randn(2, 5, 8, dtype=torch.float64)).shape)
