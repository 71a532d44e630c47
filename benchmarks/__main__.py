"""``python -m benchmarks [--quick] [--out DIR]``: run the move check, forward and micro benchmarks.

A full run on a 2-core CPU takes about 4 minutes (a third of it torch.compile); ``--quick`` skips
compilation, uses fewer and shorter rounds, and finishes in well under a minute. With CUDA the
device move is ``.to("cuda")``; forward is timed eager (every model), under ``torch.compile`` and
``torch.compile(mode="reduce-overhead")`` (three models), at batch 1 in float32 and at batch 256
in bfloat16. The micro benchmarks always run on the CPU; on a GPU machine with little time,
``--parts move,speed`` skips them. ``--models``, ``--modes`` and ``--parts`` narrow any run.
"""

from __future__ import annotations

import argparse
import dataclasses
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
from .zoo import MODELS, by_name

RESULTS = Path(__file__).resolve().parent / "results"
PARTS = ("move", "speed", "micro")


@dataclasses.dataclass(frozen=True)
class Settings:
    """How long and how often to measure."""

    forward_rounds: int
    forward_round_s: float  # per variant and round
    forward_sub_block_s: float  # A B B A blocks of about this long
    micro_rounds: int
    micro_heavy_rounds: int  # construction and .to() of the 2,000-block model
    micro_block_s: float
    micro_heavy_block_s: float


FULL = Settings(41, 0.020, 0.001, 15, 11, 0.020, 0.300)
QUICK = Settings(15, 0.003, 0.0005, 5, 3, 0.005, 0.005)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks, print the table, write the result files; 0 unless something crashed."""
    args = _parser().parse_args(argv)
    started = time.perf_counter()
    device = pick_device(args.device)
    machine = describe_machine(device)  # now: the autoreg source digest is of what was imported
    if device == "cpu":
        torch.set_num_threads(1)  # one core per measurement: less noise from whatever else runs
    settings = QUICK if args.quick else FULL
    models = tuple(by_name(name) for name in args.models.split(",")) if args.models else MODELS
    parts = set(args.parts.split(","))
    unknown = parts - set(PARTS)
    if unknown:
        raise SystemExit(f"--parts: unknown {sorted(unknown)}; choose from {', '.join(PARTS)}")

    def progress(line: str) -> None:
        print(line, flush=True)

    move_results: list[move.MoveResult] = []
    if "move" in parts:
        progress("move check ...")
        move_results = move.run_move_check(device, models)

    forward: list[speed.ForwardResult] = []
    if "speed" in parts:
        configs = speed.configs_for(device, args.quick)
        if args.modes:
            configs = [c for c in configs if c.mode in args.modes.split(",")]
        names = {spec.name for spec in models}
        configs = [
            dataclasses.replace(c, models=tuple(n for n in c.models if n in names)) for c in configs
        ]
        progress("forward speed ...")
        forward = speed.run_forward_speed(
            device,
            configs,
            rounds=settings.forward_rounds,
            round_s=settings.forward_round_s,
            sub_s=settings.forward_sub_block_s,
            progress=progress,
        )

    micro_results: list[micro.MicroResult] = []
    if "micro" in parts:
        progress("micro ...")
        micro_results = micro.run_micro(
            (settings.micro_rounds, settings.micro_block_s),
            (settings.micro_heavy_rounds, settings.micro_heavy_block_s),
            progress=progress,
        )

    result = report.build_report(
        kind="quick" if args.quick else "full",
        machine=machine,
        settings={
            **dataclasses.asdict(settings),
            "clock": "time.perf_counter + cuda.synchronize"
            if device == "cuda"
            else "time.process_time",
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
    paths = report.write_files(result, Path(args.out))
    print()
    print(report.format_text(result))
    print()
    for path in paths.values():
        print(f"wrote {path}")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smoke run: < 1 min, no compile")
    parser.add_argument("--out", default=str(RESULTS), help="directory for the result files")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--models", default="", help="comma-separated zoo names (default: all)")
    parser.add_argument("--modes", default="", help="comma-separated forward modes (default: all)")
    parser.add_argument("--parts", default=",".join(PARTS), help="comma-separated parts to run")
    return parser


if __name__ == "__main__":
    sys.exit(main())
