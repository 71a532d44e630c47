"""``audit_forward`` reports state that ``forward`` stores where ``.to()`` leaves it: ``"stored"``.

A plain ``nn.Module`` that keeps a recurrent state (``self.h = ...``) or a kv-cache (a dict or list
of tensors) in forward holds, after one call, tensors that ``.to()`` never moves. The finding sits
at the line of the assignment (for a tensor put into a container in place, the line that made
it), names the module's class, its path and the attribute, and says the fix: autoreg carries it,
or a non-persistent buffer. What an autoreg module carries moves: not a finding.
"""

from __future__ import annotations

import inspect

import torch
from torch import nn

import autoreg
from tests.audit.forward_zoo import DIM, Recurrent
from tests.audit.support import line_of


def caches_on(base: type[nn.Module]) -> type[nn.Module]:
    """A module that keeps a kv-cache dict and a list of keys, on ``base``."""

    class Caches(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            self.k = nn.Linear(DIM, DIM)
            self.v = nn.Linear(DIM, DIM)
            self.keys: list[torch.Tensor] = []

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            # reads what the last call stored (one that only recomputed it is no stray)
            v = self.v(x) + self.cache["v"] if hasattr(self, "cache") else self.v(x)
            self.cache = {"k": self.k(x), "v": v}
            self.keys.append(self.k(x))
            return self.cache["k"] * self.cache["v"] + torch.stack(self.keys).sum(0)

    return Caches


Caches = caches_on(nn.Module)
CarriedCaches = caches_on(autoreg.Module)  # migrated: autoreg carries what its forward stores


class Stack(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Recurrent(), CarriedCaches()])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


def stored(model: nn.Module) -> list[autoreg.ForwardFinding]:
    return autoreg.audit_forward(model, torch.ones(2, DIM), low_precision=None)


def test_state_stored_in_forward_is_reported_at_the_assignment_with_its_fix() -> None:
    h, activations = stored(Recurrent())
    line = line_of(Recurrent, "self.h = torch.tanh(")
    assert (h.kind, h.lineno, h.source) == (
        "stored",
        line,
        "self.h = torch.tanh(self.cell(x) + h)  # stored: kept with its autograd history",
    )
    assert (h.class_name, h.attribute, h.module_path, h.mode) == ("Recurrent", "h", "", "train")
    assert h.filename == inspect.getsourcefile(Recurrent)
    assert h.tensor == f"float32[2, {DIM}]"  # as the model has it: on its device
    assert (h.dtype, h.shape, h.device) == ("float32", (2, DIM), "cpu")
    assert h.fix == (
        "state forward stores where .to() leaves it: subclass autoreg.Module (it carries it), or "
        "in __init__: self.register_buffer('h', None, persistent=False)"
    )
    assert (h.op, h.op_filename, h.op_lineno) == ("", "", 0)
    assert not h.entered
    assert h.as_dict()["kind"] == "stored"
    assert h.as_dict()["attribute"] == "h"
    assert str(h) == (
        f"{h.where}: stored float32[2, {DIM}] in Recurrent.h: {h.source}\n    fix: {h.fix}"
    )
    assert (activations.attribute, activations.lineno) == (
        "activations",
        line_of(Recurrent, "self.activations.append("),
    )
    # What was stored, as data: autoreg fix reads it (never from the fix's words)
    assert (h.stored, activations.stored) == ("tensor", "container")
    assert h.as_dict()["stored"] == "tensor"


def test_a_kv_cache_is_reported_at_its_assignment_or_at_the_line_that_made_its_entry() -> None:
    keys, cache = stored(Caches())  # in the order of the module's attributes
    assert (cache.kind, cache.attribute, cache.lineno) == (
        "stored",
        "cache",
        line_of(Caches, "self.cache = {"),
    )
    assert cache.fix == (
        "a dict of tensors forward stores where .to() leaves them: subclass autoreg.Module (it "
        "carries the dict), or one non-persistent buffer per tensor"
    )
    assert (keys.kind, keys.attribute, keys.lineno) == (
        "stored",
        "keys",
        line_of(Caches, "self.keys.append(self.k(x))"),
    )
    assert "a list of tensors" in keys.fix
    assert (cache.stored, keys.stored) == ("container", "container")


class StoresAWeight(nn.Module):
    """Stores a fresh leaf that requires grad in forward: a weight, not state of a run."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(DIM, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not hasattr(self, "scale"):  # kept for the next call (one made again is no stray)
            self.scale = torch.ones(DIM, requires_grad=True)
        return self.proj(x) * self.scale


def test_what_forward_stored_is_told_apart_by_the_value_not_by_the_fix_text() -> None:
    made, weight = stored(StoresAWeight())  # the leaf is made on the CPU: a device finding too
    assert (weight.kind, weight.attribute, weight.stored) == ("stored", "scale", "other")
    assert (made.kind, made.stored) == ("device", "")


class KeepsUnderAClassAttribute(autoreg.Module):
    """An autoreg module whose state name is a class attribute: autoreg cannot carry it."""

    h = None

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(DIM, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.proj(x)
        self.h = y if self.training else y.detach()
        return y


def test_on_an_autoreg_module_what_was_stored_follows_the_value_too() -> None:
    """The audit's own fix, and what was stored: an autograd result is state of a run (it is
    carried once detached); a tensor under a name autoreg cannot carry is something else."""
    (result,) = autoreg.audit_forward(KeepsUnderAClassAttribute(), torch.ones(2, DIM))
    assert (result.kind, result.attribute, result.stored) == ("stored", "h", "tensor")
    (plain,) = autoreg.audit_forward(
        KeepsUnderAClassAttribute().eval(), torch.ones(2, DIM), mode="eval"
    )
    assert (plain.kind, plain.attribute, plain.stored) == ("stored", "h", "other")
    assert "defined on the class" in plain.fix


def test_what_an_autoreg_module_carries_is_not_a_finding() -> None:
    assert stored(CarriedCaches()) == []


def test_a_store_in_a_submodule_names_its_class_and_path() -> None:
    assert [(f.kind, f.class_name, f.module_path, f.attribute) for f in stored(Stack())] == [
        ("stored", "Recurrent", "blocks.0", "h"),
        ("stored", "Recurrent", "blocks.0", "activations"),
    ]


def test_the_model_given_stores_nothing_and_keeps_its_classes() -> None:
    model = Stack()
    classes = [type(m) for m in model.modules()]
    stored(model)
    assert [type(m) for m in model.modules()] == classes
    assert model.blocks[0].h is None
    assert model.blocks[0].activations == []
    assert "cache" not in vars(model.blocks[1])
    assert model.blocks[1].keys == []
