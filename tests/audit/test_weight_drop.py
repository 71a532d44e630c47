"""A weight recomputed before every use: a hand-made weight drop (DropConnect) on an ``nn.LSTM``.

As AWD-LSTM writes it: the recurrent weight leaves the LSTM's parameters for a raw one, and
forward sets the LSTM's weight to a dropout of the raw one before every call. ``.to()`` converts
the raw weight; ``nn.RNNBase._apply`` rebuilds ``_flat_weights`` from the LSTM's attributes; the
next forward replaces the weight before the LSTM reads it. Nothing is left behind that a forward
would read: neither audit reports it (before: the attribute audit reported
``rnn._flat_weights[1]``, the forward audit ``stored LSTM.weight_hh_l0`` and
``LSTM._flat_weights``). What the LSTM keeps that no forward replaces is still reported.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import autoreg

DIM = 4


class WeightDrop(nn.Module):
    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        self.rnn = nn.LSTM(DIM, DIM)
        self.p = p
        raw = self.rnn.weight_hh_l0
        del self.rnn._parameters["weight_hh_l0"]
        self.rnn.register_parameter("weight_hh_l0_raw", nn.Parameter(raw.data))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = nn.functional.dropout(self.rnn.weight_hh_l0_raw, self.p, self.training)
        setattr(self.rnn, "weight_hh_l0", weight)  # noqa: B010 - as the pattern writes it
        out: torch.Tensor = self.rnn(x)[0]
        return out


class FrozenWeight(nn.Module):
    """The weight made a plain tensor once, and never recomputed: .to() leaves it behind."""

    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.LSTM(DIM, DIM)
        raw = self.rnn.weight_hh_l0
        del self.rnn._parameters["weight_hh_l0"]
        self.rnn.weight_hh_l0 = raw.detach().clone()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.rnn(x)[0]
        return out


def inputs() -> torch.Tensor:
    return torch.randn(5, 2, DIM)


def test_the_pattern_moves_and_runs_converted() -> None:
    """What the audits are asked about: converted, before or after a forward, it runs."""
    for ran in (False, True):
        model = WeightDrop().train()
        if ran:
            model(inputs())
        model.to(torch.float64)
        assert model(inputs().double()).dtype == torch.float64
    frozen = FrozenWeight().to(torch.float64)
    with pytest.raises(RuntimeError, match="dtype"):  # its weight left in float32
        frozen(inputs().double())


def test_the_flat_weights_torch_rebuilds_in_apply_are_no_finding() -> None:
    assert autoreg.find_unregistered(WeightDrop()) == []


def test_a_weight_left_in_the_flat_weights_and_never_recomputed_is_still_a_finding() -> None:
    paths = {f.path for f in autoreg.find_unregistered(FrozenWeight())}
    assert paths == {"rnn.weight_hh_l0"}  # _flat_weights[1] is made of it again by .to()


def test_the_weight_forward_recomputes_before_every_use_is_no_stored_stray() -> None:
    findings = autoreg.audit_forward(WeightDrop().train(), inputs(), mode="both")
    assert findings == []


class KeepsTheLastWeight(WeightDrop):
    """Recomputes the weight only in the first call, then uses what it stored: a stray."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if "weight_hh_l0" not in vars(self.rnn):
            weight = nn.functional.dropout(self.rnn.weight_hh_l0_raw, self.p, self.training)
            setattr(self.rnn, "weight_hh_l0", weight)  # noqa: B010
        out: torch.Tensor = self.rnn(x)[0]
        return out


def test_a_weight_forward_stores_and_reads_in_the_next_call_is_still_stored() -> None:
    findings = autoreg.audit_forward(KeepsTheLastWeight().train(), inputs(), low_precision=None)
    assert {(f.kind, f.class_name, f.attribute) for f in findings} >= {
        ("stored", "LSTM", "weight_hh_l0")
    }
