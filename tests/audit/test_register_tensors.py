"""register_tensors: a third-party instance's plain tensor attributes become buffers, in place."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from torch import nn
from torch.nn.modules.module import register_module_buffer_registration_hook
from torch.nn.utils import prune

import autoreg
from autoreg import NotAModuleError
from tests.support import role


class Rotary(nn.Module):
    """Stands for a library class that keeps a constant in a plain attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.inv_freq = torch.arange(4.0)
        self.steps = torch.arange(3)  # an integer tensor: keeps its dtype, as buffers do


class Legacy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(2, 2)
        self.register_buffer("table", torch.ones(2))
        self.blocks = nn.ModuleList([Rotary(), Rotary()])
        self.mask = torch.ones(2, 2, dtype=torch.bool)


# Module-level, so that instances pickle.
class Pickled(Legacy):
    pass


def test_plain_tensor_attributes_become_buffers_throughout_the_tree() -> None:
    model = Legacy()
    mask, inv_freq = model.mask, model.blocks[0].inv_freq
    registered = autoreg.register_tensors(model)
    assert registered == [
        "mask",
        "blocks.0.inv_freq",
        "blocks.0.steps",
        "blocks.1.inv_freq",
        "blocks.1.steps",
    ]
    assert model._buffers["mask"] is mask
    assert model.blocks[0]._buffers["inv_freq"] is inv_freq
    assert "mask" not in vars(model)
    assert autoreg.find_unregistered(model) == []


def test_they_move_with_to() -> None:
    model = Legacy()
    autoreg.register_tensors(model)
    model.to(torch.float64)
    assert model.blocks[1].inv_freq.dtype == torch.float64
    assert model.blocks[1].steps.dtype == torch.int64
    model.to("meta")
    assert {t.device.type for t in model.buffers()} == {"meta"}


def test_state_dict_keys_are_unchanged_by_default() -> None:
    model = Legacy()
    before = list(model.state_dict())
    autoreg.register_tensors(model)
    assert list(model.state_dict()) == before
    assert Legacy().load_state_dict(model.state_dict()) is not None


def test_persistent_true_saves_them() -> None:
    model = Legacy()
    before = set(model.state_dict())
    registered = autoreg.register_tensors(model, persistent=True)
    assert set(model.state_dict()) == before | set(registered)


def test_a_second_call_registers_nothing() -> None:
    model = Legacy()
    autoreg.register_tensors(model)
    assert autoreg.register_tensors(model) == []


def test_a_shared_submodule_is_registered_once_under_its_first_path() -> None:
    rotary = Rotary()
    model = nn.Sequential(rotary, rotary)
    assert autoreg.register_tensors(model) == ["0.inv_freq", "0.steps"]


class Awkward(nn.Module):
    scale = None  # a class-level default hides any buffer named 'scale'

    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.ones(1)
        self.temperature = torch.ones(1, requires_grad=True)
        self.activation = self.temperature * 2
        self.anchors = [torch.ones(1)]
        self.stray = nn.Parameter(torch.ones(1))
        del self._parameters["stray"]
        self.__dict__["stray"] = nn.Parameter(torch.ones(1), requires_grad=False)


def test_what_the_mixin_would_not_register_is_left_as_it_is() -> None:
    model = Awkward()
    before = dict(vars(model))
    assert autoreg.register_tensors(model) == []
    for name in ("scale", "temperature", "activation", "anchors", "stray"):
        assert vars(model)[name] is before[name], name
    assert [f.path for f in autoreg.find_unregistered(model)] == [
        "scale",
        "temperature",
        "activation",
        "anchors[0]",
        "stray",
    ]


def test_a_weight_that_prune_recomputes_is_left_alone() -> None:
    linear = nn.Linear(3, 3)
    prune.l1_unstructured(linear, "weight", amount=0.5)
    with torch.no_grad():
        linear(torch.ones(1, 3))  # the hook now writes a tensor without grad
    assert not vars(linear)["weight"].requires_grad
    assert autoreg.register_tensors(linear) == []
    assert set(linear.state_dict()) == {"bias", "weight_orig", "weight_mask"}


def test_an_autoreg_modules_carried_and_plain_names_stay_autoregs() -> None:
    class Model(autoreg.Module):
        pinned: autoreg.Plain

        def __init__(self) -> None:
            super().__init__()
            self.pinned = torch.ones(1)
            self.rotary = Rotary()

    model = Model()
    model.cache = torch.zeros(1)  # carried runtime state
    assert autoreg.register_tensors(model) == ["rotary.inv_freq", "rotary.steps"]
    assert vars(model)["cache"] is model.cache
    assert role(model, "cache") == "carried"
    assert "pinned" in vars(model)


@pytest.fixture
def hook_calls() -> Iterator[list[tuple[str, torch.Tensor]]]:
    calls: list[tuple[str, torch.Tensor]] = []

    def hook(module: nn.Module, name: str, tensor: torch.Tensor | None) -> torch.Tensor | None:
        assert tensor is not None
        calls.append((name, tensor))
        return tensor.clone() if name == "mask" else None

    handle = register_module_buffer_registration_hook(hook)
    yield calls
    handle.remove()


def test_registration_goes_through_register_buffer_so_global_hooks_run(
    hook_calls: list[tuple[str, torch.Tensor]],
) -> None:
    model = Rotary()
    model.mask = torch.ones(1)
    mask = model.mask
    autoreg.register_tensors(model)
    assert [name for name, _ in hook_calls] == ["inv_freq", "steps", "mask"]
    assert model.mask is not mask  # the hook replaced it
    assert torch.equal(model.mask, mask)


def test_a_failed_registration_restores_the_attribute() -> None:
    class Refusing(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mask = torch.ones(1)

        def register_buffer(self, name: str, tensor: Any, persistent: bool = True) -> None:
            raise RuntimeError("no buffers here")

    model = Refusing()
    mask = model.mask
    with pytest.raises(RuntimeError, match="no buffers here"):
        autoreg.register_tensors(model)
    assert vars(model)["mask"] is mask


def test_the_registered_model_deep_copies_and_pickles() -> None:
    model = Pickled()
    autoreg.register_tensors(model)
    for clone in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        assert set(clone._buffers) == {"table", "mask"}
        assert "mask" in clone._non_persistent_buffers_set
        clone.to(torch.float64)
        assert clone.blocks[0].inv_freq.dtype == torch.float64


def test_reassigning_a_registered_name_follows_buffer_rules() -> None:
    model = Rotary()
    autoreg.register_tensors(model)
    model.inv_freq = torch.zeros(4)
    assert "inv_freq" in model._buffers
    with pytest.raises(TypeError, match="cannot assign 'int' as buffer 'inv_freq'"):
        model.inv_freq = 3


def test_something_other_than_a_module_is_refused() -> None:
    with pytest.raises(
        NotAModuleError,
        match=r"^register_tensors\(\) takes an nn.Module instance, got the class Rotary.\n"
        r"Pass an instance, not the class: register_tensors\(Rotary\(...\)\)$",
    ):
        autoreg.register_tensors(Rotary)  # type: ignore[arg-type]
