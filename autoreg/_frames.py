"""Where in the user's code: the innermost frame outside torch and autoreg, and short paths.

Both the forward audit (which line made a stray, which line raised) and the command line (which
line of the user's factory raised) report the user's line, not the library frames under it.
"""

from __future__ import annotations

import os
import traceback
from typing import Final

from ._paths import AUTOREG_DIR, TORCH_DIR

__all__ = [
    "error_line",
    "is_library",
    "location",
    "short_path",
    "torch_module",
]

# When the code is torch's own module (nn.Linear's forward), the line to report is in
# torch/nn/modules, not in the module-calling machinery.
_TORCH_MODULES: Final = os.path.join(TORCH_DIR, "nn", "modules") + os.sep
_MODULE_CALL: Final = os.path.join(_TORCH_MODULES, "module.py")


def is_library(filename: str) -> bool:
    """Whether ``filename`` is torch's, autoreg's or Python's own frozen import machinery."""
    return filename.startswith((TORCH_DIR, AUTOREG_DIR, "<frozen "))


def torch_module(filename: str) -> bool:
    """Whether ``filename`` is the code of one of torch's own modules (not the calling code)."""
    return filename.startswith(_TORCH_MODULES) and filename != _MODULE_CALL


def error_line(error: BaseException) -> tuple[str, int] | None:
    """The user's line that raised ``error``: its innermost frame outside torch and autoreg;
    else the innermost line of torch's own modules; ``None`` when the traceback has neither."""
    frames = traceback.extract_tb(error.__traceback__)
    for frame in reversed(frames):
        if not is_library(frame.filename):
            return frame.filename, frame.lineno or 0
    for frame in reversed(frames):
        if torch_module(frame.filename):
            return frame.filename, frame.lineno or 0
    return None


def location(filename: str, lineno: int) -> str:
    """``path/to/file.py:12``, the path relative to the working directory when it lies under it."""
    return f"{short_path(filename)}:{lineno}"


def short_path(filename: str) -> str:
    """``filename`` relative to the working directory when it lies under it."""
    if os.path.isabs(filename):
        relative = os.path.relpath(filename)
        if not relative.startswith(".."):
            return relative
    return filename
