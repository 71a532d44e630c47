"""The advice of ``audit_forward`` speaks the forward's own names.

A fix names the tensor whose device or dtype to use as the code that made the stray has it: a
local of that code (``x``), else a parameter or buffer of the module whose ``self`` it has
(``self.cell.weight``), never a path from the audited model; code that has neither is told to be
given one. A tensor whose shape follows the input's is made at each call: never called a constant.
"""

from __future__ import annotations

import inspect

import torch
from torch import nn

import autoreg
from tests.audit import forward_zoo
from tests.audit.support import line_of

DIM = 4


class Inner(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.Linear(DIM, DIM)

    def forward(self, steps: int) -> torch.Tensor:
        state = torch.zeros(steps, DIM)
        return self.cell(state)


class Outer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = Inner()

    def forward(self, steps: int) -> torch.Tensor:
        return self.inner(steps)


def ones(steps: int) -> torch.Tensor:
    return torch.ones(steps, DIM)


class Helper(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.Linear(DIM, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.cell(x) * ones(x.shape[0])


class Constant(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.Linear(DIM, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.cell(x)[..., :3] * torch.arange(3)


def test_a_submodules_parameter_is_named_from_its_own_self() -> None:
    findings = autoreg.audit_forward(Outer(), 3)
    device, dtype = findings
    assert (device.class_name, device.module_path) == ("Inner", "inner")
    assert device.lineno == line_of(Inner, "state = torch.zeros(steps, DIM)")
    assert device.fix == (
        "device=self.cell.bias.device, dtype=self.cell.bias.dtype (or .to(self.cell.bias)); if it "
        "is the same at every call, make it once in __init__ as a buffer (autoreg.Module "
        "registers it)"
    )
    assert dtype.fix == device.fix  # one fix for the site, both kinds
    assert dtype.reason == "addmm rejects float32 next to bfloat16"


def test_a_local_of_the_code_that_made_it_is_named_first() -> None:
    [device] = autoreg.audit_forward(
        forward_zoo.Noise(), *forward_zoo.activations(), low_precision=None
    )
    assert device.fix == "device=x.device (or torch.randn_like(x) for x's shape)"


def test_code_that_holds_no_tensor_of_the_model_is_told_to_be_given_one() -> None:
    [device] = autoreg.audit_forward(Helper(), torch.ones(2, DIM), low_precision=None)
    assert device.lineno == inspect.getsourcelines(ones)[1] + 1
    assert device.class_name == "Helper"
    assert device.fix == (
        "device= that of the model: the code here holds none of its tensors, so pass it one and "
        "write device=<that tensor>.device"
    )


def test_a_tensor_shaped_by_the_input_is_never_called_a_constant() -> None:
    for stray, inputs in [
        (forward_zoo.Cache, forward_zoo.activations()),  # torch.zeros(x.shape[0], ...)
        (forward_zoo.Positions, forward_zoo.tokens()),  # torch.arange(ids.shape[1])
    ]:
        findings = autoreg.audit_forward(stray(), *inputs, low_precision=None)
        assert findings
        assert all("constant" not in f.fix and "__init__" not in f.fix for f in findings)


def test_a_tensor_that_may_be_the_same_at_every_call_is_offered_a_buffer() -> None:
    [device] = autoreg.audit_forward(Constant(), torch.ones(2, 5, DIM), low_precision=None)
    assert device.fix == (
        "device=x.device (or .to(x)); if it is the same at every call, make it once in __init__ "
        "as a buffer (autoreg.Module registers it)"
    )
