"""``python -m benchmarks [--plan cpu|gpu] [--quick] [--out DIR]``: forward speed and micro.

Plans (``--plan``; what each times: ``forward.configs_for`` and docs/benchmarks.md):

- ``cpu`` (the default without CUDA): the ten small models eager and under ``torch.compile``; the
  micro benchmarks (always on the CPU). About 4 minutes on a 2-core CPU.
- ``gpu`` (the default with CUDA): the small models and the 4096-wide TransformerBlock4096, eager
  and under ``torch.compile`` with and without CUDA graphs (``mode="reduce-overhead"``); one call:
  ``benchmarks/gpu_run.sh``. With ``--device cpu``, at tiny sizes: the test suite runs that, so
  that a GPU run cannot fail on Python. What has no CPU equivalent is said in the output.

Results go to ``--out`` (default ``benchmark-results/``, git-ignored); the docs quote those in
``benchmarks/results/``. ``--quick``: no compilation, fewer and shorter rounds. Forward jobs not
started by ``--budget-s`` are reported as skipped; an interrupt (Ctrl-C, ``timeout -s INT``)
still writes what was measured. The move check is a test: ``tests/benchmarks/test_zoo_moves.py``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from pathlib import Path
from typing import NamedTuple

# The zoo's autoreg variants are written for the default mode: an AUTOREG_MODE=strict exported
# in the shell would turn their bare tensors into errors. Cleared before the zoo classes exist.
os.environ.pop("AUTOREG_MODE", None)

import torch

from . import report
from .forward import configs_for, run_forward
from .micro import run_micro
from .timing import Row

PARTS = ("forward", "micro")


class Settings(NamedTuple):
    """(rounds, seconds per block) of forward rows, micro rows, and micro's whole-model rows."""

    forward: tuple[int, float]
    micro: tuple[int, float]
    heavy: tuple[int, float]  # construction and .to() of 2,000 blocks


FULL = Settings((41, 0.010), (15, 0.020), (11, 0.300))
QUICK = Settings((15, 0.002), (5, 0.005), (2, 0.005))
GPU = Settings((21, 0.020), (15, 0.020), (11, 0.300))  # CUDA events: blocks of >= 20 ms
TINY = Settings((2, 0.001), (2, 0.001), (2, 0.001))  # the GPU plan on a CPU: every code path


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks, print the report, write the result files; 0 unless something crashed."""
    args = _parser().parse_args(argv)
    started = time.perf_counter()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch.cuda.is_available() is False on this machine")
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    plan = args.plan or ("gpu" if device == "cuda" else "cpu")
    tiny = plan == "gpu" and device == "cpu"
    if device == "cpu":
        torch.set_num_threads(1)  # one core per measurement: less noise from whatever else runs
    settings = QUICK if args.quick else TINY if tiny else GPU if plan == "gpu" else FULL
    configs = configs_for(device, plan, args.quick)
    notes = [] if device == "cuda" else [
        "note: forward clock on cpu: time.process_time per block (CUDA events need a GPU)",
        *(["note: reduce-overhead on cpu: no CUDA graphs; inductor compiles without them and "
           "counts a cudagraph skip per graph; recordings stay 0; the state copy and "
           "cudagraph_mark_step_begin() run as on CUDA"]
          if any(c.mode == "reduce-overhead" for c in configs) else []),
    ]  # fmt: skip
    for line in notes:
        print(line, flush=True)
    machine = report.describe_machine(device)  # after the settings it records

    rows: list[Row] = []
    interrupted = ""
    try:
        # Micro first: in today's core, a compiled forward earlier in the process changes what
        # .to() costs (issue 14); micro measures a process where nothing was compiled.
        if "micro" in args.parts:
            print("micro ...", flush=True)
            run_micro(settings.micro, settings.heavy, rows)
        if "forward" in args.parts:
            print("forward speed ...", flush=True)
            deadline = started + args.budget_s if args.budget_s else None
            run_forward(device, configs, settings.forward, rows, deadline)
    except KeyboardInterrupt:
        interrupted = "interrupted: the parts after the last printed line did not run"
        print(interrupted, flush=True)
    clock = "time.process_time (torch.utils.benchmark.Timer), one torch thread"
    if device == "cuda":
        clock = f"forward: torch.cuda.Event per block, one synchronize per round; micro: {clock}"
    settings_used = {
        **settings._asdict(), "plan": plan, "clock": clock, "budget_s": args.budget_s,
        "file_suffix": "-quick" if args.quick else "-gpu-plan" if tiny else "",
        "interrupted": interrupted,
        "command": shlex.join(["python", "-m", "benchmarks", *(argv or sys.argv[1:])]),
    }  # fmt: skip
    kind = "quick" if args.quick else "tiny gpu plan on cpu" if tiny else f"{plan} plan"
    result = report.build(kind, machine, settings_used, rows, notes, time.perf_counter() - started)
    paths = report.write_files(result, Path(args.out))
    print(f"\n{report.format_markdown(result)}")
    for path in paths:
        print(f"wrote {path}")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--plan", choices=("cpu", "gpu"), help="default: gpu with CUDA, else cpu")
    parser.add_argument("--quick", action="store_true", help="smoke run: < 1 min, no compile")
    parser.add_argument("--out", default="benchmark-results", help="directory for the result files")
    parser.add_argument("--device", choices=("cpu", "cuda"), help="default: cuda where available")
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=PARTS, help="parts to run")
    parser.add_argument("--budget-s", type=float, default=0, help="no forward job starts after")
    return parser


if __name__ == "__main__":
    sys.exit(main())
