"""The contract as one decision: ``classify`` names the README row that applies, rows 1 to 12."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

import autoreg
from autoreg._contract import OWNED, classify, is_explicit
from autoreg._record import CONSTRUCTING, record_of


class Subject(autoreg.Module):
    declared: torch.Tensor
    plain: autoreg.Plain
    default = 1.0

    def __init__(self) -> None:
        super().__init__()
        self.auto = torch.zeros(2)  # an auto-registered buffer
        self.register_buffer("explicit", torch.zeros(2))

    @property
    def prop(self) -> int:
        return 0

    @prop.setter
    def prop(self, value: object) -> None:
        pass


def row(name: str, value: Any, *, constructing: bool = False, by_framework: bool = False) -> int:
    module = Subject()
    d = module.__dict__
    if constructing:
        d[CONSTRUCTING] = True
    role = d.get(OWNED, {}).get(name)
    decision = classify(record_of(module), d, name, value, role, is_explicit(value), by_framework)
    return decision.row


@pytest.mark.parametrize(
    ("expected", "name", "value", "keywords"),
    [
        (1, "new", nn.Parameter(torch.zeros(1)), {}),
        (1, "auto", nn.Linear(1, 1), {}),
        (2, "auto", 3, {}),
        (3, "auto", torch.ones(2), {}),
        (3, "explicit", 3, {}),
        (4, "new", torch.ones(1), {"by_framework": True}),
        (5, "plain", torch.ones(1), {}),
        (6, "new", torch.ones(1, requires_grad=True), {}),
        (7, "default", torch.ones(1), {}),
        (7, "prop", torch.ones(1), {}),
        (8, "new", [torch.ones(1)], {}),
        (9, "declared", torch.ones(1), {}),
        (10, "new", torch.ones(1), {"constructing": True}),
        (11, "new", torch.ones(1), {}),
        (12, "new", "text", {}),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_classify_names_the_row(expected: int, name: str, value: Any, keywords: Any) -> None:
    assert row(name, value, **keywords) == expected
