"""``audit_forward`` reports every creation site that reaches a device or dtype mix, in one run.

A tensor computed from several strays carries all of their sites: in
``x + self.noise_std * torch.randn(x.shape)`` the plain attribute and the ``randn`` are two
findings of one line, not one that hides the other until it is fixed.
"""

from __future__ import annotations

import torch
from torch import nn

import autoreg
from tests.audit.support import line_of

DIM = 4


class Noisy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(DIM, DIM)
        self.noise_std = torch.full((DIM,), 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x + self.noise_std * torch.randn(x.shape))


class TwoFactories(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * (torch.zeros(x.shape) + torch.ones(x.shape))


def test_the_plain_attribute_and_the_randn_of_one_line_are_two_findings() -> None:
    findings = autoreg.audit_forward(Noisy(), torch.ones(2, DIM))
    line = line_of(Noisy, "return self.linear(x + self.noise_std")
    assert [(f.kind, f.lineno, f.entered) for f in findings] == [
        ("device", line, True),
        ("device", line, False),
        ("dtype", line, True),
        ("dtype", line, False),
    ]
    attribute, randn = findings[0], findings[1]
    assert attribute.fix.startswith("noise_std is a plain attribute .to() leaves behind: ")
    assert findings[2].fix == attribute.fix  # its dtype row: the same fix, not "dtype=x.dtype"
    assert randn.fix == "device=x.device, dtype=x.dtype (or torch.randn_like(x) for x's shape)"
    assert (attribute.attribute, randn.attribute) == ("noise_std", "")
    assert {f.op for f in findings} == {"add"}


def test_two_factories_of_one_line_are_two_findings() -> None:
    findings = autoreg.audit_forward(TwoFactories(), torch.ones(2, DIM), low_precision=None)
    line = line_of(TwoFactories, "return x * (torch.zeros")
    assert [(f.kind, f.lineno, f.op) for f in findings] == [
        ("device", line, "mul"),
        ("device", line, "mul"),
    ]


class CausalAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mask = torch.ones(3, 3, dtype=torch.bool).tril()  # a plain attribute

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.scaled_dot_product_attention(x, x, x, attn_mask=self.mask)


def test_scalars_torch_makes_inside_an_operation_are_no_creation_site() -> None:
    """sdpa turns a bool mask into a float one with where(mask, scalar_tensor(0),
    scalar_tensor(-inf)): the 0-dim tensors are scalars to CUDA, and the stray is the mask."""
    findings = autoreg.audit_forward(CausalAttention(), torch.ones(1, 3, 4), low_precision=None)
    line = line_of(CausalAttention, "return nn.functional.scaled_dot_product_attention")
    assert [(f.kind, f.lineno, f.entered, f.source) for f in findings] == [
        (
            "device",
            line,
            True,
            "return nn.functional.scaled_dot_product_attention(x, x, x, attn_mask=self.mask)",
        ),
    ]


class TwoAttributes(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(DIM, DIM)
        self.scale = torch.full((DIM,), 2.0)
        self.shift = torch.zeros(DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) * self.scale + self.shift


def test_two_plain_attributes_on_one_line_are_two_findings() -> None:
    """A finding per attribute: merged per line, the second would hide until the first is fixed."""
    findings = autoreg.audit_forward(TwoAttributes(), torch.ones(2, DIM), low_precision=None)
    line = line_of(TwoAttributes, "return self.linear(x) * self.scale + self.shift")
    assert [(f.kind, f.lineno, f.attribute) for f in findings] == [
        ("device", line, "scale"),
        ("device", line, "shift"),
    ]
