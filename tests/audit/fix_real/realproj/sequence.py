"""PyTorch's time-sequence example: the LSTM states made in forward, in float64."""

import torch
from torch import nn


class Sequence(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm1 = nn.LSTMCell(1, 8)
        self.linear = nn.Linear(8, 1)

    def forward(self, input, future=0):
        outputs = []
        h_t = torch.zeros(input.size(0), 8, dtype=torch.double)
        c_t = torch.zeros(input.size(0), 8, dtype=torch.double)
        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            outputs.append(self.linear(h_t))
        return torch.cat(outputs, dim=1)


def build():
    return Sequence().double(), (torch.rand(2, 5, dtype=torch.double),)
