"""Forward speed: (c) ``autoreg.Module`` against (b) hand-registered ``nn.Module``.

Both variants are built under the same seed (identical weights, checked), moved to the same device
and dtype, and timed in one process, interleaved: a round is a few cycles of blocks of calls in
the order A B B A (then B A A B), so that both variants see the same drift and the same
neighbours, and records the ratio (c) / (b) of the time each spent and the difference per call.
The result is the median over the rounds, with min and max. An A/A control ((b) against a second,
separately built and compiled (b) of the configuration's first model) shows the noise floor.

Clocks: on CPU, the process's CPU time (time spent descheduled by other processes does not count),
with one torch thread. On CUDA, CUDA events around each block of at least 10 ms, read after one
synchronize at the end of the round: no synchronize between blocks, so the host waiting for the
device is not timed as if it were the model's.

Before timing, both variants are called in lock-step (same number of calls, so a model that
carries state ends in the same state) until dynamo's frame count, inductor's CUDA-graph skips and
the CUDA-graph recordings stop changing; the counters are kept per variant for the whole run, and
a row whose counters differ between (b) and (c), or change while being timed, fails. One more
call of each, steady state, is compared: (c)'s outputs against (b)'s.

With ``torch.compile``, each variant's graph breaks are counted with ``torch._dynamo.explain`` on a
copy of the model (its first call and a steady-state call). The FX-graph and AOT-autograd caches
are off while compiling so that (c) does not reuse the graph inductor compiled for (b); compile
time is informational (the variant compiled second may reuse kernels built on disk).

Under ``mode="reduce-overhead"`` every call starts with
``torch.compiler.cudagraph_mark_step_begin()``, and a tensor that forward writes to the module
(``ModelSpec.state_written_in_forward``: the recurrent cell's state) is a CUDA-graph output that
the next replay overwrites. The caller does what a user must: after each call it copies the state
into a tensor of its own, at a fixed address (so that the graph's static input does not move and
the graph is not re-recorded), and assigns that tensor back. The copy is timed, for both variants
alike.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import gc
import math
import statistics
import sys
import time
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

import autoreg

from .move import compare_outputs, outputs_agree
from .walk import fingerprint
from .zoo import LAYERS, MODELS, ModelSpec, by_name

__all__ = [
    "COUNTERS",
    "ForwardResult",
    "SpeedConfig",
    "clock_label",
    "configs_for",
    "run_forward_speed",
]

CPU_BATCH = 32
GPU_BATCH = 256
TINY_BATCH = 4
LAYER_BATCH = {"cuda": 8, "cpu": 2}  # LayerBlock4096 on a GPU, LayerBlock64 on a CPU
PAIR = ("hand", "auto")
EAGER_INSTANCE_SETS = 3
WARMUP_QUIET_CALLS = 3  # lock-step calls in a row with no counter change end the warm-up
WARMUP_MAX_CALLS = 40
COUNTERS = ("dynamo_frames", "cudagraph_skips", "cudagraph_recordings")
COMPILED_SUBSET = ("TransformerBlock", "RecurrentCell", "NestedModel")
# On a CPU the GPU plan compiles the model whose state needs handling under CUDA graphs; the
# others take the same code path, and each compilation costs seconds of the test suite's minute.
TINY_COMPILED_SUBSET = ("RecurrentCell",)


@dataclass(frozen=True)
class SpeedConfig:
    """One way of running forward: eager or compiled, at one batch size and dtype."""

    mode: str  # "eager", "compile" or "reduce-overhead"
    batch: int
    dtype: torch.dtype
    models: tuple[str, ...]  # zoo names; the first is also the A/A control

    @property
    def label(self) -> str:
        return f"{self.mode} b{self.batch} {str(self.dtype).removeprefix('torch.')}"


@dataclass
class ForwardResult:
    """(c) against (b) for one model in one configuration."""

    model: str
    mode: str
    batch: int
    dtype: str
    rounds: int = 0
    calls_per_round: int = 0  # per variant
    instance_pairs: int = 0  # freshly built (b), (c) pairs the rounds were shared among
    hand_us: float = 0.0  # median over rounds of the mean call time
    auto_us: float = 0.0
    diff_us: float = float("nan")  # median over rounds of (c) - (b), per call
    ratio_median: float = float("nan")
    ratio_min: float = float("nan")
    ratio_max: float = float("nan")
    outputs_match: bool = False  # steady-state call: (c) against (b), see outputs
    outputs: str = ""  # move.compare_outputs's verdict
    autoreg_calls: int | None = None  # eager: Python calls into autoreg during one steady call
    warmup_calls: int = 0  # lock-step calls until the counters stopped changing
    counters: dict[str, dict[str, int]] = field(default_factory=dict)  # variant -> COUNTERS
    counter_changes_timed: dict[str, int] = field(default_factory=dict)  # while being timed
    compile_s: dict[str, float] = field(default_factory=dict)  # first call, compile included
    graph_breaks: dict[str, list[int]] = field(default_factory=dict)  # [first call, steady]
    compiles_first_call: dict[str, int] = field(default_factory=dict)
    recompiles_after_first: dict[str, int] = field(default_factory=dict)
    state_kept_outside_graph: tuple[str, ...] = ()
    control: bool = False  # the A/A control: (b) against another instance of (b)
    error: str | None = None
    skipped: str | None = None  # not run, and why

    @property
    def label(self) -> str:
        return f"{self.mode} b{self.batch} {self.dtype}"

    @property
    def counters_differ(self) -> list[str]:
        """The counters that differ between (b) and (c), or changed while timed."""
        if not self.counters:
            return []
        differ = [
            name
            for name in COUNTERS
            if self.counters["hand"].get(name) != self.counters["auto"].get(name)
        ]
        if any(self.counter_changes_timed.values()):
            differ.append("changed while timed")
        return differ


def configs_for(device: str, plan: str, quick: bool) -> list[SpeedConfig]:
    """What to time for ``plan`` ("cpu" or "gpu") on ``device``.

    Eager runs every small model at batch 1 in float32 and at a large batch. Compiling costs
    seconds per graph and variant, so compiled modes run a subset: the transformer block, the
    recurrent cell that writes its state in forward, the deepest module tree (and on CPU the CNN).
    The GPU plan adds the real-sized LayerBlock4096 in bfloat16 in every mode; on a GPU it
    compiles at batch 1 and with the layer only: the small models at a large batch are launch
    overhead again. The GPU plan on a CPU is the same configurations at tiny sizes
    (LayerBlock64, and only the recurrent cell among the small compiled models), so that the code
    paths a GPU run takes run in the test suite. ``--quick`` runs eager only.
    """
    every = tuple(spec.name for spec in MODELS)
    if plan == "cpu":
        configs = [
            SpeedConfig("eager", 1, torch.float32, every),
            SpeedConfig("eager", CPU_BATCH, torch.float32, every),
        ]
        if quick:
            return configs
        return [
            *configs,
            SpeedConfig("compile", 1, torch.float32, every),
            SpeedConfig("compile", CPU_BATCH, torch.float32, ("NormalizedCNN", *COMPILED_SUBSET)),
        ]
    layer = LAYERS[0] if device == "cuda" else LAYERS[1]
    large = GPU_BATCH if device == "cuda" else TINY_BATCH
    layer_config = ((layer.name,), LAYER_BATCH[device], torch.bfloat16)
    configs = [
        SpeedConfig("eager", 1, torch.float32, every),
        SpeedConfig("eager", large, torch.bfloat16, every),
        SpeedConfig("eager", layer_config[1], layer_config[2], layer_config[0]),
    ]
    if quick:
        return configs
    subset = COMPILED_SUBSET if device == "cuda" else TINY_COMPILED_SUBSET
    for mode in ("reduce-overhead", "compile"):
        configs += [
            SpeedConfig(mode, 1, torch.float32, subset),
            SpeedConfig(mode, layer_config[1], layer_config[2], layer_config[0]),
        ]
    return configs


def clock_label(device: str) -> str:
    """What the forward timings measure with, for the report."""
    if device == "cuda":
        return (
            "torch.cuda.Event elapsed time per block of >= 10 ms of calls, one synchronize per "
            "round (no synchronize between blocks)"
        )
    return "time.process_time per block of calls, one torch thread"


def run_forward_speed(
    device: str,
    configs: Sequence[SpeedConfig],
    rounds: int,
    round_s: float,
    sub_s: float,
    progress: Callable[[str], None] = lambda line: None,
    deadline: float | None = None,
    results: list[ForwardResult] | None = None,
) -> list[ForwardResult]:
    """Time every model of every configuration; errors are recorded, not raised.

    Each configuration starts with an A/A control on its first model, timed the same way: (b)
    against a second instance of (b), each compiled on its own in compiled modes. Its distance
    from 1.00 is the noise floor of the A/B ratios after it. Jobs not started by ``deadline``
    (a ``time.perf_counter()`` value) are recorded as skipped. Results are appended to
    ``results`` as they come (a new list if None): an interrupted run keeps what it measured.
    """
    results = [] if results is None else results
    timing = (rounds, round_s, sub_s)
    with _counting_cudagraph_recordings(device):
        for config in configs:
            jobs = [(config.models[0], "hand")] + [(name, "auto") for name in config.models]
            for index, (name, second) in enumerate(jobs):
                result = ForwardResult(
                    name, config.mode, config.batch, str(config.dtype).removeprefix("torch.")
                )
                result.control = second == "hand"
                if deadline is not None and time.perf_counter() > deadline:
                    result.skipped = "time budget (--budget-s) spent before it started"
                    results.append(result)
                    continue
                try:
                    _run_one(by_name(name), config, device, timing, result, index % 2 == 1, second)
                except Exception as error:  # noqa: BLE001 - reported in the table, the run goes on
                    result.error = f"{type(error).__name__}: {str(error).strip()[:300]}"
                finally:
                    if config.mode != "eager":
                        torch._dynamo.reset()
                    if device == "cuda":
                        torch.cuda.empty_cache()
                results.append(result)
                progress(_progress_line(result))
    return results


def _progress_line(result: ForwardResult) -> str:
    name = f"A/A {result.model}" if result.control else result.model
    if result.skipped:
        return f"  {result.label:<22} {name:<17} skipped: {result.skipped}"
    if result.error:
        return f"  {result.label:<22} {name:<17} error: {result.error}"
    extra = ""
    if result.compile_s:
        extra = "  compile " + " / ".join(f"{result.compile_s[v]:.1f}s" for v in PAIR)
        extra += "  counters " + " / ".join(
            ",".join(str(result.counters[v][c]) for c in COUNTERS) for v in PAIR
        )
    if result.counters_differ:
        extra += f"  COUNTERS DIFFER: {', '.join(result.counters_differ)}"
    if not result.outputs_match:
        extra += f"  OUTPUTS: {result.outputs}"
    return (
        f"  {result.label:<22} {name:<17} ratio {result.ratio_median:.3f} "
        f"[{result.ratio_min:.3f}, {result.ratio_max:.3f}]  (b) {result.hand_us:.1f} us  "
        f"(c) {result.auto_us:.1f} us  diff {result.diff_us:+.2f} us{extra}"
    )


def _run_one(
    spec: ModelSpec,
    config: SpeedConfig,
    device: str,
    timing: tuple[int, float, float],
    result: ForwardResult,
    auto_first: bool,
    second: str,
) -> None:
    """Time (b) against ``second``: (c), or (b) again for the A/A control.

    Eager rounds of the small models are shared among a few freshly built pairs of instances, so
    that where one instance's tensors happen to lie in memory does not decide the ratio; compiled
    models and the layer keep one pair (a new instance could recompile).
    """
    rounds, round_s, sub_s = timing
    eager = config.mode == "eager"
    sync = torch.cuda.synchronize if device == "cuda" else _no_sync
    clock: _Clock = _EventClock() if device == "cuda" else _ProcessClock()
    totals = {variant: dict.fromkeys(COUNTERS, 0) for variant in PAIR}
    timed_changes = dict.fromkeys(PAIR, 0)
    times: dict[str, list[float]] = {variant: [] for variant in PAIR}
    diffs: list[float] = []
    # A layer's time is its kernels', wherever its tensors lie; building one takes seconds.
    sets = EAGER_INSTANCE_SETS if eager and spec not in LAYERS else 1
    iters = cycles = 0
    state = spec.state_written_in_forward if config.mode == "reduce-overhead" else ()
    result.state_kept_outside_graph = state

    def counted(variant: str, call: Callable[[], Any]) -> tuple[Any, int]:
        before = _snapshot()
        output = call()
        changes = 0
        for name, now, then in zip(COUNTERS, _snapshot(), before, strict=True):
            totals[variant][name] += now - then
            changes += now - then
        return output, changes

    with torch.no_grad(), contextlib.nullcontext() if eager else _no_compile_caches():
        for index in range(sets):
            models, inputs = _instances(spec, second, config, device)
            if index == 0 and not eager:
                for variant, model in models.items():
                    result.graph_breaks[variant] = _graph_breaks(model, inputs)
            calls = {
                variant: _caller(model, inputs, config.mode, state)
                for variant, model in models.items()
            }
            del models

            # First calls (compilation happens here), in alternating order across models.
            for variant in PAIR[::-1] if auto_first else PAIR:
                frames = totals[variant]["dynamo_frames"]
                start = time.perf_counter()
                counted(variant, calls[variant])
                sync()
                if index == 0 and not eager:
                    result.compile_s[variant] = time.perf_counter() - start
                    result.compiles_first_call[variant] = totals[variant]["dynamo_frames"] - frames
            after_first = {variant: totals[variant]["dynamo_frames"] for variant in PAIR}
            warmup = _warm_up(calls, counted, sync)
            result.warmup_calls = max(result.warmup_calls, warmup)

            if index == 0:
                steady = {}
                for variant in PAIR:
                    output, changes = counted(variant, calls[variant])
                    steady[variant] = _flat(output)
                    timed_changes[variant] += changes
                sync()
                result.outputs = compare_outputs(steady["auto"], steady["hand"])
                result.outputs_match = outputs_agree(result.outputs)
                if eager:
                    result.autoreg_calls = _autoreg_calls(calls["auto"])
                calibrate = functools.partial(_per_call, calls["hand"], sync, sub_s)
                per_call, changes = counted("hand", calibrate)
                timed_changes["hand"] += changes
                iters = max(1, math.ceil(sub_s / per_call))
                cycles = max(1, round(round_s / (2 * iters * per_call)))
            share = rounds // sets + (index < rounds % sets)
            for round_index in range(share):
                pending: list[tuple[str, Callable[[], float]]] = []
                gc.disable()  # as timeit does; it runs between rounds
                try:
                    for cycle in range(cycles):
                        # A B B A, then B A A B: both see the same drift and the same neighbours.
                        a, b = PAIR if (round_index + cycle) % 2 == 0 else PAIR[::-1]
                        for variant in (a, b, b, a):
                            block = clock.block(calls[variant], iters)
                            seconds, changes = counted(variant, block)
                            pending.append((variant, seconds))
                            timed_changes[variant] += changes
                    sync()
                finally:
                    gc.enable()
                spent = dict.fromkeys(PAIR, 0.0)
                for variant, seconds in pending:
                    spent[variant] += seconds()
                per_call_s = {v: spent[v] / (2 * cycles * iters) for v in PAIR}
                for variant in PAIR:
                    times[variant].append(per_call_s[variant])
                diffs.append(per_call_s["auto"] - per_call_s["hand"])
            if not eager:
                result.recompiles_after_first = {
                    v: totals[v]["dynamo_frames"] - after_first[v] for v in PAIR
                }

    ratios = [a / h for h, a in zip(times["hand"], times["auto"], strict=True)]
    result.rounds, result.calls_per_round = rounds, 2 * cycles * iters
    result.instance_pairs = sets
    result.hand_us = statistics.median(times["hand"]) * 1e6
    result.auto_us = statistics.median(times["auto"]) * 1e6
    result.diff_us = statistics.median(diffs) * 1e6
    result.ratio_median = statistics.median(ratios)
    result.ratio_min, result.ratio_max = min(ratios), max(ratios)
    result.counters = totals
    result.counter_changes_timed = timed_changes
    if device == "cuda" and config.mode == "reduce-overhead":
        for variant, counts in totals.items():
            if not counts["cudagraph_recordings"] and not counts["cudagraph_skips"]:
                raise AssertionError(
                    f"{spec.name} ({variant}): no CUDA graph recorded and no skip counted under "
                    "reduce-overhead: the recording counter does not see this torch's recordings"
                )


def _warm_up(
    calls: dict[str, Callable[[], Any]],
    counted: Callable[[str, Callable[[], Any]], tuple[Any, int]],
    sync: Callable[[], None],
) -> int:
    """Call both variants in lock-step until no counter changes for a few calls in a row."""
    quiet = 0
    for made in range(1, WARMUP_MAX_CALLS + 1):
        changes = sum(counted(variant, calls[variant])[1] for variant in PAIR)
        sync()
        quiet = 0 if changes else quiet + 1
        if quiet == WARMUP_QUIET_CALLS:
            return made
    raise AssertionError(
        f"dynamo or CUDA-graph counters still changing after {WARMUP_MAX_CALLS} warm-up calls "
        "(a recompile or re-recording on every call): no steady state to time"
    )


class _Clock:
    """Times one block of calls; the seconds are read once the round has synchronized."""

    def block(self, call: Callable[[], Any], iters: int) -> Callable[[], Callable[[], float]]:
        raise NotImplementedError


class _ProcessClock(_Clock):
    def block(self, call: Callable[[], Any], iters: int) -> Callable[[], Callable[[], float]]:
        def run() -> Callable[[], float]:
            start = time.process_time()
            for _ in range(iters):
                call()
            spent = time.process_time() - start
            return lambda: spent

        return run


class _EventClock(_Clock):
    def block(self, call: Callable[[], Any], iters: int) -> Callable[[], Callable[[], float]]:
        def run() -> Callable[[], float]:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iters):
                call()
            end.record()
            return lambda: start.elapsed_time(end) / 1e3

        return run


def _snapshot() -> tuple[int, int, int]:
    """COUNTERS now: dynamo frames converted, CUDA-graph skips, CUDA-graph recordings."""
    from torch._dynamo.utils import counters

    return (
        int(counters["frames"]["total"]),
        int(counters["inductor"]["cudagraph_skips"]),
        _RECORDINGS[0],
    )


_RECORDINGS = [0]


@contextlib.contextmanager
def _counting_cudagraph_recordings(device: str) -> Iterator[None]:
    """Count CUDA-graph recordings (inductor counts skips, not recordings), restored after.

    Every recording, first or re-recording, builds its graph in
    ``CUDAGraphTreeManager.record_function``; wrapped here for the run.
    """
    if device != "cuda":
        yield  # no CUDA graphs on a CPU: recordings stay 0, skips are counted by inductor
        return
    from torch._inductor import cudagraph_trees

    manager = cudagraph_trees.CUDAGraphTreeManager
    original = manager.record_function

    def record_function(self: Any, *args: Any, **kwargs: Any) -> Any:
        _RECORDINGS[0] += 1
        return original(self, *args, **kwargs)

    manager.record_function = record_function  # type: ignore[method-assign]
    try:
        yield
    finally:
        manager.record_function = original  # type: ignore[method-assign]


def _instances(
    spec: ModelSpec, second: str, config: SpeedConfig, device: str
) -> tuple[dict[str, nn.Module], tuple[torch.Tensor, ...]]:
    """A fresh (b) and ``second``, checked identical, on the device and dtype, and the inputs."""
    built = {"hand": spec.build("hand"), "auto": spec.build(second)}
    if fingerprint(built["hand"]) != fingerprint(built["auto"]):
        raise AssertionError(f"{spec.name}: (b) and (c) do not hold identical weights")
    models = {variant: _prepare(model, device, config.dtype) for variant, model in built.items()}
    inputs = tuple(
        _prepare_input(tensor, device, config.dtype) for tensor in spec.make_inputs(config.batch)
    )
    return models, inputs


def _no_compile_caches() -> contextlib.ExitStack:
    """Inductor's FX-graph cache and the AOT-autograd cache off: each variant compiles its own."""
    import torch._functorch.config
    import torch._inductor.config

    stack = contextlib.ExitStack()
    stack.enter_context(torch._inductor.config.patch(fx_graph_cache=False))
    stack.enter_context(torch._functorch.config.patch(enable_autograd_cache=False))
    return stack


def _prepare(model: nn.Module, device: str, dtype: torch.dtype) -> nn.Module:
    return model.to(device=torch.device(device), dtype=dtype)


def _prepare_input(tensor: torch.Tensor, device: str, dtype: torch.dtype) -> torch.Tensor:
    tensor = tensor.to(torch.device(device))
    return tensor.to(dtype) if tensor.is_floating_point() else tensor


def _caller(
    model: nn.Module, inputs: tuple[torch.Tensor, ...], mode: str, state: tuple[str, ...]
) -> Callable[[], Any]:
    if mode == "eager":
        return lambda: model(*inputs)
    _own_forward(model)
    compiled = torch.compile(model, mode=None if mode == "compile" else mode)
    if mode == "reduce-overhead":
        keep = _StateOutsideGraph(model, state)

        def call() -> Any:
            torch.compiler.cudagraph_mark_step_begin()
            output = compiled(*inputs)
            keep()
            return output

        return call
    return lambda: compiled(*inputs)


class _StateOutsideGraph:
    """After a reduce-overhead call: copy state forward wrote into a tensor of the caller's own.

    Forward assigns a CUDA-graph output to the module; after the next
    ``cudagraph_mark_step_begin()`` the next replay overwrites it, and reading it is an error
    ("accessing tensor output of CUDAGraphs that has been overwritten"). Cloning it on every call
    would move the graph's static input and re-record the graph each time, so the state is copied
    into one tensor per name, allocated once, and that tensor is assigned back.
    """

    def __init__(self, model: nn.Module, names: tuple[str, ...]) -> None:
        self.model = model
        self.names = names
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
    """Give ``model`` a forward whose code object is its own, and so its own dynamo cache.

    (b) and (c) share their forward function (the same math), and dynamo keeps compiled code per
    code object: compiled side by side, each call of one variant would first fail the guards of
    the other's entry - an order effect of about 1-2% that a model compiled alone never pays.
    """
    function = type(model).forward
    code = function.__code__.replace(co_name=f"{function.__name__}_{id(model):x}")
    twin = types.FunctionType(
        code, function.__globals__, function.__name__, function.__defaults__, function.__closure__
    )
    model.forward = types.MethodType(twin, model)


def _graph_breaks(model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> list[int]:
    """Graph breaks on a copy's first call and on its second (steady-state) call."""
    probe = copy.deepcopy(model)
    counts = [torch._dynamo.explain(probe)(*inputs).graph_break_count for _ in range(2)]
    del probe
    return counts


def _per_call(call: Callable[[], Any], sync: Callable[[], None], span_s: float) -> float:
    """Wall seconds per call, from calls run for about ``span_s`` (at least 3)."""
    sync()
    start = time.perf_counter()
    count = 0
    while time.perf_counter() - start < span_s or count < 3:
        call()
        count += 1
    sync()
    return (time.perf_counter() - start) / count


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


def _no_sync() -> None:
    pass


def _flat(output: Any) -> list[torch.Tensor]:
    if isinstance(output, torch.Tensor):
        return [output.detach().clone()]
    return [tensor for item in output for tensor in _flat(item)]
