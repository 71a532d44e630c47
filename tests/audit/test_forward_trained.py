"""``audit_forward`` on a model that has already run a training forward, and what it cannot copy.

The audit runs a deep copy of the model. A training forward leaves tensors with autograd history
on the model (a recurrent state, kept activations), which ``copy.deepcopy`` refuses: the audit
copies them as detached values. When a copy really is impossible, the error names the attribute
that blocks it, its value and the fix.
"""

from __future__ import annotations

import threading
import types

import pytest
import torch
from torch import nn

import autoreg
from autoreg import ForwardAuditError
from tests.audit import forward_zoo
from tests.audit.forward_zoo import DIM, Recurrent


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
        ("device", "h"),  # the state left on the CPU by .to() meets the model's device
        ("stored", "h"),
        ("stored", "activations"),
    }
    [device] = [f for f in findings if f.kind == "device"]
    assert device.entered
    assert device.fix.startswith("h is a plain attribute .to() leaves behind")
    assert model.h is h
    assert model.h.grad_fn is not None
    assert model.activations == activations


def test_a_state_with_autograd_history_in_a_held_object_is_copied_as_a_detached_value() -> None:
    """Before: the copy refused it ("Only Tensors created explicitly by the user"), and the
    model, which runs, was not audited: its stray ``torch.ones(2)`` went unreported."""

    class Tracked(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(2, 2)
            self.stats = types.SimpleNamespace(h=None)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.linear(x)
            self.stats.h = y  # kept with its autograd history, in a plain object
            return y + torch.ones(2)

    model = Tracked()
    model(torch.randn(3, 2))
    assert model.stats.h.grad_fn is not None
    findings = autoreg.audit_forward(model, torch.randn(3, 2), low_precision=None)
    assert [(f.kind, f.source.strip()) for f in findings] == [
        ("device", "return y + torch.ones(2)")
    ]


def test_a_model_written_with_autoreg_is_clean_after_training() -> None:
    model = forward_zoo.Carrier()
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
