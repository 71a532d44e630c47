"""Forward speed: (c) ``autoreg.Module`` against (b) hand-registered ``nn.Module``.

Both variants are built under the same seed (identical weights, checked), moved to the same device
and dtype, and timed in one process, interleaved: a round is a few cycles of short blocks of calls
in the order A B B A (then B A A B), so that both variants see the same drift and the same
neighbours, and records the ratio (c) / (b) of the time each spent. The result is the median
ratio over the rounds, with min and max. An A/A control ((b) against a second (b)) shows the noise
floor. On CPU the clock is the process's CPU time (time spent descheduled by other processes does
not count), with one torch thread; on CUDA, wall time with a synchronize around each block.

With ``torch.compile``, each variant's graph breaks are counted with ``torch._dynamo.explain`` on a
copy of the model (its first call and a steady-state call), and its compilations from dynamo's
frame counter: on the first call, and afterwards (recompiles). The FX-graph and AOT-autograd caches
are off while compiling so that (c) does not reuse the graph inductor compiled for (b); compile
time is informational (the variant compiled second may reuse C++ kernels built on disk).
"""

from __future__ import annotations

import contextlib
import copy
import gc
import statistics
import sys
import time
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

import autoreg

from .walk import fingerprint
from .zoo import MODELS, ModelSpec

__all__ = ["ForwardResult", "SpeedConfig", "configs_for", "run_forward_speed"]

CPU_BATCH = 32
GPU_BATCH = 256
PAIR = ("hand", "auto")
CONTROL_MODEL = "ToyModule"  # the smallest: its time is the most exposed to noise
EAGER_INSTANCE_SETS = 3


@dataclass(frozen=True)
class SpeedConfig:
    """One way of running forward: eager or compiled, at one batch size and dtype."""

    mode: str  # "eager", "compile" or "reduce-overhead"
    batch: int
    dtype: torch.dtype
    models: tuple[str, ...]  # zoo names

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
    ratio_median: float = float("nan")
    ratio_min: float = float("nan")
    ratio_max: float = float("nan")
    outputs_match: bool = False  # first call: (c) == (b), bitwise
    autoreg_calls: int | None = None  # eager: Python calls into autoreg during one steady call
    compile_s: dict[str, float] = field(default_factory=dict)  # first call, compile included
    graph_breaks: dict[str, list[int]] = field(default_factory=dict)  # [first call, steady]
    compiles_first_call: dict[str, int] = field(default_factory=dict)
    recompiles_after_first: dict[str, int] = field(default_factory=dict)
    control: bool = False  # the A/A control: (b) against another instance of (b)
    error: str | None = None

    @property
    def label(self) -> str:
        return f"{self.mode} b{self.batch} {self.dtype}"


def configs_for(device: str, quick: bool) -> list[SpeedConfig]:
    """What to time on ``device``, sized so that a full run fits in about 10 minutes.

    Eager runs every model everywhere. Compiling costs seconds per graph and variant, so compiled
    modes run every model at batch 1 on CPU and a subset elsewhere: the transformer block, the
    recurrent cell that writes its state in forward, the deepest module tree, and on CPU the CNN.
    ``--quick`` runs eager only.
    """
    every = tuple(spec.name for spec in MODELS)
    subset = ("TransformerBlock", "RecurrentCell", "NestedModel")
    sizes = (
        ((1, torch.float32), (GPU_BATCH, torch.bfloat16))
        if device == "cuda"
        else ((1, torch.float32), (CPU_BATCH, torch.float32))
    )
    configs = [SpeedConfig("eager", batch, dtype, every) for batch, dtype in sizes]
    if quick:
        return configs
    if device == "cuda":
        return configs + [
            SpeedConfig(mode, batch, dtype, subset)
            for mode in ("compile", "reduce-overhead")
            for batch, dtype in sizes
        ]
    (small, small_dtype), (large, large_dtype) = sizes
    return [
        *configs,
        SpeedConfig("compile", small, small_dtype, every),
        SpeedConfig("compile", large, large_dtype, ("NormalizedCNN", *subset)),
    ]


def run_forward_speed(
    device: str,
    configs: Sequence[SpeedConfig],
    rounds: int,
    round_s: float,
    sub_s: float,
    progress: Callable[[str], None] = lambda line: None,
) -> list[ForwardResult]:
    """Time every model of every configuration; errors are recorded, not raised.

    Each configuration starts with an A/A control on the smallest model, timed the same way: (b)
    against a second instance of (b) in eager mode, against itself when compiled. Its distance from
    1.00 is the noise floor of the A/B ratios after it.
    """
    results = []
    specs = {spec.name: spec for spec in MODELS}
    timing = (rounds, round_s, sub_s)
    for config in configs:
        jobs = [(CONTROL_MODEL, "hand")] + [(name, "auto") for name in config.models]
        for index, (name, second) in enumerate(jobs):
            result = ForwardResult(
                name, config.mode, config.batch, str(config.dtype).removeprefix("torch.")
            )
            result.control = second == "hand"
            try:
                _run_one(specs[name], config, device, timing, result, index % 2 == 1, second)
            except Exception as error:  # noqa: BLE001 - reported in the table, the run goes on
                result.error = f"{type(error).__name__}: {str(error).strip()[:200]}"
            finally:
                if config.mode != "eager":
                    torch._dynamo.reset()
            results.append(result)
            progress(_progress_line(result))
    return results


def _progress_line(result: ForwardResult) -> str:
    name = f"A/A {result.model}" if result.control else result.model
    if result.error:
        return f"  {result.label:<22} {name:<17} error: {result.error}"
    compile_s = ""
    if result.compile_s:
        compile_s = "  compile " + " / ".join(f"{result.compile_s[v]:.1f}s" for v in PAIR)
    return (
        f"  {result.label:<22} {name:<17} ratio {result.ratio_median:.3f} "
        f"[{result.ratio_min:.3f}, {result.ratio_max:.3f}]  (b) {result.hand_us:.1f} us  "
        f"(c) {result.auto_us:.1f} us{compile_s}"
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

    Eager rounds are shared among a few freshly built pairs of instances, so that where one
    instance's tensors happen to lie in memory does not decide the ratio; compiled models keep
    one pair (a new instance could recompile).
    """
    rounds, round_s, sub_s = timing
    eager = config.mode == "eager"
    sync = torch.cuda.synchronize if device == "cuda" else _no_sync
    clock = time.perf_counter if device == "cuda" else time.process_time
    count = _zero if eager else _frames
    times: dict[str, list[float]] = {variant: [] for variant in PAIR}
    recompiles = dict.fromkeys(PAIR, 0)
    sets = EAGER_INSTANCE_SETS if eager else 1
    iters = cycles = 0

    with torch.no_grad(), _nothing() if eager else _no_compile_caches():
        for index in range(sets):
            models, inputs = _instances(spec, second, config, device)
            if index == 0 and not eager:
                for variant, model in models.items():
                    result.graph_breaks[variant] = _graph_breaks(model, inputs)
            calls = {variant: _caller(m, inputs, config.mode) for variant, m in models.items()}
            if second == "hand" and not eager:
                # A compiled model runs faster on the instance (and wrapper) it was compiled for:
                # dynamo skips guards on objects it has seen. A second instance would measure
                # that, not noise: the compiled A/A control times one compiled model twice.
                calls["auto"] = calls["hand"]

            # First calls (compilation happens here), in alternating order across models.
            first: dict[str, list[torch.Tensor]] = {}
            for variant in PAIR[::-1] if auto_first else PAIR:
                frames = count()
                start = time.perf_counter()
                first[variant] = _flat(calls[variant]())
                sync()
                if index == 0 and not eager:
                    result.compile_s[variant] = time.perf_counter() - start
                    result.compiles_first_call[variant] = count() - frames
            if index == 0:
                result.outputs_match = all(
                    torch.equal(a, b) for a, b in zip(first["hand"], first["auto"], strict=True)
                )
            for variant in PAIR:  # warm-up: the recurrent model recompiles once its state exists
                frames = count()
                for _ in range(3):
                    calls[variant]()
                sync()
                recompiles[variant] += count() - frames

            if index == 0:
                if eager:
                    result.autoreg_calls = _autoreg_calls(calls["auto"])
                per_call = _per_call(calls["hand"], sync, clock, sub_s)
                iters = max(1, round(sub_s / per_call))
                cycles = max(2, round(round_s / (2 * iters * per_call)))
            share = rounds // sets + (index < rounds % sets)
            for round_index in range(share):
                spent = dict.fromkeys(PAIR, 0.0)
                gc.disable()  # as timeit does; it runs between rounds
                try:
                    for cycle in range(cycles):
                        # A B B A, then B A A B: both see the same drift and the same neighbours.
                        a, b = PAIR if (round_index + cycle) % 2 == 0 else PAIR[::-1]
                        for variant in (a, b, b, a):
                            frames = count()
                            spent[variant] += _block(calls[variant], sync, clock, iters)
                            recompiles[variant] += count() - frames
                finally:
                    gc.enable()
                for variant in PAIR:
                    times[variant].append(spent[variant] / (2 * cycles * iters))

    ratios = [a / h for h, a in zip(times["hand"], times["auto"], strict=True)]
    result.rounds, result.calls_per_round = rounds, 2 * cycles * iters
    result.instance_pairs = sets
    result.hand_us = statistics.median(times["hand"]) * 1e6
    result.auto_us = statistics.median(times["auto"]) * 1e6
    result.ratio_median = statistics.median(ratios)
    result.ratio_min, result.ratio_max = min(ratios), max(ratios)
    if not eager:
        result.recompiles_after_first = recompiles


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


def _nothing() -> contextlib.AbstractContextManager[None]:
    return contextlib.nullcontext()


def _prepare(model: nn.Module, device: str, dtype: torch.dtype) -> nn.Module:
    return model.to(device=torch.device(device), dtype=dtype)


def _prepare_input(tensor: torch.Tensor, device: str, dtype: torch.dtype) -> torch.Tensor:
    tensor = tensor.to(torch.device(device))
    return tensor.to(dtype) if tensor.is_floating_point() else tensor


def _caller(model: nn.Module, inputs: tuple[torch.Tensor, ...], mode: str) -> Callable[[], Any]:
    if mode == "eager":
        return lambda: model(*inputs)
    _own_forward(model)
    compiled = torch.compile(model, mode=None if mode == "compile" else mode)
    if mode == "reduce-overhead":

        def call() -> Any:
            torch.compiler.cudagraph_mark_step_begin()
            return compiled(*inputs)

        return call
    return lambda: compiled(*inputs)


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
    return [torch._dynamo.explain(probe)(*inputs).graph_break_count for _ in range(2)]


def _frames() -> int:
    """Frames dynamo has converted so far: one per compilation, first or recompile."""
    from torch._dynamo.utils import counters

    return int(counters["frames"]["total"])


def _per_call(
    call: Callable[[], Any], sync: Callable[[], None], clock: Callable[[], float], span_s: float
) -> float:
    """Seconds per call, from calls run for about ``span_s`` (at least 3)."""
    sync()
    start = clock()
    count = 0
    while clock() - start < span_s or count < 3:
        call()
        count += 1
    sync()
    return (clock() - start) / count


def _block(
    call: Callable[[], Any], sync: Callable[[], None], clock: Callable[[], float], iters: int
) -> float:
    """Seconds spent on ``iters`` calls."""
    sync()
    start = clock()
    for _ in range(iters):
        call()
    sync()
    return clock() - start


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


def _zero() -> int:
    return 0


def _no_sync() -> None:
    pass


def _flat(output: Any) -> list[torch.Tensor]:
    if isinstance(output, torch.Tensor):
        return [output.detach().clone()]
    return [tensor for item in output for tensor in _flat(item)]
