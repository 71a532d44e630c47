"""Micro-benchmarks: the assignment paths and module-wide operations, autoreg against nn.Module.

Each case is a statement timed with ``torch.utils.benchmark.Timer`` on a plain ``nn.Module`` setup
and on the equivalent ``autoreg.Module`` setup, side by side in the same process: each round times
plain, autoreg, autoreg, plain (then the reverse order), and the ratio of the two sums is that
round's ratio. The result is the median ratio over the rounds, with min and max. The clock is the
process's CPU time. Micro cases run on the CPU whatever the device: they measure Python-level
overhead, not kernels.
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

__all__ = ["CASES", "MicroCase", "MicroResult", "run_micro"]

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
        "buffer_reassign", "m.scale = t (existing buffer)", "m.scale = t", _instance,
        PlainBlock, AutoBlock, 1.05,
    ),
    MicroCase(
        "first_registration", "construct: 4 new tensor names", "cls()", _class,
        PlainFour, AutoFour,
    ),
    MicroCase(
        "construct_empty", "construct: empty module", "cls()", _class, PlainEmpty, AutoEmpty
    ),
    MicroCase(
        "runtime_update", "m.state = t (runtime tensor)", "m.state = t", _carrying,
        PlainBlock, AutoBlock,
    ),
    MicroCase(
        "buffer_read", "m.scale (read a buffer)", "m.scale", _instance, PlainBlock, AutoBlock
    ),
    MicroCase(
        "construct_2000", f"construct {TOWER_BLOCKS} blocks", "cls()", _class,
        PlainTower, AutoTower, 1.10, heavy=True,
    ),
    MicroCase(
        "to_roundtrip", f".to(float64).to(float32), {TOWER_BLOCKS} blocks",
        "m.to(torch.float64).to(torch.float32)", _tower, PlainTower, AutoTower, 1.03, heavy=True,
    ),
    MicroCase(
        "to_noop", f".to(float32) no-op, {TOWER_BLOCKS} blocks", "m.to(torch.float32)", _tower,
        PlainTower, AutoTower, 1.03, heavy=True,
    ),
)  # fmt: skip


@dataclass
class MicroResult:
    """One case: autoreg / nn.Module over the rounds, and each side's median time per statement."""

    name: str
    label: str
    plain_ns: float
    auto_ns: float
    ratio_median: float
    ratio_min: float
    ratio_max: float
    rounds: int
    number: int
    limit: float | None


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
            f"  {case.label:<40} ratio {result.ratio_median:.3f} "
            f"[{result.ratio_min:.3f}, {result.ratio_max:.3f}]  nn.Module "
            f"{_fmt_ns(result.plain_ns)}  autoreg {_fmt_ns(result.auto_ns)}"
        )
    return results


def _run_case(case: MicroCase, rounds: int, block_s: float) -> MicroResult:
    timers = {
        side: torch_benchmark.Timer(
            stmt=case.stmt, globals=case.setup(cls), timer=time.process_time, num_threads=1
        )
        for side, cls in (("plain", case.plain), ("auto", case.auto))
    }
    number = _calibrate(timers["plain"], block_s)
    times: dict[str, list[float]] = {"plain": [], "auto": []}
    ratios = []
    for round_index in range(rounds):
        first, second = ("plain", "auto") if round_index % 2 == 0 else ("auto", "plain")
        spent = {"plain": 0.0, "auto": 0.0}
        for side in (first, second, second, first):
            spent[side] += timers[side].timeit(number).median
        for side in spent:
            times[side].append(spent[side] / 2)
        ratios.append(spent["auto"] / spent["plain"])
    return MicroResult(
        name=case.name,
        label=case.label,
        plain_ns=statistics.median(times["plain"]) * 1e9,
        auto_ns=statistics.median(times["auto"]) * 1e9,
        ratio_median=statistics.median(ratios),
        ratio_min=min(ratios),
        ratio_max=max(ratios),
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
