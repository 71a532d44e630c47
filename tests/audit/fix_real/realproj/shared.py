"""One causal mask made once and handed to the attention of every block, and to a head of
another class: .to() leaves each reference, so each class holding one is rewritten."""

import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim, mask):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.mask = mask

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = (q @ k.transpose(-2, -1)).masked_fill(self.mask, float("-inf"))
        return scores.softmax(-1) @ v


class Head(nn.Module):
    def __init__(self, dim, mask):
        super().__init__()
        self.out = nn.Linear(dim, dim)
        self.mask = mask

    def forward(self, x):
        keep = (~self.mask).to(x.dtype).mean(-1, keepdim=True)
        return self.out(x * keep)


class Decoder(nn.Module):
    def __init__(self, dim=8, length=5, depth=2):
        super().__init__()
        mask = torch.ones(length, length, dtype=torch.bool).triu(1)
        self.blocks = nn.ModuleList(Attention(dim, mask) for _ in range(depth))
        self.head = Head(dim, mask)

    def forward(self, x):
        for block in self.blocks:
            x = x + block(x)
        return self.head(x)


def build():
    return Decoder(), (torch.randn(2, 5, 8),)
