"""``audit_forward`` on a model that has already run a training forward, and what it cannot copy.

The audit runs a deep copy of the model. A training forward leaves tensors with autograd history
on the model (a recurrent state, kept activations), which ``copy.deepcopy`` refuses: the audit
copies them as detached values. When a copy really is impossible, the error names the attribute
that blocks it, its value and the fix.
"""

from __future__ import annotations

import threading

import pytest
import torch
from torch import nn

import autoreg
from autoreg import ForwardAuditError

DIM = 4


class Recurrent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.Linear(DIM, DIM)
        self.h: torch.Tensor | None = None
        self.activations: list[torch.Tensor] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.h if self.h is not None else x.new_zeros(x.shape)
        self.h = torch.tanh(self.cell(x) + h)  # keeps its autograd history
        self.activations.append(self.h.sum(-1))  # another, with its history too
        return self.h


def trained() -> Recurrent:
    model = Recurrent()
    model(torch.ones(2, DIM)).sum().backward()
    assert model.h is not None
    assert model.h.grad_fn is not None
    return model


def test_a_state_with_autograd_history_is_copied_as_a_detached_value() -> None:
    model = trained()
    h, activations = model.h, list(model.activations)
    findings = autoreg.audit_forward(model, torch.ones(2, DIM), low_precision=None)
    assert {(f.kind, f.attribute) for f in findings} == {
        ("device", ""),  # the state left on the CPU by .to() meets the model's device
        ("stored", "h"),
        ("stored", "activations"),
    }
    [device] = [f for f in findings if f.kind == "device"]
    assert device.entered
    assert device.fix.startswith("h is a plain attribute .to() leaves behind")
    assert model.h is h
    assert model.h.grad_fn is not None
    assert model.activations == activations


def test_the_same_model_written_with_autoreg_is_clean_after_training() -> None:
    class Carried(autoreg.Module):
        def __init__(self) -> None:
            super().__init__()
            self.cell = nn.Linear(DIM, DIM)
            self.h: torch.Tensor | None = None

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.h if self.h is not None else x.new_zeros(x.shape)
            self.h = torch.tanh(self.cell(x) + h).detach()
            return self.h

    model = Carried()
    model(torch.ones(2, DIM))
    assert autoreg.audit_forward(model, torch.ones(2, DIM)) == []


def test_an_attribute_that_cannot_be_copied_is_named_with_its_value_and_the_fix() -> None:
    class Worker(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lock = threading.Lock()

    class Outer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(DIM, DIM)
            self.worker = Worker()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.linear(x)

    with pytest.raises(ForwardAuditError) as caught:
        autoreg.audit_forward(Outer(), torch.ones(2, DIM))
    assert str(caught.value) == (
        "audit_forward() cannot deep-copy Outer: Worker.lock = '_thread.lock' raised TypeError: "
        "cannot pickle '_thread.lock' object\n"
        "The audit runs a copy, so that the model given is left as it was. Make Worker.lock "
        "deep-copyable (give its class a __deepcopy__), or keep it out of the model: a "
        "module-level object, or an argument of forward."
    )
