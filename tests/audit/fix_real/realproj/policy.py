"""Soft actor-critic policies: an action scale per branch, a hand-written to(), a Normal."""

import numpy as np
import torch
from torch import nn
from torch.distributions import Normal


class GaussianPolicy(nn.Module):
    def __init__(self, inputs, actions, low=None, high=None):
        super().__init__()
        self.body = nn.Linear(inputs, 8)
        self.mean = nn.Linear(8, actions)
        self.log_std = nn.Linear(8, actions)
        if low is None:
            self.action_scale = torch.tensor(1.0)
            self.action_bias = torch.tensor(0.0)
        else:
            self.action_scale = torch.FloatTensor((high - low) / 2.0)
            self.action_bias = torch.FloatTensor((high + low) / 2.0)

    def forward(self, state):
        x = torch.relu(self.body(state))
        mean, log_std = self.mean(x), self.log_std(x).clamp(-20, 2)
        normal = Normal(mean, log_std.exp())
        sample = torch.tanh(normal.rsample())
        action = sample * self.action_scale + self.action_bias
        return action, torch.tanh(mean) * self.action_scale + self.action_bias

    def to(self, device):
        self.action_scale = self.action_scale.to(device)
        self.action_bias = self.action_bias.to(device)
        return super().to(device)


class DeterministicPolicy(nn.Module):
    def __init__(self, inputs, actions, low=None, high=None):
        super().__init__()
        self.body = nn.Linear(inputs, actions)
        self.noise = torch.Tensor(actions)
        if low is None:
            self.action_scale = 1.0
            self.action_bias = 0.0
        else:
            self.action_scale = torch.FloatTensor((high - low) / 2.0)
            self.action_bias = torch.FloatTensor((high + low) / 2.0)

    def forward(self, state):
        return torch.tanh(self.body(state)) * self.action_scale + self.action_bias


def gaussian():
    return GaussianPolicy(3, 2, np.zeros(2), np.ones(2) * 2), (torch.ones(4, 3),)


def deterministic():
    return DeterministicPolicy(3, 2, np.zeros(2), np.ones(2) * 2), (torch.ones(4, 3),)
