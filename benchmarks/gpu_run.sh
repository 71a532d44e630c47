#!/usr/bin/env bash
# The GPU benchmark in one call, about 8 minutes: bash benchmarks/gpu_run.sh [COPY_TO_DIR]
#
# Runs `python -m benchmarks --plan gpu --device cuda --parts move,speed` (the move check with
# .to("cuda"), then forward speed: eager, torch.compile(mode="reduce-overhead") and torch.compile,
# small models and LayerBlock4096; the micro benchmarks are CPU-only and not run here) and writes
# benchmarks/results/cuda-<date>.{json,md,png}, naming the GPU, driver, torch, CUDA and Python
# versions, plus cuda-<date>.log, the console output. With COPY_TO_DIR, copies those files there.
#
# Assumes, and installs nothing (the GPU machine may have no network):
# - an NVIDIA GPU that `python3` (or $PYTHON) sees: Python >= 3.11 with a CUDA build of torch;
#   checked first, with a clear message and exit status 3 when not;
# - matplotlib for the PNG; without it the run goes on with --no-png, and
#   `python -m benchmarks --plot benchmarks/results/cuda-<date>.json` draws it later, anywhere;
# - autoreg comes from this checkout: the repository root is the working directory.
# Time: no forward job starts after BUDGET_S seconds (default 390; the rest are reported as
# skipped), and at LIMIT_S seconds (default 470) the run is interrupted with SIGINT, which still
# writes what was measured. Exit status: the benchmark's (124 or 130 if interrupted).
# DEVICE=cpu rehearses the script without a GPU: the GPU plan at tiny sizes, cpu-<date>-gpu-plan.*.
set -uo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
device=${DEVICE:-cuda}
budget=${BUDGET_S:-390}
limit=${LIMIT_S:-470}
results=${RESULTS_DIR:-benchmarks/results}
export PYTHONUNBUFFERED=1

"$python" - "$device" <<'EOF' || exit 3
import sys

if sys.version_info < (3, 11):
    sys.exit(f"gpu_run.sh: needs Python >= 3.11; {sys.executable} is {sys.version.split()[0]}")
try:
    import torch
except ImportError as error:
    sys.exit(f"gpu_run.sh: {sys.executable} cannot import torch ({error}); set PYTHON")
if sys.argv[1] == "cuda" and not torch.cuda.is_available():
    sys.exit(f"gpu_run.sh: torch {torch.__version__} ({torch.__file__}) sees no CUDA device")
print(
    f"gpu_run.sh: Python {sys.version.split()[0]}, torch {torch.__version__}, "
    f"CUDA {torch.version.cuda}, "
    + (torch.cuda.get_device_name(0) if sys.argv[1] == "cuda" else "rehearsal on the CPU")
)
EOF

extra=()
if ! "$python" -c "import matplotlib" 2>/dev/null; then
    echo "gpu_run.sh: matplotlib missing: --no-png (draw it later with python -m benchmarks --plot)"
    extra=(--no-png)
fi
nvidia-smi --query-gpu=name,driver_version,pstate,clocks.sm,clocks.mem,temperature.gpu \
    --format=csv 2>/dev/null || echo "gpu_run.sh: nvidia-smi not available"

mkdir -p "$results"
log=$(mktemp)
timeout --signal=INT --kill-after=30 "$limit" \
    "$python" -m benchmarks --plan gpu --device "$device" --parts move,speed \
    --budget-s "$budget" --out "$results" ${extra[@]+"${extra[@]}"} 2>&1 | tee "$log"
status=${PIPESTATUS[0]}

json=$(grep -o "^wrote .*\.json$" "$log" | tail -1 | cut -c7-)
if [ -n "$json" ]; then
    cat "$log" >"${json%.json}.log"
    if [ $# -ge 1 ]; then
        mkdir -p "$1"
        cp "${json%.json}".* "$1"/
    fi
else
    echo "gpu_run.sh: no result files written (exit status $status)"
    if [ $# -ge 1 ]; then
        mkdir -p "$1"
        cat "$log" >"$1/cuda-run.log"
    fi
fi
rm -f "$log"
exit "$status"
