"""``audit_forward(..., mode=...)``: code that runs only in training, or only in eval, is audited.

By default the copy runs in the mode the model is in, and each finding says which; ``"train"``,
``"eval"`` or ``"both"`` choose. The model given keeps its mode, submodules included.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import autoreg
from tests.audit.support import line_of

DIM = 4


class Noisy(nn.Module):
    """Noise in training (as dropout does), a lookup table in eval: each a stray of one mode."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(DIM, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            x = x + 0.1 * torch.randn(x.shape)
        if not self.training:
            x = x * torch.linspace(0.5, 1.5, DIM)
        return self.linear(x)


TRAIN_LINE = line_of(Noisy, "x = x + 0.1 * torch.randn(x.shape)")
EVAL_LINE = line_of(Noisy, "x = x * torch.linspace(0.5, 1.5, DIM)")


def found(model: nn.Module, **options: object) -> list[tuple[int, str]]:
    findings = autoreg.audit_forward(model, torch.ones(2, DIM), low_precision=None, **options)
    return [(f.lineno, f.mode) for f in findings]


def test_by_default_the_mode_the_model_is_in() -> None:
    model = Noisy()
    assert found(model) == [(TRAIN_LINE, "train")]
    model.eval()
    assert found(model) == [(EVAL_LINE, "eval")]


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("train", [(TRAIN_LINE, "train")]),
        ("eval", [(EVAL_LINE, "eval")]),
        ("both", [(TRAIN_LINE, "train"), (EVAL_LINE, "eval")]),
    ],
    ids=["train", "eval", "both"],
)
def test_a_mode_chosen_is_the_mode_audited(mode: str, expected: list[tuple[int, str]]) -> None:
    model = Noisy().eval() if mode == "train" else Noisy()
    assert found(model, mode=mode) == expected


def test_the_model_keeps_its_mode_submodules_included() -> None:
    model = nn.Sequential(Noisy(), Noisy().eval())
    found(model, mode="both")
    assert [m.training for m in model.modules()] == [True, True, True, False, False]


def test_an_unknown_mode_is_refused_with_the_valid_ones() -> None:
    with pytest.raises(ValueError, match=r"^audit_forward\(\) got mode='inference': use 'train', "):
        found(Noisy(), mode="inference")


class Everywhere(Noisy):
    """A stray of each mode, one of both, and state stored in both (a loss kept for logging)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.last = x.sum()
        return super().forward(x * torch.ones(DIM))


BOTH_LINE = line_of(Everywhere, "return super().forward(x * torch.ones(DIM))")
STORED_LINE = line_of(Everywhere, "self.last = x.sum()")


def test_a_finding_says_every_mode_it_was_found_in() -> None:
    """Before: the pass in the second mode met the same stray and said nothing: the report's
    MODE column read "train" for a stray of inference too."""
    findings = autoreg.audit_forward(
        Everywhere(), torch.ones(2, DIM), low_precision=None, mode="both"
    )
    assert {(f.lineno, f.kind, f.mode, f.modes) for f in findings} == {
        (TRAIN_LINE, "device", "train", ("train",)),
        (EVAL_LINE, "device", "eval", ("eval",)),
        (BOTH_LINE, "device", "train", ("train", "eval")),
        (STORED_LINE, "stored", "train", ("train", "eval")),
    }
