"""The project's motivating ``Net``: which data needs ``.to(device)``?

Both halves of the answer are here. ``w3`` is a plain tensor attribute that ``.to()`` leaves
behind (``autoreg.find_unregistered`` finds it; ``autoreg.Module`` moves it). Branches 0 and 1 of
``forward`` make a tensor with ``torch.rand`` on the default device, which no registration can
move: fine on the CPU, an error on the GPU (``autoreg.audit_forward`` finds them). Branches 2 and
3 make the same tensors where the weights are, with ``.to(self.w1)``.

``python -m examples.net`` audits the four branches; ``python -m autoreg audit examples.net:example
--forward`` audits branch 0 from the command line.
"""

from __future__ import annotations

import torch
from torch import nn

import autoreg


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w1 = nn.Parameter(torch.rand(2, 3))
        self.w2 = nn.Parameter(torch.rand(2, 3))
        self.w3 = torch.rand(2, 3)

    def forward(self, branch: int) -> torch.Tensor:
        if branch == 0:
            x = torch.rand(2, 3)
            self.w1 = nn.Parameter(x + self.w1)
            return self.w1
        if branch == 1:
            y = torch.rand(3, 2)
            return self.w2 @ y
        if branch == 2:
            x = torch.rand(2, 3).to(self.w1)
            self.w1 = nn.Parameter(x + self.w1)
            return self.w1
        y = torch.rand(3, 2).to(self.w1)
        return self.w2 @ y


def example() -> tuple[Net, tuple[int]]:
    """The target of ``python -m autoreg audit examples.net:example --forward``: branch 0."""
    return Net(), (0,)


def main() -> None:
    for branch in range(4):
        findings = autoreg.audit_forward(Net(), branch)
        print(f"branch {branch}: {len(findings)} findings")
        for finding in findings:
            print(finding)


if __name__ == "__main__":
    main()
