"""The migrated model's tests, run by docs/migrating.md with AUTOREG_MODE=strict."""

from __future__ import annotations

import torch

import autoreg
from examples import legacy_model, migrated_model


def test_nothing_is_left_behind() -> None:
    model = migrated_model.build().to(torch.float64)
    assert autoreg.find_unregistered(model) == []
    assert model(torch.randn(2, 5, 8, dtype=torch.float64)).dtype == torch.float64


def test_the_checkpoint_format_changes_only_by_the_new_parameter() -> None:
    before = legacy_model.build().state_dict().keys()
    after = migrated_model.build().state_dict().keys()
    assert set(after) - set(before) == {"head.temperature"}
    assert set(before) <= set(after)
