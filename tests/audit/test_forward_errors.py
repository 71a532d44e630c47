"""Why a forward pass stops, said truthfully: the forward's own error, or a limit of the audit.

The audit runs the forward on the CPU with real values. When the pass stops, the model given is
run again without the audit: if it raises then too (wrong input shapes, a bug), the error is the
forward's own, at the user's line; if it runs, the audit could not follow it, and says so. A
model built on the meta device has no values: an operation that needs them stops the audit there.
"""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

import autoreg
from autoreg import ForwardAuditError
from tests.audit.support import line_of

DIM = 4
OWN = "It raises on the CPU without the audit too (checked): an error of the model or of its inputs"
LIMIT = "Without the audit, it runs on the CPU (checked): a limit of the audit"


class Linear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(DIM, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


class Bug(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshpe(-1)  # type: ignore[attr-defined]


class DependsOnValues(Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x) + torch.ones(x.shape)
        return y[y > 0]  # a shape that depends on the weights' values


class Guesses(Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        if not bool((y > -1e9).all()):  # the weights' values: on meta, a stand-in (False)
            raise ValueError("no activation above -1e9")
        return y


class SeesTheAudit(Linear):
    """Runs alone, fails under the audit: stands for whatever the audit cannot follow."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch._C._is_torch_function_mode_enabled():
            raise RuntimeError("a torch function mode is active")
        return self.linear(x)


def stopped(model: nn.Module, x: torch.Tensor) -> str:
    with pytest.raises(ForwardAuditError) as caught:
        autoreg.audit_forward(model, x)
    return str(caught.value)


def test_wrong_input_shapes_are_the_forwards_own_error_at_the_users_line() -> None:
    message = stopped(Linear(), torch.ones(2, DIM + 1))
    line = line_of(Linear, "return self.linear(x)")
    assert re.match(
        rf"the forward of Linear raises at .*test_forward_errors\.py:{line}: RuntimeError: ",
        message,
    )
    assert OWN in message
    assert "meta" not in message
    with pytest.raises(RuntimeError):  # as on the CPU, with real values
        Linear()(torch.ones(2, DIM + 1))


def test_a_bug_in_forward_is_the_forwards_own_error() -> None:
    message = stopped(Bug(), torch.ones(2, DIM))
    assert message.startswith(
        f"the forward of Bug raises at {__name__.replace('.', '/')}.py:"
        f"{line_of(Bug, 'x.reshpe')}: AttributeError: 'Tensor' object has no attribute 'reshpe'\n"
        f"{OWN}, not of the audit."
    )


def test_a_forward_the_audit_cannot_follow_is_said_to_be_the_audits_limit() -> None:
    message = stopped(SeesTheAudit(), torch.ones(2, DIM))
    assert message.startswith("the audit cannot follow the forward of SeesTheAudit at ")
    assert LIMIT in message
    assert OWN not in message


def test_a_shape_that_depends_on_values_is_audited_with_the_values() -> None:
    """What the meta device could not run (``y[y > 0]``) runs on real values."""
    [device] = autoreg.audit_forward(DependsOnValues(), torch.ones(2, DIM), low_precision=None)
    assert device.lineno == line_of(DependsOnValues, "y = self.linear(x) + torch.ones(x.shape)")


def test_a_model_built_on_meta_stops_where_values_are_needed_and_says_why() -> None:
    with torch.device("meta"):
        model = DependsOnValues()
    message = stopped(model, torch.ones(2, DIM))
    assert "DependsOnValues is on the meta device, which has no values" in message
    assert "Build the model on the CPU to audit it with its values." in message
    assert "Found before:" in message  # the torch.ones, found before the pass stopped


def test_an_error_after_stand_in_values_were_read_says_so() -> None:
    with torch.device("meta"):
        model = Guesses()
    message = stopped(model, torch.ones(2, DIM))
    assert "ValueError: no activation above -1e9" in message
    assert "the forward read 1 value(s) it could not compute from the inputs alone" in message
    assert OWN not in message
    assert autoreg.audit_forward(Guesses(), torch.ones(2, DIM)) == []  # on the CPU: runs


class RefusesDtypes(Linear):
    """A to() of its own that takes a device only: .to(torch.bfloat16) raises."""

    def __init__(self) -> None:
        super().__init__()
        self.device = torch.device("cpu")

    def to(self, device):  # type: ignore[no-untyped-def, override]
        self.device = torch.device(device)
        return super().to(device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) + torch.ones(DIM, device=self.device)


def test_a_to_of_the_models_own_that_refuses_a_dtype_stops_the_dtype_pass_with_its_error() -> None:
    """The dtype pass converts the copy with the model's own .to(torch.bfloat16), which raises:
    an error of the model's own to(), said in one line, with what the first pass found. Before:
    the TypeError came out of audit_forward as it was (a traceback from autoreg audit)."""
    with pytest.raises(ForwardAuditError) as caught:
        autoreg.audit_forward(RefusesDtypes(), torch.ones(2, DIM))
    message = str(caught.value)
    assert message.startswith(
        "the forward of RefusesDtypes is not audited in bfloat16: RefusesDtypes.to(torch.bfloat16) "
        "raises TypeError: "
    )
    assert "An error of the model's own to(), not of the audit" in message
    [device] = caught.value.findings  # the first pass ran: torch.ones on self.device
    assert (device.kind, device.lineno) == ("device", line_of(RefusesDtypes, "torch.ones(DIM"))
    summary = autoreg._forward_audit.not_audited(caught.value)
    assert summary.endswith("; an error of the model's own to(), not of the audit")
    assert "\n" not in summary


class ComplexKernel(nn.Module):
    """Its forward cannot run in bfloat16 (``view_as_complex``, as state space models' kernels),
    and stores a table on its first call: state ``.to()`` leaves behind."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(DIM, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        kernel = torch.view_as_complex(self.weight)
        if not hasattr(self, "table"):  # kept for the next calls
            self.table = torch.arange(DIM, device=kernel.device) * 0.5
        return (kernel * x).real + self.table


def test_the_state_the_first_pass_found_stored_is_kept_when_the_dtype_pass_stops() -> None:
    """The pass in bfloat16 raises as the model does; what the pass in the model's own dtype
    found is kept, the state forward stored with the rest. Before: the stored state was
    dropped, and ``autoreg audit`` said "no stray found before" of a model that stores one."""
    with pytest.raises(ForwardAuditError) as caught:
        autoreg.audit_forward(ComplexKernel(), torch.ones(2, DIM))
    [stored] = caught.value.findings
    assert (stored.kind, stored.attribute) == ("stored", "table")
    assert "view_as_complex" in str(caught.value)
    assert "No stray found before" not in str(caught.value)
