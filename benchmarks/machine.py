"""What the benchmarks ran on: hardware, versions, date, and which autoreg source was measured."""

from __future__ import annotations

import datetime
import hashlib
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import torch

import autoreg

__all__ = ["describe_machine", "pick_device"]

_REPO = Path(__file__).resolve().parent.parent


def pick_device(requested: str) -> str:
    """``cuda`` when asked for or available (with ``auto``), else ``cpu``."""
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch.cuda.is_available() is False on this machine")
    return requested


def describe_machine(device: str) -> dict[str, Any]:
    """Hardware, versions, numeric settings and date, for the report header and the JSON file.

    Call it after the run's settings (torch threads, TF32) are made: it records them as they are.
    """
    now = datetime.datetime.now(datetime.UTC)
    gpu = torch.cuda.get_device_name(0) if device == "cuda" else None
    return {
        "device": device,
        "hardware": gpu or _cpu_model(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "gpu": gpu,
        "gpu_memory_gib": _gpu_memory_gib() if device == "cuda" else None,
        "gpu_capability": ".".join(map(str, torch.cuda.get_device_capability(0)))
        if device == "cuda"
        else None,
        "driver": _driver_version() if device == "cuda" else None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda if device == "cuda" else None,
        "cudnn": torch.backends.cudnn.version() if device == "cuda" else None,
        "tf32": _tf32_flags(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "autoreg": autoreg.__version__,
        "autoreg_source_sha256": _source_digest(),
        "git_commit": _git_commit(),
        "torch_threads": torch.get_num_threads(),
        "date": now.date().isoformat(),
        "datetime_utc": now.isoformat(timespec="seconds"),
    }


def _gpu_memory_gib() -> float:
    return round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1)


def _driver_version() -> str | None:
    """The NVIDIA driver's version: from nvidia-smi, else from NVML (nvidia-ml-py), else None."""
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if done.returncode == 0 and done.stdout.strip():
            return done.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        import pynvml  # type: ignore[import-not-found, import-untyped, unused-ignore]

        pynvml.nvmlInit()
        version = pynvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:  # noqa: BLE001 - metadata only: absent is recorded as None
        return None


def _tf32_flags() -> dict[str, Any]:
    """Whether float32 matmuls and convolutions may run in TF32 (the settings as they are)."""
    flags: dict[str, Any] = {
        "torch.backends.cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "torch.backends.cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
        "torch.get_float32_matmul_precision()": torch.get_float32_matmul_precision(),
    }
    precision = getattr(torch.backends.cuda.matmul, "fp32_precision", None)
    if precision is not None:
        flags["torch.backends.cuda.matmul.fp32_precision"] = precision
    return flags


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def _source_digest() -> str:
    """SHA-256 over autoreg's source files: which core was measured, committed or not."""
    digest = hashlib.sha256()
    package = Path(autoreg.__file__).resolve().parent
    for path in sorted(package.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _git_commit() -> str | None:
    """HEAD's commit (read-only ``git rev-parse``), or None outside a git checkout."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=_REPO, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None
