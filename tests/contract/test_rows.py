"""The contract as one decision: ``classify`` names the row of the table that applies, 1 to 12,
and what an assignment does is the decision ``classify`` makes for its situation (property 1)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

import autoreg
from autoreg import _mixin
from autoreg._contract import EXPLICIT_ROW, REGISTERED, classify
from autoreg._facts import BUFFERS, EXPLICIT, TENSOR, situation
from autoreg._record import record_of
from autoreg._state import BUFFER, CARRIED, CONSTRUCTING, FRAMEWORK, MODEL, Building, role_key


class Subject(autoreg.Module):
    declared: torch.Tensor
    plain: autoreg.Plain
    default = 1.0

    def __init__(self) -> None:
        super().__init__()
        self.auto = torch.zeros(2)  # an auto-registered buffer
        self.register_buffer("explicit", torch.zeros(2))
        self.linear = nn.Linear(1, 1)
        self.weight_orig = nn.Parameter(torch.zeros(1))  # what prune registers for "weight"

    @property
    def prop(self) -> int:
        return 0

    @prop.setter
    def prop(self, value: object) -> None:
        pass


def row(name: str, value: Any, *, constructing: bool = False, framework: bool = False) -> int:
    module = Subject()
    d = module.__dict__
    if constructing:
        d[CONSTRUCTING] = Building(d)
    if framework:
        d[role_key(name)] = FRAMEWORK
    record = record_of(module)
    role = d.get(role_key(name))
    return classify(record, situation(record, d, name, value, role, None)).row


@pytest.mark.parametrize(
    ("expected", "name", "value", "keywords"),
    [
        (1, "new", nn.Parameter(torch.zeros(1)), {}),
        (1, "auto", nn.Linear(1, 1), {}),
        (1, "new", nn.Buffer(torch.zeros(1)), {}),
        (2, "auto", 3, {}),
        (2, "auto", [torch.ones(1)], {}),
        (3, "auto", torch.ones(2), {}),
        (3, "auto", None, {}),
        (3, "explicit", 3, {}),
        (3, "linear", None, {}),
        (4, "new", torch.ones(1), {"framework": True}),
        (5, "plain", torch.ones(1), {}),
        (6, "new", torch.ones(1, requires_grad=True), {}),
        (6, "weight", torch.ones(1), {}),
        (7, "default", torch.ones(1), {}),
        (7, "prop", torch.ones(1), {}),
        (7, "training", torch.ones(1), {}),
        (7, "a.b", torch.ones(1), {}),
        (8, "new", [torch.ones(1)], {}),
        (8, "default", {"k": torch.ones(1)}, {}),
        (9, "declared", torch.ones(1), {}),
        (9, "declared", torch.ones(1, requires_grad=True) * 2, {}),
        (10, "new", torch.ones(1), {"constructing": True}),
        (10, "new", torch.ones(1, requires_grad=True) * 2, {"constructing": True}),
        (11, "new", torch.ones(1), {}),
        (11, "new", torch.ones(1, requires_grad=True) * 2, {}),
        (12, "new", "text", {}),
        (12, "new", None, {}),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_classify_names_the_row(expected: int, name: str, value: Any, keywords: Any) -> None:
    assert row(name, value, **keywords) == expected


def test_property_1_every_assignment_carries_out_classifys_decision(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Property 1, one decision: an assignment replays what ``classify`` decides for its
    situation, made afresh here, whether the class has seen the situation before or not."""
    seen: list[tuple[Any, Any, Any]] = []
    execute = _mixin.execute

    def spy(module: nn.Module, record: Any, s: Any, value: Any, decision: Any) -> None:
        seen.append((record, s, decision))
        execute(module, record, s, value, decision)

    monkeypatch.setattr(_mixin, "execute", spy)
    for _ in range(2):  # the second instance replays the first one's decisions
        module = Subject()
        module.state = torch.ones(1)
        module.state = torch.ones(2)
        module.auto = torch.ones(2)
        module.count = 1
        module.count = 2
        module.auto = "released"
    assert len(seen) == 2 * 10  # 3 in __init__, 6 here, and row 2 assigns "released" afresh
    for record, s, decision in seen:
        assert decision == classify(record, s)


@pytest.mark.parametrize("role", [None, BUFFER, CARRIED, FRAMEWORK, MODEL])
def test_a_plain_tensor_over_a_buffer_is_row_3_whatever_the_names_role(role: str | None) -> None:
    """``__setattr__`` takes this decision without asking ``classify`` (a buffer update is the
    commonest assignment at run time): it must be ``classify``'s for every role a name can have."""
    module = Subject()
    record = record_of(module)
    s = situation(record, module.__dict__, "auto", torch.ones(2), role, None)
    assert s == ("auto", TENSOR, role, BUFFERS, False, None, False)
    assert classify(record, s) is REGISTERED


@pytest.mark.parametrize("constructing", [True, False], ids=["constructing", "built"])
@pytest.mark.parametrize("framework", [True, False], ids=["framework base", "autoreg.Module"])
def test_a_module_under_a_new_name_is_row_1_whatever_else(
    constructing: bool, framework: bool
) -> None:
    """``__setattr__`` takes this decision without asking ``classify`` (every submodule a
    constructor adds): it must be ``classify``'s, built or not, on any class, and what it does
    nn.Module's."""
    module: nn.Module = OnLinear(1, 1) if framework else Subject()
    d = module.__dict__
    if constructing:
        d[CONSTRUCTING] = Building(d)
    record = record_of(module)
    s = situation(record, d, "child", nn.Identity(), None, None)
    assert s == ("child", EXPLICIT, None, None, constructing, None, False)
    assert classify(record, s) is EXPLICIT_ROW
    child = nn.Identity()
    module.child = child
    assert module._modules["child"] is child
    assert "child" not in d
    assert role_key("child") not in d


@pytest.mark.parametrize("framework", [True, False], ids=["framework base", "autoreg.Module"])
def test_a_class_assigned_to_dunder_class_is_row_12(framework: bool) -> None:
    """``__setattr__`` stores a class under ``__class__`` without asking ``classify`` (torch's
    parametrizations swap the class of the instance twice per round): it must be ``classify``'s
    answer, a store as nn.Module's, and the swap nn.Module's."""
    module: nn.Module = OnLinear(1, 1) if framework else Subject()
    record = record_of(module)
    subclass = type("Swapped", (type(module),), {})
    s = situation(record, module.__dict__, "__class__", subclass, None, None)
    assert classify(record, s).row == 12
    module.__class__ = subclass
    assert type(module) is subclass
    assert role_key("__class__") not in module.__dict__


class OnLinear(autoreg.AutoRegisterMixin, nn.Linear):
    pass
