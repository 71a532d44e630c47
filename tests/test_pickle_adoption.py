"""Pickles (README, Decisions and limits: old pickles are adopted): a pickle of an autoreg
instance is never taken for one made before the class used autoreg."""

from __future__ import annotations

import copy
import pickle

import pytest
import torch

import autoreg


class Raw(autoreg.Module):
    """Stores a tensor around __setattr__ (a property setter or a __dict__ write does that)."""

    def __init__(self) -> None:
        super().__init__()
        self.__dict__["raw"] = torch.zeros(2)


@pytest.mark.parametrize(
    "clone",
    [copy.deepcopy, lambda m: pickle.loads(pickle.dumps(m))],
    ids=["deepcopy", "pickle"],
)
def test_a_copy_moves_what_the_original_moves(clone: object) -> None:
    original = Raw()
    copied = clone(original)  # type: ignore[operator]
    assert original.double().raw.dtype == torch.float32  # not autoreg's: stays, as in nn.Module
    assert copied.double().raw.dtype == torch.float32
