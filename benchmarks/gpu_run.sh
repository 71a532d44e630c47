#!/usr/bin/env bash
# The GPU benchmark in one call, about 8 minutes: bash benchmarks/gpu_run.sh [COPY_TO_DIR]
#
# 1. The move check with .to("cuda"): pytest tests/benchmarks/test_zoo_moves.py (said and skipped
#    where pytest is not installed).
# 2. `python -m benchmarks --plan gpu --device cuda --parts forward`: eager,
#    torch.compile(mode="reduce-overhead") and torch.compile, small models and TransformerBlock4096
#    (the micro benchmarks are CPU-only). It writes $RESULTS_DIR/cuda-<date>.{json,md}
#    (default benchmark-results/, git-ignored), naming the GPU, driver, torch, CUDA and Python, and
#    cuda-<date>.log, the console output. With COPY_TO_DIR, copies those files there.
#
# Installs nothing (the GPU machine may have no network). Needs python3 (or $PYTHON) >= 3.11 with a
# CUDA build of torch that sees the GPU: checked first (exit status 3 when not).
# No forward job starts after BUDGET_S seconds (default 390; the rest are reported as skipped);
# at LIMIT_S (default 470) the run is interrupted with SIGINT and still writes what it measured.
# Exit status: the benchmark's (124 or 130 if interrupted). DEVICE=cpu rehearses the script
# without a GPU: the GPU plan at tiny sizes, cpu-<date>-gpu-plan.*.
set -uo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
device=${DEVICE:-cuda}
results=${RESULTS_DIR:-benchmark-results}
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
where = torch.cuda.get_device_name(0) if sys.argv[1] == "cuda" else "rehearsal on the CPU"
print(f"gpu_run.sh: Python {sys.version.split()[0]}, torch {torch.__version__}, {where}")
EOF

nvidia-smi --query-gpu=name,driver_version,pstate,clocks.sm,clocks.mem,temperature.gpu \
    --format=csv 2>/dev/null || echo "gpu_run.sh: nvidia-smi not available"

mkdir -p "$results"
log=$(mktemp)
if "$python" -c "import pytest" 2>/dev/null; then
    "$python" -m pytest -q -p no:cacheprovider tests/benchmarks/test_zoo_moves.py 2>&1 | tee "$log"
else
    echo "gpu_run.sh: pytest missing: the move check (tests/benchmarks/test_zoo_moves.py) skipped" |
        tee "$log"
fi
timeout --signal=INT --kill-after=30 "${LIMIT_S:-470}" \
    "$python" -m benchmarks --plan gpu --device "$device" --parts forward \
    --budget-s "${BUDGET_S:-390}" --out "$results" 2>&1 | tee -a "$log"
status=${PIPESTATUS[0]}

json=$(grep -o "^wrote .*\.json$" "$log" | tail -1 | cut -c7-)
if [ -n "$json" ]; then cp "$log" "${json%.json}.log"; else echo "gpu_run.sh: no results ($status)"; fi
if [ $# -ge 1 ]; then
    mkdir -p "$1"
    if [ -n "$json" ]; then cp "${json%.json}".* "$1"/; else cp "$log" "$1/cuda-run.log"; fi
fi
rm -f "$log"
exit "$status"
