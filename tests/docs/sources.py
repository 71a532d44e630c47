"""The project's sources, as git would commit them: what the sdist must hold, and what the tests
that build or install the project copy (so that they never write into the checkout)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOT_SOURCES = shutil.ignore_patterns(
    ".git",
    ".nox",
    ".ci-venv",
    ".venv",
    "build",
    "dist",
    "site",
    "*.egg-info",
    "__pycache__",
    ".*_cache",
    ".hypothesis",
)


def source_files() -> list[str] | None:
    """The files git would commit (tracked or new, not ignored), or None outside a git checkout."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return sorted(name for name in listed.stdout.split("\0") if name and (ROOT / name).is_file())


def copy_sources(destination: Path) -> None:
    """Copy the sources into ``destination`` (the whole tree, less caches, outside git)."""
    files = source_files()
    if files is None:  # an unpacked sdist, say: its tree is the sources
        shutil.copytree(ROOT, destination, ignore=NOT_SOURCES)
        return
    for name in files:
        (destination / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, destination / name)
