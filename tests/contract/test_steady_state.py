"""The steady-state assignment path (README, after the contract table) never calls warnings,
logging, a ContextVar or sys._getframe: rows 3, 11 and 12 as they repeat in every forward.

Those calls break torch.compile graphs, on every forward. A profiler hook records every Python
and C function that runs during the assignments.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import pytest
import torch
from torch import nn

import autoreg

FORBIDDEN_MODULES = ("warnings", "logging", "contextvars", "_contextvars")


@contextmanager
def calls() -> Iterator[list[str]]:
    """Record ``module.function`` for every call made inside the block."""
    seen: list[str] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            seen.append(f"{frame.f_globals.get('__name__')}.{frame.f_code.co_name}")
        elif event == "c_call":
            seen.append(f"{getattr(arg, '__module__', None) or type(arg).__name__}.{arg.__name__}")

    sys.setprofile(profile)
    try:
        yield seen
    finally:
        sys.setprofile(None)


def forbidden(seen: list[str]) -> list[str]:
    return [
        call
        for call in seen
        if call.split(".")[0] in FORBIDDEN_MODULES or "ContextVar" in call or ".warn" in call
    ]


class Model(autoreg.Module, warn=True):
    """Warns on the first sight of each name; each test takes a fresh subclass to see that."""

    table: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.table = torch.zeros(2)
        self.linear = nn.Linear(2, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.state = x.detach()  # carried runtime state, updated every call
        self.table = self.table + 1  # buffer reassignment
        self.steps = 1  # a plain attribute
        return self.linear(x)


STEADY: dict[str, Callable[[Model], object]] = {
    "forward": lambda m: m(torch.ones(1, 2)),
    "carried-update": lambda m: setattr(m, "state", torch.ones(2)),
    "buffer-reassign": lambda m: setattr(m, "table", torch.ones(2)),
    "plain-value": lambda m: setattr(m, "steps", 2),
    "none": lambda m: setattr(m, "state", None),
}


@pytest.mark.parametrize("action", STEADY.values(), ids=STEADY.keys())
def test_steady_state_assignments_stay_off_warnings_logging_and_contextvars(
    action: Callable[[Model], object],
) -> None:
    model = type("Fresh", (Model,), {})()
    with pytest.warns(autoreg.AutoRegisterWarning):
        model(torch.ones(1, 2))  # first call: the first registrations warn
    with calls() as seen:
        action(model)
    assert seen, "the profiler must see the assignment"
    assert forbidden(seen) == []


def test_the_probe_sees_a_warning_when_one_is_emitted() -> None:
    """The companion: the check above can fail."""
    model = type("Fresh", (Model,), {})()
    with calls() as seen, pytest.warns(autoreg.AutoRegisterWarning):
        model.fresh = torch.zeros(1)  # first sight of (Model, 'fresh') in warn mode
    assert any(call.startswith("warnings.") or ".warn" in call for call in forbidden(seen))
