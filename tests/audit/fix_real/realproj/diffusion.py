"""A class-conditional DDPM: the schedules registered, a one-hot context cast with
.type(torch.float), noise and timesteps made in forward for self.device."""

import torch
from torch import nn


def schedules(beta1, beta2, steps):
    beta_t = (beta2 - beta1) * torch.arange(0, steps + 1, dtype=torch.float32) / steps + beta1
    alphabar_t = torch.cumsum(torch.log(1 - beta_t), dim=0).exp()
    return {"sqrtab": alphabar_t.sqrt(), "sqrtmab": (1 - alphabar_t).sqrt()}


class ContextNet(nn.Module):
    def __init__(self, features=6, classes=3):
        super().__init__()
        self.classes = classes
        self.body = nn.Linear(features + classes + 1, features)

    def forward(self, x, c, t, context_mask):
        c = nn.functional.one_hot(c, num_classes=self.classes).type(torch.float)
        c = c * (1 - context_mask[:, None])
        return self.body(torch.cat([x, c, t[:, None]], 1))


class DDPM(nn.Module):
    def __init__(self, net, steps=10, device="cpu", drop_prob=0.1):
        super().__init__()
        self.net = net.to(device)
        for k, v in schedules(1e-4, 0.02, steps).items():
            self.register_buffer(k, v)
        self.steps = steps
        self.device = device
        self.drop_prob = drop_prob

    def forward(self, x, c):
        ts = torch.randint(1, self.steps + 1, (x.shape[0],)).to(self.device)
        noise = torch.randn_like(x)
        x_t = self.sqrtab[ts, None] * x + self.sqrtmab[ts, None] * noise
        context_mask = torch.bernoulli(torch.zeros_like(c) + self.drop_prob).to(self.device)
        return ((noise - self.net(x_t, c, ts / self.steps, context_mask)) ** 2).mean()


def build():
    return DDPM(ContextNet()), (torch.rand(4, 6), torch.tensor([0, 1, 2, 1]))
