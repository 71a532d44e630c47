"""Micro-benchmarks: the assignment paths and module-wide operations, autoreg against nn.Module.

Each case is a statement timed with ``torch.utils.benchmark.Timer`` on a plain ``nn.Module`` setup,
on the equivalent ``autoreg.Module`` setup, and on a second, separately made plain setup (the A/A
control), side by side in the same process: each round times the three in a palindrome (plain,
autoreg, control, control, autoreg, plain, the starting side rotating from round to round), and
the ratios of the sums, autoreg / plain and control / plain, are that round's ratios. The result
is the median ratio over the rounds, with min and max; the control's distance from 1.00 is the
noise floor of that case. The clock is the process's CPU time (``time.process_time``), one torch
thread. Micro cases run on the CPU whatever the device: they measure Python-level overhead, not
kernels.

Targets (issue 11): autoreg costs no more than the hand-written ``nn.Module`` it replaces: every
construction and assignment ratio <= 1.00, the ``.to()`` round trip <= 1.01.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils.benchmark as torch_benchmark
from torch import nn

import autoreg

__all__ = ["CASES", "CLOCK", "MicroCase", "MicroResult", "run_micro"]

CLOCK = "time.process_time (torch.utils.benchmark.Timer), one torch thread"

TOWER_BLOCKS = 2000


# --- the modules measured --------------------------------------------------------------------
# "plain" is nn.Module written the careful way (register_buffer), "auto" is autoreg.Module with
# bare attributes: the same module state either way.


class PlainBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)
        self.register_buffer("scale", torch.ones(8), persistent=False)
        self.eps = 1e-5


class AutoBlock(autoreg.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)
        self.scale = torch.ones(8)
        self.eps = 1e-5


class PlainTower(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(PlainBlock() for _ in range(TOWER_BLOCKS))


class AutoTower(autoreg.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(AutoBlock() for _ in range(TOWER_BLOCKS))


_TENSORS = tuple(torch.ones(8) for _ in range(4))


class PlainFour(nn.Module):
    """Construction that registers four new buffer names."""

    def __init__(self) -> None:
        super().__init__()
        a, b, c, d = _TENSORS
        self.register_buffer("a", a, persistent=False)
        self.register_buffer("b", b, persistent=False)
        self.register_buffer("c", c, persistent=False)
        self.register_buffer("d", d, persistent=False)


class AutoFour(autoreg.Module):
    """Construction that assigns four new tensor names: autoreg registers them."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c, self.d = _TENSORS


class PlainEmpty(nn.Module):
    pass


class AutoEmpty(autoreg.Module):
    pass


class SetattrBase(nn.Module):
    """A base that overrides ``__setattr__``, as frameworks' base classes do.

    A buffer update then reaches ``nn.Module.__setattr__`` through the base, and that calls
    ``inspect.signature`` on every buffer write ("=== HACK ===" in torch's module.py) when the
    instance's ``register_buffer`` is not ``nn.Module``'s: an override costs there.
    """

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)


class PlainHookedBlock(SetattrBase):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)
        self.register_buffer("scale", torch.ones(8), persistent=False)
        self.eps = 1e-5


class AutoHookedBlock(autoreg.AutoRegisterMixin, SetattrBase):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)
        self.scale = torch.ones(8)
        self.eps = 1e-5


def _with_runtime_state(module: nn.Module) -> nn.Module:
    # Assigned after construction: nn.Module keeps it a plain attribute, autoreg carries it.
    module.state = torch.zeros(8)
    return module


# --- cases -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class MicroCase:
    """A statement run against a plain and an autoreg setup; ``limit`` is the target, if any."""

    name: str
    label: str
    stmt: str
    setup: Callable[[type[nn.Module]], dict[str, Any]]
    plain: type[nn.Module]
    auto: type[nn.Module]
    limit: float | None = None
    heavy: bool = False  # whole-model operations: fewer rounds in --quick


def _instance(cls: type[nn.Module]) -> dict[str, Any]:
    return {"m": cls(), "t": torch.ones(8)}


def _carrying(cls: type[nn.Module]) -> dict[str, Any]:
    return {"m": _with_runtime_state(cls()), "t": torch.zeros(8)}


def _class(cls: type[nn.Module]) -> dict[str, Any]:
    return {"cls": cls}


def _tower(cls: type[nn.Module]) -> dict[str, Any]:
    return {"m": cls(), "torch": torch}


CASES: tuple[MicroCase, ...] = (
    MicroCase("setattr_int", "m.x = 1", "m.x = 1", _instance, PlainBlock, AutoBlock, 1.00),
    MicroCase(
        "buffer_reassign", "m.scale = t (buffer update)", "m.scale = t", _instance,
        PlainBlock, AutoBlock, 1.00,
    ),
    MicroCase(
        "buffer_reassign_setattr_base", "m.scale = t, a base overrides __setattr__",
        "m.scale = t", _instance, PlainHookedBlock, AutoHookedBlock, 1.00,
    ),
    MicroCase(
        "runtime_update", "m.state = t (runtime tensor update)", "m.state = t", _carrying,
        PlainBlock, AutoBlock, 1.00,
    ),
    MicroCase(
        "first_registration", "construct: 4 new tensor names", "cls()", _class,
        PlainFour, AutoFour, 1.00,
    ),
    MicroCase(
        "construct_empty", "construct: empty module", "cls()", _class, PlainEmpty, AutoEmpty, 1.00
    ),
    MicroCase(
        "buffer_read", "m.scale (read a buffer)", "m.scale", _instance, PlainBlock, AutoBlock
    ),
    MicroCase(
        "construct_2000", f"construct {TOWER_BLOCKS} blocks", "cls()", _class,
        PlainTower, AutoTower, 1.00, heavy=True,
    ),
    MicroCase(
        "to_roundtrip", f".to(float64).to(float32), {TOWER_BLOCKS} blocks",
        "m.to(torch.float64).to(torch.float32)", _tower, PlainTower, AutoTower, 1.01, heavy=True,
    ),
    MicroCase(
        "to_noop", f".to(float32) no-op, {TOWER_BLOCKS} blocks", "m.to(torch.float32)", _tower,
        PlainTower, AutoTower, 1.03, heavy=True,
    ),
)  # fmt: skip


@dataclass
class MicroResult:
    """One case: autoreg / nn.Module and the A/A control over the rounds, median times."""

    name: str
    label: str
    plain_ns: float
    auto_ns: float
    ratio_median: float
    ratio_min: float
    ratio_max: float
    control_median: float  # a second plain setup / plain: the noise floor
    control_min: float
    control_max: float
    rounds: int
    number: int
    limit: float | None

    @property
    def met(self) -> bool | None:
        """Whether the median meets the target; None without one."""
        return None if self.limit is None else self.ratio_median <= self.limit


def run_micro(
    light: tuple[int, float],
    heavy: tuple[int, float],
    progress: Callable[[str], None] = lambda line: None,
) -> list[MicroResult]:
    """Run every case: ``(rounds, seconds per measurement)`` for light and for heavy cases."""
    results = []
    for case in CASES:
        rounds, block_s = heavy if case.heavy else light
        result = _run_case(case, rounds, block_s)
        results.append(result)
        progress(
            f"  {case.label:<42} ratio {result.ratio_median:.3f} "
            f"[{result.ratio_min:.3f}, {result.ratio_max:.3f}]  A/A {result.control_median:.3f}  "
            f"nn.Module {_fmt_ns(result.plain_ns)}  autoreg {_fmt_ns(result.auto_ns)}"
        )
    return results


def _run_case(case: MicroCase, rounds: int, block_s: float) -> MicroResult:
    timers = {
        side: torch_benchmark.Timer(
            stmt=case.stmt, globals=case.setup(cls), timer=time.process_time, num_threads=1
        )
        for side, cls in (("plain", case.plain), ("auto", case.auto), ("control", case.plain))
    }
    number = _calibrate(timers["plain"], block_s)
    sides = tuple(timers)
    times: dict[str, list[float]] = {side: [] for side in sides}
    ratios: dict[str, list[float]] = {"auto": [], "control": []}
    for round_index in range(rounds):
        shift = round_index % len(sides)
        order = sides[shift:] + sides[:shift]
        spent = dict.fromkeys(sides, 0.0)
        for side in order + order[::-1]:
            spent[side] += timers[side].timeit(number).median
        for side in sides:
            times[side].append(spent[side] / 2)
        for side in ratios:
            ratios[side].append(spent[side] / spent["plain"])
    return MicroResult(
        name=case.name,
        label=case.label,
        plain_ns=statistics.median(times["plain"]) * 1e9,
        auto_ns=statistics.median(times["auto"]) * 1e9,
        ratio_median=statistics.median(ratios["auto"]),
        ratio_min=min(ratios["auto"]),
        ratio_max=max(ratios["auto"]),
        control_median=statistics.median(ratios["control"]),
        control_min=min(ratios["control"]),
        control_max=max(ratios["control"]),
        rounds=rounds,
        number=number,
        limit=case.limit,
    )


def _calibrate(timer: torch_benchmark.Timer, block_s: float) -> int:
    """Statements per measurement: enough to fill ``block_s``."""
    number = 1
    while True:
        spent = timer.timeit(number).median * number
        if spent >= block_s or number >= 1 << 24:
            return number
        number = max(number * 2, int(number * block_s / max(spent, 1e-9) * 1.1))


def _fmt_ns(ns: float) -> str:
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e3:.2f} us" if ns >= 1e3 else f"{ns:.0f} ns"
