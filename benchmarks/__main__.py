"""``python -m benchmarks [--plan cpu|gpu] [--quick] [--out DIR]``: move check, forward and micro.

Plans (``--plan``, default: ``gpu`` where CUDA is available, else ``cpu``):

- ``cpu``: the ten small models, eager at batch 1 and 32 and under ``torch.compile``; the micro
  benchmarks. About 5 minutes on a 2-core CPU (a quarter of it torch.compile).
- ``gpu``: on CUDA, the ten small models eager at batch 1 (float32) and 256 (bfloat16), a
  4096-wide bfloat16 transformer layer (LayerBlock4096) eager, and under
  ``torch.compile(mode="reduce-overhead")`` (CUDA graphs) and ``torch.compile`` the transformer
  block, the recurrent cell, the nested model (batch 1) and the layer. ``benchmarks/gpu_run.sh``
  runs it in one call. With ``--device cpu`` the same configurations run at tiny sizes
  (LayerBlock64, batch 4, few short rounds) in well under a minute: the test suite runs that, so
  that a GPU run cannot fail on Python. What has no CPU equivalent is said so in the output: CUDA
  graphs (under reduce-overhead, inductor skips them on a CPU and counts the skip) and CUDA
  events (the CPU clock is ``time.process_time``).

``--quick`` skips compilation and uses fewer, shorter rounds. ``--models``, ``--modes`` and
``--parts`` narrow any run; ``--budget-s`` stops starting forward jobs after that many seconds
(the rest are reported as skipped); an interrupt (Ctrl-C, ``timeout -s INT``) stops the run and
still writes what was measured. The micro benchmarks always run on the CPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import sys
import time
from pathlib import Path

# The zoo's autoreg variants are written for the default mode: an AUTOREG_MODE=strict exported
# in the shell would turn their bare tensors into errors. Cleared before the zoo classes exist.
os.environ.pop("AUTOREG_MODE", None)

import torch

from . import micro, move, report, speed
from .machine import describe_machine, pick_device
from .zoo import LAYERS, MODELS, ModelSpec, by_name

RESULTS = Path(__file__).resolve().parent / "results"
PARTS = ("move", "speed", "micro")


@dataclasses.dataclass(frozen=True)
class Settings:
    """How long and how often to measure."""

    forward_rounds: int
    forward_round_s: float  # per variant and round
    forward_sub_block_s: float  # A B B A blocks of at least this long
    micro_rounds: int
    micro_heavy_rounds: int  # construction and .to() of the 2,000-block model
    micro_block_s: float
    micro_heavy_block_s: float


FULL = Settings(41, 0.020, 0.001, 15, 11, 0.020, 0.300)
QUICK = Settings(15, 0.003, 0.0005, 5, 3, 0.005, 0.005)
# On CUDA: blocks of >= 10 ms timed with CUDA events (a 1 ms block with a synchronize around it
# pulled the ratio toward 1.00), fewer rounds so that the whole plan fits one 9-minute call.
GPU = Settings(21, 0.040, 0.010, 15, 11, 0.020, 0.300)
# The GPU plan on a CPU: every code path, no meaningful timing.
TINY = Settings(2, 0.001, 0.0005, 2, 2, 0.001, 0.001)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks, print the table, write the result files; 0 unless something crashed."""
    args = _parser().parse_args(argv)
    if args.plot:
        return _plot_only(Path(args.plot))
    started = time.perf_counter()
    if not args.no_png:
        report.check_plotting()
    device = pick_device(args.device)
    plan = args.plan if args.plan != "auto" else "gpu" if device == "cuda" else "cpu"
    tiny = plan == "gpu" and device == "cpu"
    if device == "cpu":
        torch.set_num_threads(1)  # one core per measurement: less noise from whatever else runs
    machine = describe_machine(device)  # after the settings it records; the autoreg digest too
    settings = _settings(plan, device, args.quick)
    parts = set(args.parts.split(","))
    unknown = parts - set(PARTS)
    if unknown:
        raise SystemExit(f"--parts: unknown {sorted(unknown)}; choose from {', '.join(PARTS)}")
    deadline = started + args.budget_s if args.budget_s else None

    def progress(line: str) -> None:
        print(line, flush=True)

    configs = speed.configs_for(device, plan, args.quick)
    if args.modes:
        configs = [c for c in configs if c.mode in args.modes.split(",")]
    if args.models:
        names = set(args.models.split(","))
        configs = [
            dataclasses.replace(c, models=tuple(n for n in c.models if n in names)) for c in configs
        ]
        configs = [c for c in configs if c.models]
    models = _move_models(configs, args.models)
    for line in _cpu_stand_ins(device, configs):
        progress(line)

    move_results: list[move.MoveResult] = []
    forward: list[speed.ForwardResult] = []
    micro_results: list[micro.MicroResult] = []
    interrupted = ""
    try:
        if "move" in parts:
            progress("move check ...")
            move_results = move.run_move_check(device, models)
        if "speed" in parts:
            progress("forward speed ...")
            speed.run_forward_speed(
                device,
                configs,
                rounds=settings.forward_rounds,
                round_s=settings.forward_round_s,
                sub_s=settings.forward_sub_block_s,
                progress=progress,
                deadline=deadline,
                results=forward,
            )
        if "micro" in parts:
            progress("micro ...")
            micro_results = micro.run_micro(
                (settings.micro_rounds, settings.micro_block_s),
                (settings.micro_heavy_rounds, settings.micro_heavy_block_s),
                progress=progress,
            )
    except KeyboardInterrupt:
        interrupted = "interrupted: the parts after the last printed line did not run"
        progress(interrupted)

    kind = "quick" if args.quick else "tiny gpu plan on cpu" if tiny else f"{plan} plan"
    suffix = "-quick" if args.quick else "-gpu-plan" if tiny else ""
    result = report.build_report(
        kind=kind,
        machine=machine,
        settings={
            **dataclasses.asdict(settings),
            "plan": plan,
            "file_suffix": suffix,
            "budget_s": args.budget_s,
            "interrupted": interrupted,
            "clocks": {
                "move": "untimed",
                "forward": speed.clock_label(device),
                "micro": micro.CLOCK,
            },
            "command": shlex.join(["python", "-m", "benchmarks", *sys.argv[1:]])
            if argv is None
            else shlex.join(["python", "-m", "benchmarks", *argv]),
        },
        move=move_results,
        forward=forward,
        micro=micro_results,
        hand_notes={spec.name: spec.hand_note for spec in models if spec.hand_note},
        duration_s=time.perf_counter() - started,
    )
    paths = report.write_files(result, Path(args.out), png=not args.no_png)
    print()
    print(report.format_text(result))
    print()
    for path in paths.values():
        print(f"wrote {path}")
    return 0


def _settings(plan: str, device: str, quick: bool) -> Settings:
    if quick:
        return QUICK
    if plan == "gpu":
        return GPU if device == "cuda" else TINY
    return FULL


def _move_models(configs: list[speed.SpeedConfig], only: str) -> tuple[ModelSpec, ...]:
    """The move check's models: the small ones and the plan's layer (or those named)."""
    if only:
        return tuple(by_name(name) for name in only.split(","))
    layers = {name for c in configs for name in c.models} & {spec.name for spec in LAYERS}
    return (*MODELS, *(by_name(name) for name in sorted(layers)))


def _cpu_stand_ins(device: str, configs: list[speed.SpeedConfig]) -> list[str]:
    """What the GPU plan cannot do on a CPU, and what runs instead: printed, and so never silent."""
    if device == "cuda":
        return []
    lines = []
    if any(c.mode == "reduce-overhead" for c in configs):
        lines.append(
            "note: reduce-overhead on cpu: no CUDA graphs; inductor compiles without them and "
            "counts a cudagraph skip per graph; recordings stay 0; the state copy and "
            "cudagraph_mark_step_begin() run as on CUDA"
        )
    lines.append("note: forward clock on cpu: time.process_time per block (CUDA events need a GPU)")
    return lines


def _plot_only(path: Path) -> int:
    """``--plot FILE.json``: draw the PNG of a run written with ``--no-png``."""
    report.check_plotting()
    data = json.loads(path.read_text())
    target = path.with_suffix(".png")
    report.plot(data, target)
    print(f"wrote {target}")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--plan", choices=("auto", "cpu", "gpu"), default="auto")
    parser.add_argument("--quick", action="store_true", help="smoke run: < 1 min, no compile")
    parser.add_argument("--out", default=str(RESULTS), help="directory for the result files")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--models", default="", help="comma-separated zoo names (default: all)")
    parser.add_argument("--modes", default="", help="comma-separated forward modes (default: all)")
    parser.add_argument("--parts", default=",".join(PARTS), help="comma-separated parts to run")
    parser.add_argument(
        "--budget-s", type=float, default=0.0, help="start no forward job after this many seconds"
    )
    parser.add_argument("--no-png", action="store_true", help="write the JSON and markdown only")
    parser.add_argument("--plot", default="", help="draw the PNG of a results JSON, and exit")
    return parser


if __name__ == "__main__":
    sys.exit(main())
