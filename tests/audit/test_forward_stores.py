"""``audit_forward`` reports state that ``forward`` stores where ``.to()`` leaves it: ``"stored"``.

A plain ``nn.Module`` that keeps a recurrent state (``self.h = ...``) or a kv-cache (a dict or list
of tensors) in forward holds, after one call, tensors that ``.to()`` never moves. The finding sits
at the line of the assignment, names the module's class, its path and the attribute, and says the
fix: autoreg carries it, or a non-persistent buffer. What an autoreg module carries moves: not a
finding.
"""

from __future__ import annotations

import inspect

import torch
from torch import nn

import autoreg
from tests.audit.support import line_of

DIM = 4


class Recurrent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.Linear(DIM, DIM)
        self.h: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.h if self.h is not None else x.new_zeros(x.shape)
        self.h = torch.tanh(self.cell(x) + h)
        return self.h


class DictCache(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.k = nn.Linear(DIM, DIM)
        self.v = nn.Linear(DIM, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.cache = {"k": self.k(x), "v": self.v(x)}
        return self.cache["k"] * self.cache["v"]


class ListCache(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.k = nn.Linear(DIM, DIM)
        self.keys: list[torch.Tensor] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.keys.append(self.k(x))
        return torch.cat(self.keys, dim=0)


class Carried(autoreg.Module):
    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.Linear(DIM, DIM)
        self.keys: list[torch.Tensor] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.h = torch.tanh(self.cell(x))  # carried: it moves
        self.keys.append(self.h)
        self.cache = {"h": self.h}
        return self.h


class Stack(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Recurrent(), Carried()])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


def test_state_stored_in_forward_is_reported_at_the_assignment_with_its_fix() -> None:
    [finding] = autoreg.audit_forward(Recurrent(), torch.ones(2, DIM), low_precision=None)
    line = line_of(Recurrent, "self.h = torch.tanh(")
    assert (finding.kind, finding.lineno, finding.source) == (
        "stored",
        line,
        "self.h = torch.tanh(self.cell(x) + h)",
    )
    assert (finding.class_name, finding.attribute, finding.module_path) == ("Recurrent", "h", "")
    assert finding.filename == inspect.getsourcefile(Recurrent)
    assert finding.tensor == "float32[2, 4] meta"
    assert finding.fix == (
        "state forward stores where .to() leaves it: subclass autoreg.Module (it carries it), or "
        "in __init__: self.register_buffer('h', None, persistent=False)"
    )
    assert (finding.op, finding.op_filename, finding.op_lineno, finding.entered) == (
        "",
        "",
        0,
        False,
    )
    assert finding.as_dict()["kind"] == "stored"
    assert finding.as_dict()["attribute"] == "h"
    assert str(finding) == (
        f"{finding.where}: stored float32[2, 4] meta in Recurrent.h: {finding.source}\n"
        f"    fix: {finding.fix}"
    )


def test_a_kv_cache_dict_assigned_in_forward_is_one_finding_at_its_assignment() -> None:
    findings = autoreg.audit_forward(DictCache(), torch.ones(2, DIM))
    assert [(f.kind, f.attribute, f.lineno) for f in findings] == [
        ("stored", "cache", line_of(DictCache, "self.cache = {"))
    ]
    assert findings[0].fix == (
        "a dict of tensors forward stores where .to() leaves them: subclass autoreg.Module (it "
        "carries the dict), or one non-persistent buffer per tensor"
    )


def test_a_tensor_appended_to_a_list_in_place_is_reported_at_the_line_that_made_it() -> None:
    findings = autoreg.audit_forward(ListCache(), torch.ones(2, DIM))
    assert [(f.kind, f.attribute, f.lineno) for f in findings] == [
        ("stored", "keys", line_of(ListCache, "self.keys.append(self.k(x))"))
    ]
    assert "a list of tensors" in findings[0].fix


def test_what_an_autoreg_module_carries_is_not_a_finding() -> None:
    assert autoreg.audit_forward(Carried(), torch.ones(2, DIM)) == []


def test_a_store_in_a_submodule_names_its_class_and_path() -> None:
    findings = autoreg.audit_forward(Stack(), torch.ones(2, DIM))
    assert [(f.kind, f.class_name, f.module_path, f.attribute) for f in findings] == [
        ("stored", "Recurrent", "blocks.0", "h")
    ]


def test_the_model_given_stores_nothing_and_keeps_its_classes() -> None:
    model = Stack()
    classes = [type(m) for m in model.modules()]
    autoreg.audit_forward(model, torch.ones(2, DIM))
    assert [type(m) for m in model.modules()] == classes
    assert model.blocks[0].h is None
    assert "h" not in vars(model.blocks[1])
    assert model.blocks[1].keys == []
