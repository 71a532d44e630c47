"""Serialization: copies of autoreg modules are whole, and autoreg keeps working on them.

Copies are made with ``copy.deepcopy``, ``pickle`` and ``torch.save`` / ``torch.load``; state
dicts travel through ``torch.save`` / ``torch.load(weights_only=True)`` and come back bit-exact.
"""

from __future__ import annotations

import copy
import io
import pickle
from collections.abc import Callable

import pytest
import torch
from torch import nn

import autoreg


class AutoNet(autoreg.Module):
    stats: autoreg.Persistent  # saved in state_dict
    late: torch.Tensor  # declared, first assigned after construction

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.stats = torch.tensor([1.5, float("nan"), -0.0, float("inf")], dtype=torch.float64)
        self.scale = torch.linspace(0.0, 1.0, 3)  # non-persistent by default
        self.index = torch.tensor([2, 0, 1])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.last = x.detach()  # runtime state: carried
        return self.lin(x)[:, self.index] * self.scale


class TwinNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)
        stats = torch.tensor([1.5, float("nan"), -0.0, float("inf")], dtype=torch.float64)
        self.register_buffer("stats", stats)
        self.register_buffer("scale", torch.linspace(0.0, 1.0, 3), persistent=False)
        self.register_buffer("index", torch.tensor([2, 0, 1]), persistent=False)


class PersistentDtypes(autoreg.Module, persistent=True):
    """One persistent buffer per dtype family, with values whose bits matter."""

    z: autoreg.Persistent  # a complex tensor is carried unless declared (contract, row 10)

    def __init__(self) -> None:
        super().__init__()
        self.f32 = torch.tensor([float("nan"), -0.0, 1e-45, 3.4e38])
        self.bf16 = torch.tensor([1.0 / 3.0, -0.0], dtype=torch.bfloat16)
        self.f16 = torch.tensor([65504.0, 6e-8], dtype=torch.float16)
        self.i8 = torch.tensor([-128, 127], dtype=torch.int8)
        self.i64 = torch.tensor([2**62, -(2**62)])
        self.flag = torch.tensor([True, False])
        self.z = torch.tensor([1 + 2j, float("nan") - 0.0j], dtype=torch.complex64)
        self.scalar = torch.tensor(7)


def _bits(tensor: torch.Tensor) -> bytes:
    return bytes(tensor.detach().reshape(-1).contiguous().view(torch.uint8).tolist())


def _assert_bit_exact(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert list(a) == list(b)
    for key in a:
        assert a[key].dtype == b[key].dtype, key
        assert a[key].shape == b[key].shape, key
        assert _bits(a[key]) == _bits(b[key]), key


def _used() -> AutoNet:
    torch.manual_seed(0)
    module = AutoNet()
    module(torch.randn(2, 3))  # creates the carried `last`
    return module


def _via_deepcopy(module: nn.Module) -> nn.Module:
    return copy.deepcopy(module)


def _via_pickle(module: nn.Module) -> nn.Module:
    copied: nn.Module = pickle.loads(pickle.dumps(module))
    return copied


def _via_torch_save(module: nn.Module) -> nn.Module:
    buffer = io.BytesIO()
    torch.save(module, buffer)
    buffer.seek(0)
    copied: nn.Module = torch.load(buffer, weights_only=False)
    return copied


COPIES = pytest.mark.parametrize(
    "copier",
    [_via_deepcopy, _via_pickle, _via_torch_save],
    ids=["deepcopy", "pickle", "torch.save"],
)


# --- copies ------------------------------------------------------------------------------------


@COPIES
def test_copy_keeps_buffers_carried_tensors_and_their_roles(
    copier: Callable[[nn.Module], nn.Module],
) -> None:
    original = _used()

    copied = copier(original)

    assert type(copied) is AutoNet
    assert list(copied._buffers) == ["stats", "scale", "index"]
    assert copied._non_persistent_buffers_set == {"scale", "index"}
    _assert_bit_exact(copied.state_dict(), original.state_dict())
    assert "last" not in copied._buffers
    assert copied.last is not original.last
    torch.testing.assert_close(copied.last, original.last, rtol=0, atol=0)
    x = torch.randn(4, 3)
    torch.testing.assert_close(copied(x), original(x), rtol=0, atol=0)


@COPIES
def test_autoreg_keeps_working_on_a_copy(copier: Callable[[nn.Module], nn.Module]) -> None:
    copied = copier(_used())

    copied.extra = torch.ones(2)  # after construction: carried
    copied.late = torch.zeros(2)  # declared: a buffer
    copied.double()

    assert "extra" not in copied._buffers
    assert copied.extra.dtype == torch.float64
    assert copied.last.dtype == torch.float64  # carried before copying, still carried
    assert copied._buffers["late"] is copied.late
    assert copied.late.dtype == torch.float64
    assert copied.index.dtype == torch.int64
    assert list(copied.state_dict()) == ["stats", "lin.weight", "lin.bias"]
    assert "_autoreg_constructing" not in vars(copied)  # the copy is not "under construction"


def test_copies_are_independent() -> None:
    original = _used()
    copied = copy.deepcopy(original)

    copied.double()
    copied.scale.fill_(5.0)

    assert original.last.dtype == original.scale.dtype == torch.float32
    torch.testing.assert_close(original.scale, torch.linspace(0.0, 1.0, 3))


def test_copy_of_a_class_keyword_module_keeps_its_class_record() -> None:
    copied = _via_pickle(PersistentDtypes())

    copied.later = torch.ones(1)  # after construction: carried, even with persistent=True

    assert type(copied).__autoreg__.persistent
    assert "later" not in copied.state_dict()
    assert len(copied.state_dict()) == 8


# --- state dicts ---------------------------------------------------------------------------


def _round_trip(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    loaded: dict[str, torch.Tensor] = torch.load(buffer, weights_only=True)
    return loaded


def test_state_dict_keys_equal_the_twins() -> None:
    assert list(AutoNet().state_dict()) == list(TwinNet().state_dict())


@pytest.mark.parametrize("cls", [AutoNet, PersistentDtypes], ids=["AutoNet", "dtypes"])
def test_state_dict_round_trip_is_bit_exact(cls: Callable[[], nn.Module]) -> None:
    torch.manual_seed(1)
    saved = cls()
    state = saved.state_dict()

    loaded = _round_trip(state)
    _assert_bit_exact(loaded, state)

    torch.manual_seed(2)
    fresh = cls()
    fresh.load_state_dict(loaded)  # strict
    _assert_bit_exact(fresh.state_dict(), state)


def test_a_fresh_module_loads_the_state_dict_of_a_used_one() -> None:
    used = _used()
    used.extra = torch.ones(3)  # runtime state is never part of the checkpoint

    fresh = AutoNet()
    result = fresh.load_state_dict(_round_trip(used.state_dict()))

    assert not result.missing_keys
    assert not result.unexpected_keys
    _assert_bit_exact(fresh.state_dict(), used.state_dict())


def test_twin_state_dict_loads_into_autoreg_module_and_back() -> None:
    torch.manual_seed(3)
    twin = TwinNet()
    auto = AutoNet()

    auto.load_state_dict(_round_trip(twin.state_dict()))
    back = TwinNet()
    back.load_state_dict(_round_trip(auto.state_dict()))

    _assert_bit_exact(back.state_dict(), twin.state_dict())


# --- copies carry what the original carries, and share nothing of autoreg's -------------------


class Stores(autoreg.Module):
    """Carries one tensor, and stores another around ``__setattr__``, which autoreg never sees
    (nn.Module would not move either)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.__dict__["raw"] = torch.zeros(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.state = self.lin(x).detach()
        return self.state


@pytest.mark.parametrize(
    "clone",
    [copy.copy, copy.deepcopy, lambda m: pickle.loads(pickle.dumps(m))],
    ids=["copy", "deepcopy", "pickle"],
)
def test_a_copy_moves_what_the_original_moves(clone: Callable[[nn.Module], nn.Module]) -> None:
    """A copy carries what the original carries, and nothing more: the tensor stored at run time
    moves on both, the one stored around __setattr__ on neither."""
    original = Stores()
    original(torch.ones(1, 2))
    copied = clone(original)
    for module in (original, copied):
        module.double()
        assert module.state.dtype == torch.float64
        assert module.raw.dtype == torch.float32
    assert autoreg.find_unregistered(copied)[0].path == "raw"  # and the audit says so


class Recurrent(autoreg.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.table = torch.ones(2)  # an auto-registered buffer: autoreg keeps a role for it

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.h = self.lin(x).detach()
        return self.h


def carried_names(module: nn.Module) -> set[str]:
    return set(vars(module).get("_autoreg_carrying", ()))


def test_a_shallow_copy_shares_nothing_of_autoregs() -> None:
    """``copy.copy`` shares nn.Module's registries, as for any module, but not autoreg's record:
    what one of the two forgets, the other still holds and moves."""
    original = Recurrent()
    original(torch.ones(1, 2))
    shallow = copy.copy(original)
    shallow.h = None
    shallow.extra = torch.zeros(1)  # a name the copy carries, the original never had
    original.double()
    assert original.h.dtype == torch.float64
    assert shallow.h is None
    assert shallow.double().extra.dtype == torch.float64
    assert "extra" not in carried_names(original)  # the names each has carried are its own


def test_a_copy_made_during_construction_is_not_constructing() -> None:
    """A copy made inside __init__ is built already: tensors assigned to it later are runtime
    state (carried), never buffers."""

    class Snapshotting(autoreg.Module):
        def __init__(self) -> None:
            super().__init__()
            self.table = torch.ones(2)
            self.snapshot = copy.deepcopy(self)  # a module: a submodule of the original

    snapshot = Snapshotting().snapshot
    snapshot.later = torch.zeros(1)
    assert "later" not in snapshot._buffers
    assert snapshot.double().later.dtype == torch.float64
