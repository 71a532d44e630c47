"""Interleaved timing on ``torch.utils.benchmark``, and one row of results.

``Timer`` times a block of calls (``timer=time.process_time``, one torch thread: time spent
descheduled by other processes does not count), ``Timer.blocked_autorange`` calibrates how many
calls fill a block, and ``Measurement`` holds each side's per-round times (median, IQR; ``Compare``
prints them). Custom, each where it is said why: the order (``interleave``), the A/A control
(``Row``) and CUDA events read once per round (``cuda_block``).
"""

from __future__ import annotations

import gc
import operator
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils.benchmark import Measurement, Timer
from torch.utils.benchmark.utils.common import TaskSpec

__all__ = ["Row", "block_size", "cpu_block", "cuda_block", "interleave", "make_timer", "ratio_cell"]

Block = Callable[[], Callable[[], float]]
"""Runs one block of calls; returns how to read its seconds (after the round synchronized)."""
SIDES = {"hand": "(b) nn.Module", "auto": "(c) autoreg", "control": "A/A: 2nd (b)"}


def make_timer(stmt: str, env: dict[str, Any], device: str = "cpu") -> Timer:
    """A ``Timer`` of ``stmt``: CPU time and one thread on a CPU; on CUDA, for calibration only."""
    if device == "cuda":  # wall time, synchronized around each reading
        return Timer(stmt, globals=env)
    return Timer(stmt, globals=env, timer=time.process_time, num_threads=1)


def block_size(timer: Timer, block_s: float) -> int:
    """How many runs of the statement last about ``block_s``."""
    per_run = timer.blocked_autorange(min_run_time=block_s).median
    return max(1, round(block_s / per_run))


def cpu_block(timer: Timer, number: int) -> Block:
    def run() -> Callable[[], float]:
        spent = timer.timeit(number).raw_times[0]
        return lambda: spent

    return run


def cuda_block(call: Callable[[], Any], number: int) -> Block:
    """CUDA events around ``number`` calls, read after the round's one synchronize. Custom:
    ``Timer``'s CUDA clock synchronizes at every reading, and a synchronize around each block of a
    few milliseconds pulled the ratios toward 1.00."""

    def run() -> Callable[[], float]:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(number):
            call()
        end.record()
        return lambda: start.elapsed_time(end) / 1e3

    return run


def interleave(
    blocks: dict[str, Block], numbers: dict[str, int], rounds: int, sync: Callable[[], None]
) -> dict[str, list[float]]:
    """Seconds per run of each side, one value per round, the sides in rotating palindromes
    (A B B A, then B A A B; with a control A B C C B A, then B C A A C B, ...).

    Custom: ``blocked_autorange`` times one statement after the other, and a drift between them
    (another process, frequency, the allocator) would read as a ratio; interleaved, every side
    sees the same drift and the same neighbours.
    """
    sides = list(blocks)
    per_run: dict[str, list[float]] = {side: [] for side in sides}
    for index in range(rounds):
        shift = index % len(sides)
        order = sides[shift:] + sides[:shift]
        gc.disable()  # as timeit does, for either clock; collected between rounds
        try:
            pending = [(side, blocks[side]()) for side in order + order[::-1]]
            sync()
        finally:
            gc.enable()
        for side in sides:
            spent = sum(read() for name, read in pending if name == side)
            per_run[side].append(spent / (2 * numbers[side]))
    return per_run


def ratio_cell(ratio: Sequence[float] | None) -> str:
    """Quartiles of a ratio as ``median [q1, q3]``."""
    return "" if ratio is None else f"{ratio[1]:.3f} [{ratio[0]:.3f}, {ratio[2]:.3f}]"


@dataclass
class Row:
    """One comparison of sides (``SIDES``; ``control`` is a second, separately built ``hand``).

    The A/A control is custom: ``Timer`` has none; the ratio control / hand is the noise floor.
    """

    part: str  # "forward" or "micro"
    group: str  # the forward configuration ("eager b1 float32"), or "micro"
    name: str
    limit: float | None = None  # the target: median auto / hand <= limit
    control: bool = False  # a forward A/A row: a second hand against hand, no auto
    times: dict[str, list[float]] = field(default_factory=dict)  # side -> per round, s per run
    numbers: dict[str, int] = field(default_factory=dict)  # side -> runs per block
    checks: dict[str, Any] = field(default_factory=dict)  # what else was measured
    failures: list[str] = field(default_factory=list)  # checks that failed: they void the row
    error: str | None = None
    skipped: str | None = None
    # The A/A ratio (q1, median, q3) of a control timed as a row of its own: a forward row's is
    # its configuration's first row. A row with a control side of its own (micro) uses that.
    noise: tuple[float, float, float] | None = None

    @property
    def other(self) -> str:
        """The side compared with ``hand``: ``control`` in a forward A/A row, else ``auto``."""
        return "control" if self.control else "auto"

    def measurement(self, side: str) -> Measurement:
        """``side``'s per-round times, for ``Compare``, the median and the IQR."""
        spec = TaskSpec(
            stmt=self.name, setup="", label=f"{self.part}: {self.group}", sub_label=self.name,
            description=SIDES[side], num_threads=1,
        )  # fmt: skip
        return Measurement(number_per_run=1, raw_times=self.times[side], task_spec=spec)

    def _per_round(self, side: str, combine: Callable[[float, float], float]) -> list[float]:
        """``combine(side's time, hand's time)`` per round; empty if not timed."""
        if side not in self.times or "hand" not in self.times:
            return []
        return [combine(s, h) for s, h in zip(self.times[side], self.times["hand"], strict=True)]

    def ratio(self, side: str = "auto") -> tuple[float, float, float] | None:
        """Quartiles (q1, median, q3) over the rounds of ``side`` / hand; None if not timed."""
        ratios = self._per_round(side, operator.truediv)
        if len(ratios) < 2:
            return (ratios[0],) * 3 if ratios else None
        q1, median, q3 = statistics.quantiles(ratios, n=4, method="inclusive")
        return q1, median, q3

    def diff(self, side: str = "auto") -> float | None:
        """Median over the rounds of ``side`` - hand, in seconds per run; None if not timed."""
        diffs = self._per_round(side, operator.sub)
        return statistics.median(diffs) if diffs else None

    def summary(self) -> str:
        """One line of progress."""
        head = f"  {f'{self.group}: {self.name}':<62}"
        if self.skipped or self.error:
            return f"{head} {self.status}: {self.skipped or self.error}"
        return f"{head} ratio {ratio_cell(self.ratio(self.other))}  {self.status}"

    def noise_floor(self) -> tuple[float, float, float] | None:
        """The A/A ratio this row is judged against: its own control's, else ``noise``."""
        return self.ratio("control") or self.noise

    @property
    def status(self) -> str:
        """``met`` when the median ratio is at most the limit (faster is met); ``within noise``
        when it is not, but the ratio's interquartile range holds the limit or the median is no
        farther above the limit than the A/A median is from 1.00; else ``MISSED``, or why the row
        has no verdict."""
        if self.skipped or self.error:
            return "skipped" if self.skipped else "error"
        if self.failures:
            return "FAILED: " + ", ".join(self.failures)
        ratio = self.ratio()
        if self.control or self.limit is None or ratio is None:
            return "noise floor" if self.control else ""
        if ratio[1] <= self.limit:
            return "met"
        floor = self.noise_floor()
        noise = abs(floor[1] - 1) if floor else 0.0
        if ratio[0] <= self.limit or ratio[1] - self.limit <= noise:
            return "within noise"
        return "MISSED"
