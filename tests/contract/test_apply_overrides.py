"""A carried value is converted where and when nn.Module converts a buffer held in the same place.

nn.Module's ``_apply`` converts a module's children, then its parameters, then its buffers; an
``_apply`` override around ``super()._apply(fn)`` sees the buffers unconverted before it and
converted after it. What an autoreg module carries is converted in that same ``_apply``, right
after its buffers, so every override sees, and leaves, what it would on the twin (the same
classes with ``register_buffer``), under any root: the module alone, an autoreg root, a plain
``nn.Sequential`` or a plain wrapper. (Issue 29 item 7: the carried values of every module under
an autoreg root were converted only when the root's whole call ended, after every override ran.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

import autoreg


class AutoNorm(autoreg.Module):
    """Keeps running statistics written in ``forward``: carried."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.running: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.running = x.detach().mean(0)
        return self.lin(x)


class TwinNorm(nn.Module):
    """AutoNorm's twin: the statistics are a non-persistent buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.register_buffer("running", None, persistent=False)

    forward = AutoNorm.forward


class KeepsFloat32:
    """Keeps its statistics in float32 whatever the model's dtype, the usual way: converts them
    back after ``super()._apply``, and notes what it saw before and after."""

    seen: list[torch.dtype]

    def _apply(self, fn: Any, recurse: bool = True) -> Any:
        self.__dict__.setdefault("seen", []).append(self.running.dtype)  # type: ignore[attr-defined]
        out = super()._apply(fn, recurse)  # type: ignore[misc]
        self.seen.append(self.running.dtype)  # type: ignore[attr-defined]
        self.running = self.running.float()  # type: ignore[attr-defined]
        return out


class AutoKeeps(KeepsFloat32, AutoNorm):
    pass


class TwinKeeps(KeepsFloat32, TwinNorm):
    pass


class AutoHolder(autoreg.Module):
    def __init__(self, child: nn.Module) -> None:
        super().__init__()
        self.child = child


class PlainHolder(nn.Module):
    def __init__(self, child: nn.Module) -> None:
        super().__init__()
        self.child = child


ROOTS: dict[str, Callable[[nn.Module], nn.Module]] = {
    "alone": lambda m: m,
    "autoreg root": AutoHolder,
    "nn.Sequential": nn.Sequential,
    "plain wrapper": PlainHolder,
    "autoreg over plain": lambda m: AutoHolder(PlainHolder(m)),
}
MOVES: dict[str, Callable[[nn.Module], object]] = {
    "half": lambda m: m.half(),
    "to(float64)": lambda m: m.to(torch.float64),
    "to(meta)": lambda m: m.to("meta"),
    "to_empty(meta)": lambda m: m.to_empty(device="meta"),
}


def _stepped(cls: type[nn.Module]) -> nn.Module:
    torch.manual_seed(0)
    module = cls()
    module(torch.randn(3, 2))
    return module


@pytest.mark.parametrize("move", MOVES.values(), ids=MOVES.keys())
@pytest.mark.parametrize("root", ROOTS.values(), ids=ROOTS.keys())
def test_an_override_after_super_sees_and_keeps_what_it_would_on_the_twin(
    root: Callable[[nn.Module], nn.Module], move: Callable[[nn.Module], object]
) -> None:
    """The override that keeps a norm in float32 ends with it in float32, as the twin's buffer;
    under an autoreg root it ended in float16 (converted after the override ran)."""
    auto, twin = _stepped(AutoKeeps), _stepped(TwinKeeps)
    move(root(auto))
    move(root(twin))
    assert auto.seen == twin.seen
    assert auto.running.dtype == twin.running.dtype == torch.float32
    assert auto.running.device == twin.running.device
    if not auto.running.is_meta:
        assert torch.equal(auto.running, twin.running)


class WatchesChild:
    """A parent whose override reads its child's state after ``super()._apply``."""

    child: nn.Module
    seen: list[torch.dtype]

    def _apply(self, fn: Any, recurse: bool = True) -> Any:
        out = super()._apply(fn, recurse)  # type: ignore[misc]
        self.__dict__.setdefault("seen", []).append(self.child.running.dtype)
        return out


class Watches(WatchesChild, PlainHolder):
    pass


class AutoWatches(WatchesChild, AutoHolder):
    pass


@pytest.mark.parametrize("parent", [Watches, AutoWatches], ids=["plain parent", "autoreg parent"])
@pytest.mark.parametrize("root", ROOTS.values(), ids=ROOTS.keys())
def test_a_parent_override_sees_its_child_converted_as_on_the_twin(
    parent: type[nn.Module], root: Callable[[nn.Module], nn.Module]
) -> None:
    auto, twin = parent(_stepped(AutoNorm)), parent(_stepped(TwinNorm))
    root(auto).half()
    root(twin).half()
    assert auto.seen == twin.seen == [torch.float16]


class KeepsEma(nn.Module):
    """Keeps an EMA copy of a model outside its children, converted by its own ``_apply`` before
    its own work (as EMA helpers do), and reads it right after."""

    def __init__(self, model: nn.Module, ema: nn.Module) -> None:
        super().__init__()
        self.model = model
        self.__dict__["ema"] = ema  # not a submodule: nn.Module's recursion never reaches it
        self.seen: list[torch.dtype] = []

    def _apply(self, fn: Any, recurse: bool = True) -> Any:
        self.ema._apply(fn)
        self.seen.append(self.ema.running.dtype)
        return super()._apply(fn, recurse)


@pytest.mark.parametrize("root", ROOTS.values(), ids=ROOTS.keys())
def test_an_ema_copy_converted_by_an_override_is_converted_there(
    root: Callable[[nn.Module], nn.Module],
) -> None:
    auto = KeepsEma(_stepped(AutoNorm), _stepped(AutoNorm))
    twin = KeepsEma(_stepped(TwinNorm), _stepped(TwinNorm))
    root(auto).double()
    root(twin).double()
    assert auto.seen == twin.seen == [torch.float64]
    assert auto.ema.running.dtype == auto.model.running.dtype == torch.float64


class ConvertsItsOwn:
    """Converts its state itself before ``super()._apply`` (a hand-written ``_apply`` written for
    a plain attribute, which nn.Module never moved), and notes what it saw."""

    def _apply(self, fn: Any, recurse: bool = True) -> Any:
        self.running = fn(self.running)  # type: ignore[attr-defined]
        self.__dict__.setdefault("seen", []).append(self.running.dtype)  # type: ignore[attr-defined]
        return super()._apply(fn, recurse)  # type: ignore[misc]


class AutoConverts(ConvertsItsOwn, AutoNorm):
    pass


class TwinConverts(ConvertsItsOwn, TwinNorm):
    pass


@pytest.mark.parametrize("move", MOVES.values(), ids=MOVES.keys())
@pytest.mark.parametrize("root", ROOTS.values(), ids=ROOTS.keys())
def test_a_hand_written_apply_that_moves_the_state_itself_ends_as_the_twin(
    root: Callable[[nn.Module], nn.Module], move: Callable[[nn.Module], object]
) -> None:
    """Converted by the override, then where nn.Module converts the twin's buffer: the result is
    the twin's (and, for every conversion .to() makes, the original's: they are idempotent)."""
    auto, twin = _stepped(AutoConverts), _stepped(TwinConverts)
    move(root(auto))
    move(root(twin))
    assert auto.seen == twin.seen
    assert (auto.running.dtype, auto.running.device) == (twin.running.dtype, twin.running.device)
    if not auto.running.is_meta:
        assert torch.equal(auto.running, twin.running)


def test_recurse_false_converts_the_module_s_own_state_only_as_for_buffers() -> None:
    auto, twin = AutoHolder(_stepped(AutoNorm)), PlainHolder(_stepped(TwinNorm))
    auto.state = torch.zeros(2)  # the root's own: carried
    twin.register_buffer("state", torch.zeros(2), persistent=False)
    for model in (auto, twin):
        model._apply(lambda t: t.double(), recurse=False)
    assert auto.state.dtype == twin.state.dtype == torch.float64
    assert auto.child.running.dtype == twin.child.running.dtype == torch.float32


# --- a class that already moves its plain tensors itself (issue 28: "the same kind") ----------


class MovesItsTable:
    """Written for nn.Module, where ``table`` is a plain attribute: its ``_apply`` moves it by
    hand, after nn.Module's work, as ``.to()`` would. (No annotations: one would declare the
    name, row 9.)"""

    def setup(self) -> None:
        self.lin = nn.Linear(2, 2)
        self.table = torch.linspace(0.1, 0.9, 2)

    def _apply(self, fn: Any, recurse: bool = True) -> Any:
        out = super()._apply(fn, recurse)  # type: ignore[misc]
        self.table = fn(self.table)
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) * self.table  # type: ignore[operator]


class OriginalMover(MovesItsTable, nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.setup()


class AutoMover(MovesItsTable, autoreg.Module):
    def __init__(self) -> None:
        super().__init__()
        self.setup()


@pytest.mark.parametrize("move", MOVES.values(), ids=MOVES.keys())
@pytest.mark.parametrize("root", ROOTS.values(), ids=ROOTS.keys())
def test_a_class_that_moves_its_own_tensor_gives_the_originals_result(
    root: Callable[[nn.Module], nn.Module], move: Callable[[nn.Module], object]
) -> None:
    """The table is now a buffer that nn.Module converts, then the override converts it again:
    every conversion .to() makes is idempotent, so the result is the original's."""
    torch.manual_seed(0)
    original = OriginalMover()
    torch.manual_seed(0)
    migrated = AutoMover()
    move(root(original))
    move(root(migrated))
    table = migrated.table
    assert (table.dtype, table.device) == (original.table.dtype, original.table.device)
    if not table.is_meta:
        assert torch.equal(table, original.table)
        x = torch.ones(1, 2, dtype=table.dtype)
        assert torch.equal(migrated(x), original(x))


class KeepsItsTableInFloat32:
    """The override moves the table to the weight's device and keeps it in float32 on purpose."""

    setup = MovesItsTable.setup

    def _apply(self, fn: Any, recurse: bool = True) -> Any:
        out = super()._apply(fn, recurse)  # type: ignore[misc]
        self.table = self.table.to(self.lin.weight.device, torch.float32)  # type: ignore[attr-defined]
        return out


class OriginalKeeper(KeepsItsTableInFloat32, nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.setup()


class AutoKeeper(KeepsItsTableInFloat32, autoreg.Module):
    def __init__(self) -> None:
        super().__init__()
        self.setup()


class PlainKeeper(KeepsItsTableInFloat32, autoreg.Module):
    table: autoreg.Plain  # left to the override alone, as before migrating

    def __init__(self) -> None:
        super().__init__()
        self.setup()


def test_an_override_that_keeps_a_dtype_ends_with_it_and_plain_leaves_the_values_alone() -> None:
    """Migrated, the table is converted where the twin's buffer is, then the override's write
    wins: float32, as written, but rounded through float16 on the way, as on the twin. Declared
    ``autoreg.Plain`` it is the original's, bit for bit (contract, "What one .to() does")."""
    original, migrated, plain = OriginalKeeper(), AutoKeeper(), PlainKeeper()
    for model in (original, migrated, plain):
        model.half()
    assert original.table.dtype == migrated.table.dtype == plain.table.dtype == torch.float32
    assert torch.equal(plain.table, original.table)
    assert torch.equal(migrated.table, original.table.half().float())


@pytest.mark.parametrize("carried", [1, 2], ids=["one carried", "two carried"])
def test_a_name_carried_while_the_module_converts_is_stored_as_on_the_twin(carried: int) -> None:
    """A conversion with a side effect (a function given to ``_apply`` that stores new state on
    the module, as another thread could meanwhile): nn.Module converts and stores as usual.
    (The list of carried names grows in place: iterated while a name was added, it raised
    "dictionary changed size during iteration".)"""
    module = autoreg.Module()
    for index in range(carried):
        setattr(module, f"state{index}", torch.zeros(1))  # run time: carried

    def convert(tensor: torch.Tensor) -> torch.Tensor:
        if "late" not in vars(module):
            module.late = torch.zeros(1)  # a new carried name, in the middle of the conversion
        return tensor.double()

    module._apply(convert)
    assert [getattr(module, f"state{i}").dtype for i in range(carried)] == [torch.float64] * carried
    assert module.late.dtype == torch.float32  # stored after the list was read: as on the twin
    assert module.double().late.dtype == torch.float64  # and carried from then on
