"""A NeRF positional embedding: the frequency bands depend on a flag."""

import torch
from torch import nn


class Embedding(nn.Module):
    def __init__(self, channels, n_freqs, logscale=True):
        super().__init__()
        self.channels = channels
        self.funcs = [torch.sin, torch.cos]
        if logscale:
            self.freq_bands = 2 ** torch.linspace(0, n_freqs - 1, n_freqs)
        else:
            self.freq_bands = torch.linspace(1, 2 ** (n_freqs - 1), n_freqs)

    def forward(self, x):
        out = [x]
        for freq in self.freq_bands:
            for func in self.funcs:
                out.append(func(freq * x))
        return torch.cat(out, -1)


class Field(nn.Module):
    def __init__(self, logscale=True):
        super().__init__()
        self.embed = Embedding(3, 4, logscale)
        self.mlp = nn.Sequential(nn.Linear(27, 16), nn.ReLU(), nn.Linear(16, 4))

    def forward(self, x):
        return self.mlp(self.embed(x))


def build():
    return Field(logscale=False), (torch.rand(5, 3),)
