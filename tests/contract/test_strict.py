"""Strict mode (README, Options): raises on every tensor it would register or carry, unless
declared."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import autoreg
from tests.support import role


class Strict(autoreg.Module, strict=True):
    declared: torch.Tensor

    def __init__(self, undeclared: bool = False) -> None:
        super().__init__()
        self.declared = torch.zeros(2)
        self.parameter = nn.Parameter(torch.zeros(2))
        self.explicit = nn.Buffer(torch.zeros(2), persistent=False)
        self.register_buffer("registered", torch.zeros(2))
        self.child = nn.Linear(2, 2)
        self.count = 3
        if undeclared:
            self.mask = torch.ones(4, 4)


def test_explicit_and_declared_state_is_accepted() -> None:
    module = Strict()
    assert dict(module.named_buffers(recurse=False)).keys() == {
        "declared",
        "explicit",
        "registered",
    }
    module.declared = torch.ones(2)  # reassignments too
    module.registered = torch.ones(2)


def test_an_undeclared_construction_time_tensor_raises_with_the_whole_story() -> None:
    with pytest.raises(autoreg.UnregisteredTensorError) as caught:
        Strict(undeclared=True)
    assert str(caught.value) == (
        "cannot assign Tensor(shape=(4, 4), dtype=torch.float32, device='cpu') to Strict.mask: "
        "Strict is strict (class Strict(..., strict=True)) and 'mask' is not declared.\n"
        "Without strict, autoreg would register it as a non-persistent buffer (it was assigned "
        "during construction).\n"
        "Make it explicit, whichever fits (annotations go in the class body):\n"
        "    a buffer (non-persistent):   mask: torch.Tensor\n"
        "    a buffer in state_dict:      mask: autoreg.Persistent\n"
        "    a buffer not in state_dict:  mask: autoreg.NonPersistent\n"
        "    carried (runtime state):     mask: autoreg.Carried\n"
        "    registered by hand:          self.mask = nn.Buffer(value, persistent=False)\n"
        "    a weight to train:           self.mask = nn.Parameter(value)\n"
        "    never registered or moved:   mask: autoreg.Plain"
    )


def test_an_undeclared_runtime_tensor_raises_and_is_not_stored() -> None:
    module = Strict()
    with pytest.raises(
        autoreg.UnregisteredTensorError,
        match=r"autoreg would carry it along with \.to\(\) as runtime state, outside state_dict",
    ):
        module.cache = torch.zeros(3, dtype=torch.int64)
    assert not hasattr(module, "cache")


def test_the_error_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        Strict(undeclared=True)


def test_strict_is_inherited_and_can_be_switched_off() -> None:
    class StillStrict(Strict):
        pass

    class Relaxed(Strict, strict=False):
        pass

    with pytest.raises(autoreg.UnregisteredTensorError, match=r"StillStrict\.mask"):
        StillStrict(undeclared=True)
    assert "mask" in Relaxed(undeclared=True)._buffers


def test_strict_with_persistent_names_the_persistent_default() -> None:
    class Saved(autoreg.Module, strict=True, persistent=True):
        pass

    with pytest.raises(
        autoreg.UnregisteredTensorError, match=r"a buffer \(persistent\):       x: torch\.Tensor\n"
    ):
        Saved().x = torch.zeros(1)


def test_strict_raises_on_a_container_of_unregistered_tensors() -> None:
    module = Strict()
    module.ok = [module.declared, module.parameter, 3]  # registered state inside: fine
    with pytest.raises(
        autoreg.UnregisteredTensorError,
        match=r"cannot assign a dict holding 1 unregistered tensor\(s\) to Strict\.cache: .*\n"
        r"For example cache\['k'\] = Tensor\(shape=\(2,\)",
    ):
        module.cache = {"k": torch.zeros(2), "n": 1}
    assert not hasattr(module, "cache")


def test_a_refused_assignment_leaves_the_name_as_it_was() -> None:
    module = Strict()
    module.empty = []  # a container without tensors: carried, nothing to refuse
    with pytest.raises(autoreg.UnregisteredTensorError, match=r"to Strict\.empty: "):
        module.empty = [torch.zeros(1)]
    with pytest.raises(autoreg.UnregisteredTensorError, match=r"Strict is strict .* 'empty'"):
        module.empty = torch.zeros(1)
    assert module.empty == []
    assert role(module, "empty") == "plain"  # nothing in it to move


def test_a_non_tensor_for_a_declared_buffer_raises_as_in_nn_module() -> None:
    """Row 2 releases a buffer autoreg guessed; a declared name is a buffer by the class's own
    statement, so a string for it raises nn.Module's TypeError (strict mode let it replace the
    buffer silently)."""
    module = Strict()
    with pytest.raises(TypeError, match=r"cannot assign 'str' as buffer 'declared'"):
        module.declared = "oops"
    assert "declared" in module._buffers
