"""mkdocs hook: the repository files the pages link to become files of the site.

The docs link to example code (``examples/net.py``) and quote benchmark results
(``benchmarks/results/*.md``) where they live in the repository. This hook adds those
files to the site under the same paths, so that a link such as
``[examples/net.py](examples/net.py)`` resolves, and ``mkdocs build --strict`` fails when a linked
file is missing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files, InclusionLevel

ROOT = Path(__file__).resolve().parents[1]
SHARED = ("examples/*.py", "benchmarks/results/*.md")


def on_files(files: Files, config: Any) -> Files:
    for pattern in SHARED:
        for path in sorted(ROOT.glob(pattern)):
            uri = path.relative_to(ROOT).as_posix()
            if files.get_file_from_path(uri) is None:
                # NOT_IN_NAV: a results page is linked from benchmarks.md, not listed in the nav.
                inclusion = InclusionLevel.NOT_IN_NAV
                files.append(
                    File.generated(config, uri, abs_src_path=str(path), inclusion=inclusion)
                )
    return files
