"""Why a forward pass stops: the forward's own error, a gap of the meta device, or stand-ins.

A forward that raises by itself (wrong input shapes, a bug) raises on the CPU with real values
too: ``audit_forward`` reports it as that error, at the user's line, and does not blame the meta
device. An operation meta cannot run (a shape that depends on values) is reported as such, and so
is an error after the pass read values it could only guess.
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
OWN = "This is an error of the forward itself, not a gap of the audit"
META = "an operation meta cannot run"


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
        y = self.linear(x)
        return y[y > 0]  # a shape meta cannot know without the weights' values


class Guesses(Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        if not bool((y > 0).any()):  # the weights' values: a stand-in, False
            raise ValueError("no positive activation")
        return y


def stopped(model: nn.Module, x: torch.Tensor) -> str:
    with pytest.raises(ForwardAuditError) as caught:
        autoreg.audit_forward(model, x)
    return str(caught.value)


def test_wrong_input_shapes_are_the_forwards_own_error_at_the_users_line() -> None:
    message = stopped(Linear(), torch.ones(2, DIM + 1))
    line = line_of(Linear, "return self.linear(x)")
    assert re.match(
        rf"the forward of Linear raised at .*test_forward_errors\.py:{line}: RuntimeError: ",
        message,
    )
    assert OWN in message
    assert META not in message
    with pytest.raises(RuntimeError):  # as on the CPU, with real values
        Linear()(torch.ones(2, DIM + 1))


def test_a_bug_in_forward_is_the_forwards_own_error() -> None:
    message = stopped(Bug(), torch.ones(2, DIM))
    assert message.startswith(
        f"the forward of Bug raised at {__name__.replace('.', '/')}.py:"
        f"{line_of(Bug, 'x.reshpe')}: AttributeError: 'Tensor' object has no attribute 'reshpe'\n"
        f"{OWN}: it raises on the CPU with real values too."
    )


def test_a_shape_that_depends_on_values_is_a_gap_of_the_meta_device() -> None:
    message = stopped(DependsOnValues(), torch.ones(2, DIM))
    assert "raised on the meta device" in message
    assert META in message
    assert OWN not in message


def test_an_error_after_stand_in_values_were_read_says_so() -> None:
    message = stopped(Guesses(), torch.ones(2, DIM))
    assert "ValueError: no positive activation" in message
    assert "the forward read 1 value(s) it could not compute from the inputs alone" in message
    assert OWN not in message
