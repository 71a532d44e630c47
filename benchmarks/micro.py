"""Micro-benchmarks: construction, assignment and ``.to()``, autoreg against hand-written code.

Each case is a statement timed on three setups: ``hand`` (an ``nn.Module`` written the careful way,
``register_buffer``), ``auto`` (the same class body on autoreg, tensors assigned bare) and
``control`` (a second ``hand`` setup: the noise floor), interleaved (``timing``). The classes are
written once (``_classes``, built by ``zoo.variants``). Micro cases run on the CPU whatever the
device: they measure Python-level overhead, not kernels. Targets: issue 14's and 29's, each case's
``limit`` (issue 29's for ``.to()``: one layer <= 1.05 with 100 or 2,000 modules alive, a whole
2,000-block model <= 1.02; the round trip keeps issue 14's 1.01).
"""

from __future__ import annotations

import gc
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn.utils import parametrize

import autoreg

from .timing import Row, block_size, cpu_block, interleave, make_timer
from .zoo import Bases, Factory, Store, variants

__all__ = ["CASES", "Case", "run_micro"]

TOWER_BLOCKS = 2000
_TENSORS = tuple(torch.ones(8) for _ in range(4))


def _classes(bases: Bases, store: Store) -> dict[str, type[nn.Module]]:
    """The cases' classes (``Case.cls``) on ``bases``, storing their tensors with ``store``."""

    class Block(*bases):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(8, 8)
            store(self, "scale", torch.ones(8))
            self.eps = 1e-5

    class Layer(Block):
        """A Block with a state slot (``hand``: a ``None`` buffer; ``auto``: carried)."""

        def __init__(self) -> None:
            super().__init__()
            store(self, "state", None)

    class Tower(*bases):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn.ModuleList(Block() for _ in range(TOWER_BLOCKS))

    class Four(*bases):
        """Construction that stores four new tensor names."""

        def __init__(self) -> None:
            super().__init__()
            a, b, c, d = _TENSORS
            store(self, "a", a)
            store(self, "b", b)
            store(self, "c", c)
            store(self, "d", d)

    class Empty(*bases):
        pass

    class MaskedLinear(*bases):
        """An ``nn.Linear`` subclass that stores a mask: the mixin goes on a ``torch.nn`` class."""

        def __init__(self) -> None:
            super().__init__(8, 8)
            store(self, "mask", torch.ones(8, 8))

    return {cls.__name__: cls for cls in (Block, Layer, Tower, Four, Empty, MaskedLinear)}


class SetattrBase(nn.Module):
    """A base that overrides ``__setattr__``, as frameworks' base classes do: a buffer update then
    reaches ``nn.Module.__setattr__`` through the base, which calls ``inspect.signature`` on every
    buffer write ("=== HACK ===" in torch's module.py) when the instance's ``register_buffer`` is
    not ``nn.Module``'s: an override costs there."""

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)


@dataclass(frozen=True)
class Case:
    """A statement run on a ``hand`` and an ``auto`` setup; ``limit`` is the target, if any."""

    name: str
    label: str
    stmt: str
    setup: Callable[[type[nn.Module]], dict[str, Any]]
    cls: str  # the class of ``_classes`` the setup makes
    base: type[nn.Module] = nn.Module
    limit: float | None = None
    heavy: bool = False  # whole-model operations: the heavy settings

    @property
    def factory(self) -> Factory:
        """``zoo.variants``' factory of ``cls``."""
        return lambda bases, store: _classes(bases, store)[self.cls]


def _instance(cls: type[nn.Module]) -> dict[str, Any]:
    return {"m": cls(), "t": torch.ones(8), "torch": torch}


def _carrying(cls: type[nn.Module]) -> dict[str, Any]:
    module = cls()
    module.state = torch.zeros(8)  # after construction: a plain attribute on nn.Module, carried
    return {"m": module, "t": torch.zeros(8)}


def _class(cls: type[nn.Module]) -> dict[str, Any]:
    return {"cls": cls}


class _Double(nn.Module):
    """A parametrization: ``register_parametrization`` gives its module a class of its own."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


def _parametrizing(cls: type[nn.Module]) -> dict[str, Any]:
    return {"m": cls(), "parametrize": parametrize, "p": _Double()}


def _alive(count: int) -> Callable[[type[nn.Module]], dict[str, Any]]:
    """``count`` layers alive, each with runtime state; the statement moves them one at a time."""

    def setup(cls: type[nn.Module]) -> dict[str, Any]:
        layers = [cls() for _ in range(count)]
        for layer in layers:
            layer.state = torch.zeros(8)
        return {"layers": itertools.cycle(layers), "torch": torch}

    return setup


_ROUND_TRIP = ".to(torch.float64).to(torch.float32)"
CASES: tuple[Case, ...] = (
    Case("setattr_int", "m.x = 1", "m.x = 1", _instance, "Block", limit=1.00),
    Case("buffer_reassign", "m.scale = t (buffer update)", "m.scale = t", _instance, "Block",
         limit=1.00),
    Case("buffer_reassign_setattr_base", "m.scale = t, base overrides __setattr__",
         "m.scale = t", _instance, "Block", SetattrBase, limit=1.00),
    Case("runtime_update", "m.state = t (runtime update)", "m.state = t", _carrying,
         "Block", limit=1.00),
    Case("first_registration", "construct: 4 new tensor names", "cls()", _class, "Four",
         limit=1.03),
    Case("construct_empty", "construct: empty module", "cls()", _class, "Empty", limit=1.03),
    Case("construct_mixin_linear", "construct: mixin on nn.Linear, + a mask", "cls()", _class,
         "MaskedLinear", nn.Linear, limit=1.05),
    Case("buffer_read", "m.scale (read a buffer)", "m.scale", _instance, "Block"),
    Case("parametrize", "register_parametrization + its removal, mixin on nn.Linear",
         'parametrize.register_parametrization(m, "weight", p); '
         'parametrize.remove_parametrizations(m, "weight", leave_parametrized=False)',
         _parametrizing, "MaskedLinear", nn.Linear, limit=1.20),
    Case("construct_2000", f"construct {TOWER_BLOCKS} blocks", "cls()", _class, "Tower",
         limit=1.03, heavy=True),
    Case("to_roundtrip", f".to(f64).to(f32), {TOWER_BLOCKS} blocks",
         f"m{_ROUND_TRIP}", _instance, "Tower", limit=1.01, heavy=True),
    Case("to_noop", f".to(f32) no-op, {TOWER_BLOCKS} blocks", "m.to(torch.float32)",
         _instance, "Tower", limit=1.02, heavy=True),
    *(Case(f"to_per_layer_{n}", f".to(f64).to(f32) per layer, {n} alive",
           f"next(layers){_ROUND_TRIP}", _alive(n), "Layer", limit=1.05) for n in (100, 2000)),
)  # fmt: skip


def run_micro(light: tuple[int, float], heavy: tuple[int, float], rows: list[Row]) -> None:
    """Run every case, ``(rounds, seconds per block)`` by weight; rows are appended as they come."""
    for case in CASES:
        rows.append(_run_case(case, *(heavy if case.heavy else light)))
        print(rows[-1].summary(), flush=True)
        gc.collect()  # the setups are gone: the next case starts with only its own modules alive


def _run_case(case: Case, rounds: int, block_s: float) -> Row:
    classes = variants(case.factory, case.base)
    timers = {
        side: make_timer(case.stmt, case.setup(classes["auto" if side == "auto" else "hand"]))
        for side in ("hand", "auto", "control")
    }
    numbers = {side: block_size(timer, block_s) for side, timer in timers.items()}
    blocks = {side: cpu_block(timer, numbers[side]) for side, timer in timers.items()}
    group = "micro, whole model" if case.heavy else "micro"
    row = Row("micro", group, case.label, case.limit, numbers=numbers)
    row.times = interleave(blocks, numbers, rounds, sync=lambda: None)
    alive = sum(issubclass(type(o), autoreg.AutoRegisterMixin) for o in gc.get_objects())
    row.checks.update(case=case.name, stmt=case.stmt, autoreg_modules_alive=alive)
    return row
