"""Forward speed: (c) ``autoreg.Module`` against (b) hand-registered ``nn.Module``, eager, compiled.

Both sides are built under the same seed (identical parameters, checked) and timed in one process,
interleaved (``timing``). Each configuration opens with an A/A row: (b) against a second,
separately built (and compiled) (b). Eager rounds of the small models are shared among a few
freshly built pairs: where one instance's tensors lie in memory must not decide the ratio.

Custom, because ``torch.utils.benchmark`` knows nothing of compilation: before timing, both sides
are called in lock-step until dynamo's frame count, inductor's CUDA-graph skips and the CUDA-graph
recordings stop changing; a row whose counters differ between the sides, or change while timed,
fails (its timing would include compiling or recording). The FX-graph and AOT-autograd caches are
off, so that (c) does not reuse (b)'s graph.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import gc
import sys
import time
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import torch
from torch import nn
from torch.utils import _pytree as pytree

import autoreg

from .timing import Row, block_size, cpu_block, cuda_block, interleave, make_timer
from .zoo import LARGE, MODELS, SPECS, Inputs, ModelSpec

__all__ = ["COUNTERS", "Config", "configs_for", "run_forward"]

LIMIT = 1.01  # (c) / (b): autoreg costs nothing in forward
CPU_BATCH, GPU_BATCH, TINY_BATCH = 32, 256, 4
LAYER_BATCH = {"cuda": 8, "cpu": 2}
EAGER_INSTANCE_SETS = 3
WARMUP_QUIET_CALLS = 3  # lock-step calls in a row with no counter change end the warm-up
WARMUP_MAX_CALLS = 40
COUNTERS = ("dynamo_frames", "cudagraph_skips", "cudagraph_recordings")
COMPILED_SUBSET = ("TransformerBlock", "RecurrentCell", "NestedModel")
_RECORDINGS = [0]  # CUDA-graph recordings in this process (_counting_cudagraph_recordings)


@dataclass(frozen=True)
class Config:
    """One way of running forward: eager or compiled, at one batch size and dtype."""

    mode: str  # "eager", "compile" or "reduce-overhead"
    batch: int
    dtype: torch.dtype
    models: tuple[str, ...]  # zoo names; the first is also the A/A control

    @property
    def label(self) -> str:
        return f"{self.mode} b{self.batch} {str(self.dtype).removeprefix('torch.')}"


def configs_for(device: str, plan: str, quick: bool) -> list[Config]:
    """What to time for ``plan`` ("cpu" or "gpu") on ``device``; ``quick``: eager only. Compiled
    modes run a subset (compiling costs seconds per graph and side); the GPU plan on a CPU runs at
    tiny sizes, so that the code paths a GPU run takes run in the test suite."""
    every = tuple(spec.name for spec in MODELS)
    if plan == "cpu":
        configs = [Config("eager", batch, torch.float32, every) for batch in (1, CPU_BATCH)]
        if not quick:
            configs.append(Config("compile", 1, torch.float32, every))
            subset = ("NormalizedCNN", *COMPILED_SUBSET)
            configs.append(Config("compile", CPU_BATCH, torch.float32, subset))
        return configs
    layer = (LARGE.name if device == "cuda" else "TransformerBlock",)
    large = GPU_BATCH if device == "cuda" else TINY_BATCH
    configs = [
        Config("eager", 1, torch.float32, every),
        Config("eager", large, torch.bfloat16, every),
        Config("eager", LAYER_BATCH[device], torch.bfloat16, layer),
    ]
    subset = COMPILED_SUBSET if device == "cuda" else ("RecurrentCell",)
    for mode in () if quick else ("reduce-overhead", "compile"):
        configs.append(Config(mode, 1, torch.float32, subset))
        configs.append(Config(mode, LAYER_BATCH[device], torch.bfloat16, layer))
    return configs


def run_forward(
    device: str,
    configs: Sequence[Config],
    timing: tuple[int, float],
    rows: list[Row],
    deadline: float | None = None,
) -> None:
    """Time every model of every configuration (``timing``: rounds, seconds per block) into
    ``rows`` as they come (an interrupt keeps them); errors are recorded, not raised, and the jobs
    not started by ``deadline`` (a ``time.perf_counter()`` value) as skipped."""
    with _counting_cudagraph_recordings() if device == "cuda" else contextlib.nullcontext():
        for config in configs:
            jobs = [(config.models[0], True)] + [(name, False) for name in config.models]
            aa: Row | None = None  # the configuration's A/A row: it runs first
            for index, (name, control) in enumerate(jobs):
                label = f"A/A {name}" if control else name
                row = Row("forward", config.label, label, None if control else LIMIT, control)
                if aa is not None:
                    row.noise = aa.ratio("control")  # each model is judged against its noise
                aa = aa or row
                rows.append(row)
                if deadline is not None and time.perf_counter() > deadline:
                    row.skipped = "time budget (--budget-s) spent before it started"
                    continue
                try:
                    _job(SPECS[name], config, device, timing, row, flip=index % 2 == 1)
                except Exception as error:  # noqa: BLE001 - reported in the table, the run goes on
                    row.error = f"{type(error).__name__}: {str(error).strip()[:300]}"
                finally:
                    if config.mode != "eager":
                        torch._dynamo.reset()
                    gc.collect()
                    if device == "cuda":
                        torch.cuda.empty_cache()
                print(row.summary(), flush=True)


class _Counters:
    """COUNTERS per side over the whole job, and how many changed while timed (or calibrating)."""

    def __init__(self, sides: tuple[str, str]) -> None:
        self.total = {side: dict.fromkeys(COUNTERS, 0) for side in sides}
        self.timed = dict.fromkeys(sides, 0)

    def count(self, side: str, call: Callable[[], Any], timed: bool = False) -> Any:
        before = _snapshot()
        output = call()
        for name, now, then in zip(COUNTERS, _snapshot(), before, strict=True):
            self.total[side][name] += now - then
            self.timed[side] += (now - then) * timed
        return output

    def changes(self) -> int:
        return sum(sum(counts.values()) for counts in self.total.values())

    def warm_up(self, calls: dict[str, Callable[[], Any]], sync: Callable[[], None]) -> int:
        """Call both sides in lock-step until no counter changes for a few calls in a row."""
        quiet = 0
        for made in range(1, WARMUP_MAX_CALLS + 1):
            before = self.changes()
            for side, call in calls.items():
                self.count(side, call)
            sync()
            quiet = 0 if self.changes() != before else quiet + 1
            if quiet == WARMUP_QUIET_CALLS:
                return made
        raise AssertionError(
            f"dynamo or CUDA-graph counters still changing after {WARMUP_MAX_CALLS} warm-up calls "
            "(a recompile or re-recording on every call): no steady state to time"
        )


def _job(
    spec: ModelSpec, config: Config, device: str, timing: tuple[int, float], row: Row, flip: bool
) -> None:
    """Time (b) against (c), or against a second (b) for the A/A row; fill ``row``."""
    rounds, block_s = timing
    sides = ("hand", row.other)
    eager, cuda = config.mode == "eager", device == "cuda"
    sync = torch.cuda.synchronize if cuda else lambda: None
    state = spec.state_written_in_forward if config.mode == "reduce-overhead" else ()
    sets = EAGER_INSTANCE_SETS if eager and spec is not LARGE else 1
    counters = _Counters(sides)
    checks = row.checks = {"model": spec.name, "instance_pairs": sets, "warmup_calls": 0}
    checks.update(counters=counters.total, changed_while_timed=counters.timed)
    checks["state_kept_outside_graph"] = state
    caches_off = contextlib.ExitStack()
    if not eager:  # FX-graph and AOT-autograd caches: (c) must not reuse the graph (b) compiled
        from torch._functorch import config as functorch_config
        from torch._inductor import config as inductor_config

        caches_off.enter_context(inductor_config.patch(fx_graph_cache=False))
        caches_off.enter_context(functorch_config.patch(enable_autograd_cache=False))
    with torch.no_grad(), caches_off:
        for index in range(sets):
            models, inputs = _instances(spec, sides, config, device)
            if index == 0 and not eager:
                checks["graph_breaks"] = {s: _graph_breaks(m, inputs) for s, m in models.items()}
            calls = {s: _caller(m, inputs, config.mode, state) for s, m in models.items()}
            for side in sides[::-1] if flip else sides:  # first calls: compilation
                before, start = counters.total[side]["dynamo_frames"], time.perf_counter()
                counters.count(side, calls[side])
                sync()
                if index == 0 and not eager:
                    checks.setdefault("compile_s", {})[side] = time.perf_counter() - start
                    compiles = counters.total[side]["dynamo_frames"] - before
                    checks.setdefault("compiles_first_call", {})[side] = compiles
            frames = {side: counters.total[side]["dynamo_frames"] for side in sides}
            checks["warmup_calls"] = max(checks["warmup_calls"], counters.warm_up(calls, sync))
            timers = {side: make_timer("call()", {"call": calls[side]}, device) for side in sides}
            if index == 0:
                steady = {side: _flat(counters.count(side, calls[side], True)) for side in sides}
                sync()
                checks["outputs"] = _compare(steady[sides[1]], steady["hand"])
                if eager and not row.control:
                    checks["autoreg_calls"] = _autoreg_calls(calls["auto"])
                for side in sides:
                    calibrate = functools.partial(block_size, timers[side], block_s)
                    row.numbers[side] = counters.count(side, calibrate, True)
            blocks = {}
            for side, number in row.numbers.items():  # CUDA: events read after the round's sync
                block = cuda_block(calls[side], number) if cuda else cpu_block(timers[side], number)
                blocks[side] = functools.partial(counters.count, side, block, True)
            share = rounds // sets + (index < rounds % sets)
            for side, values in interleave(blocks, row.numbers, share, sync).items():
                row.times.setdefault(side, []).extend(values)
            if not eager:
                checks["recompiles_after_first"] = {
                    side: counters.total[side]["dynamo_frames"] - frames[side] for side in sides
                }
    _judge(row, sides, device, config.mode)


def _judge(row: Row, sides: tuple[str, str], device: str, mode: str) -> None:
    """Record why the row fails, where it does: counters, outputs or graph breaks."""
    counters, (hand, other) = row.checks["counters"], sides
    row.failures += [f"{n} differ" for n in COUNTERS if counters[hand][n] != counters[other][n]]
    if any(row.checks["changed_while_timed"].values()):
        row.failures.append("counters changed while timed")
    if not row.checks["outputs"].startswith(("identical", "equal within")):
        row.failures.append(f"outputs {row.checks['outputs']}")
    breaks = row.checks.get("graph_breaks")
    if breaks and any(o > h for o, h in zip(breaks[other], breaks[hand], strict=True)):
        row.failures.append("more graph breaks")
    if device == "cuda" and mode == "reduce-overhead":
        for side, counts in counters.items():
            if not counts["cudagraph_recordings"] and not counts["cudagraph_skips"]:
                raise AssertionError(
                    f"{row.name} ({side}): no CUDA graph recorded and no skip counted under "
                    "reduce-overhead: the recording counter does not see this torch's recordings"
                )


def _snapshot() -> tuple[int, int, int]:
    """COUNTERS now: dynamo frames converted, CUDA-graph skips, CUDA-graph recordings."""
    from torch._dynamo.utils import counters

    frames, skips = counters["frames"]["total"], counters["inductor"]["cudagraph_skips"]
    return int(frames), int(skips), _RECORDINGS[0]


@contextlib.contextmanager
def _counting_cudagraph_recordings() -> Iterator[None]:
    """Count CUDA-graph recordings (inductor counts skips only), restored after: every recording,
    first or again, builds its graph in ``CUDAGraphTreeManager.record_function``."""
    from torch._inductor.cudagraph_trees import CUDAGraphTreeManager

    original = CUDAGraphTreeManager.record_function

    def record_function(self: Any, *args: Any, **kwargs: Any) -> Any:
        _RECORDINGS[0] += 1
        return original(self, *args, **kwargs)

    with mock.patch.object(CUDAGraphTreeManager, "record_function", record_function):
        yield


def _instances(
    spec: ModelSpec, sides: tuple[str, str], config: Config, device: str
) -> tuple[dict[str, nn.Module], Inputs]:
    """Fresh instances of both sides, checked identical, on the device and dtype; the inputs."""
    built = {side: spec.build("hand" if side == "control" else side) for side in sides}
    first, second = (list(model.parameters()) for model in built.values())
    if len(first) != len(second) or not all(map(torch.equal, first, second)):
        raise AssertionError(f"{spec.name}: the two sides do not hold identical parameters")
    models = {side: model.to(device, config.dtype) for side, model in built.items()}
    inputs = tuple(
        t.to(device, config.dtype) if t.is_floating_point() else t.to(device)
        for t in spec.make_inputs(config.batch)
    )
    return models, inputs


def _caller(
    model: nn.Module, inputs: Inputs, mode: str, state: tuple[str, ...]
) -> Callable[[], Any]:
    if mode == "eager":
        return lambda: model(*inputs)
    _own_forward(model)
    compiled = torch.compile(model, mode=None if mode == "compile" else mode)
    if mode == "compile":
        return lambda: compiled(*inputs)
    keep = _StateOutsideGraph(model, state)

    def call() -> Any:
        torch.compiler.cudagraph_mark_step_begin()
        output = compiled(*inputs)
        keep()
        return output

    return call


class _StateOutsideGraph:
    """After a reduce-overhead call: copy the state forward wrote into a tensor of the caller's own,
    allocated once, and assign that back. The next replay overwrites the CUDA-graph output forward
    assigned ("accessing tensor output of CUDAGraphs that has been overwritten"); a clone per call
    would move the graph's static input and re-record the graph every time."""

    def __init__(self, model: nn.Module, names: tuple[str, ...]) -> None:
        self.model, self.names = model, names
        self.slots: dict[str, torch.Tensor] = {}

    def __call__(self) -> None:
        for name in self.names:
            value = getattr(self.model, name)
            slot = self.slots.get(name)
            if value is None or value is slot:
                continue
            if slot is None or (slot.shape, slot.dtype) != (value.shape, value.dtype):
                slot = self.slots[name] = value.clone()
            else:
                slot.copy_(value)
            setattr(self.model, name, slot)


def _own_forward(model: nn.Module) -> None:
    """Give ``model`` a forward whose code object is its own, and so its own dynamo cache: the
    variants of a zoo model share their forward's code (one class body), and dynamo keeps compiled
    code per code object; compiled side by side, each call of one would first fail the guards of
    the other's entry, an order effect of about 1-2% that a model compiled alone never pays."""
    function = type(model).forward
    code = function.__code__.replace(co_name=f"{function.__name__}_{id(model):x}")
    twin = types.FunctionType(
        code, function.__globals__, function.__name__, function.__defaults__, function.__closure__
    )
    model.forward = types.MethodType(twin, model)


def _graph_breaks(model: nn.Module, inputs: Inputs) -> list[int]:
    """Graph breaks on a copy's first call and on its second (steady-state) call."""
    probe = copy.deepcopy(model)
    return [torch._dynamo.explain(probe)(*inputs).graph_break_count for _ in range(2)]


def _autoreg_calls(call: Callable[[], Any]) -> int:
    """Python functions of the autoreg package entered during one call: its whole overhead."""
    package = str(Path(autoreg.__file__).resolve().parent)
    entered = 0

    def profile(frame: types.FrameType, event: str, arg: object) -> None:
        nonlocal entered
        if event == "call" and frame.f_code.co_filename.startswith(package):
            entered += 1

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return entered


def _compare(outputs: list[torch.Tensor], reference: list[torch.Tensor]) -> str:
    """'identical', 'equal within tolerance' (CUDA only: nondeterministic kernels), or how not."""
    kinds = [(t.shape, t.dtype, t.device) for t in outputs]
    if kinds != [(t.shape, t.dtype, t.device) for t in reference]:
        return f"differ in shape, dtype or device: {kinds}"
    if all(map(torch.equal, outputs, reference)):
        return "identical (bitwise)"
    pairs = zip(outputs, reference, strict=True)
    worst = max((one.double() - other.double()).abs().max().item() for one, other in pairs)
    if outputs[0].is_cuda and all(map(torch.allclose, outputs, reference)):
        return f"equal within tolerance: max |diff| = {worst:.2g} (nondeterministic CUDA kernel)"
    return f"differ: max |diff| = {worst:.2g}"


def _flat(output: Any) -> list[torch.Tensor]:
    return [tensor.detach().clone() for tensor in pytree.tree_leaves(output)]
