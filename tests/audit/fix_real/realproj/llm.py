"""An LLM reference implementation: a complex rotary table, RMSNorm in float32, a kv-cache."""

import torch
from torch import nn


def rotary_table(head_dim, length, theta=10000.0):
    inv = 1.0 / theta ** (torch.arange(0, head_dim, 2).float() / head_dim)
    angles = torch.outer(torch.arange(length).float(), inv)
    return torch.polar(torch.ones_like(angles), angles)  # complex64


def rotate(x, table):
    pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    turned = pairs * table[: x.shape[1]].unsqueeze(0).unsqueeze(2)
    return torch.view_as_real(turned).flatten(3).type_as(x)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        x32 = x.float()
        return self.weight * (
            x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        ).type_as(x)


class Attention(nn.Module):
    def __init__(self, dim, heads, max_batch, max_len):
        super().__init__()
        self.heads = heads
        self.head_dim = dim // heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.cache_k = torch.zeros(max_batch, max_len, heads, self.head_dim)
        self.cache_v = torch.zeros(max_batch, max_len, heads, self.head_dim)

    def forward(self, x, start, table):
        b, n, _ = x.shape
        q = self.wq(x).view(b, n, self.heads, self.head_dim)
        k = self.wk(x).view(b, n, self.heads, self.head_dim)
        v = self.wv(x).view(b, n, self.heads, self.head_dim)
        q, k = rotate(q, table[start:]), rotate(k, table[start:])
        self.cache_k[:b, start : start + n] = k
        self.cache_v[:b, start : start + n] = v
        keys = self.cache_k[:b, : start + n].transpose(1, 2)
        values = self.cache_v[:b, : start + n].transpose(1, 2)
        scores = (q.transpose(1, 2) @ keys.transpose(2, 3)) / self.head_dim**0.5
        out = scores.float().softmax(-1).type_as(q) @ values
        return self.wo(out.transpose(1, 2).reshape(b, n, -1))


class Transformer(nn.Module):
    def __init__(self, vocab=32, dim=16, heads=2, layers=2, max_batch=2, max_len=8):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(
            Attention(dim, heads, max_batch, max_len) for _ in range(layers)
        )
        self.norm = RMSNorm(dim)
        self.out = nn.Linear(dim, vocab, bias=False)
        self.freqs = rotary_table(dim // heads, max_len * 2)

    def forward(self, tokens, start=0):
        h = self.embed(tokens)
        for layer in self.layers:
            h = h + layer(self.norm(h), start, self.freqs)
        return self.out(self.norm(h)).float()


def build():
    return Transformer().eval(), (torch.tensor([[1, 5, 7, 3, 2, 9]]),)
