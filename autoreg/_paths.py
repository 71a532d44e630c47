"""Where code lives: autoreg's own, torch's, Python's, and installed packages' directories.

The bottom of the package's import graph: who made an assignment, who wrote a class statement,
whose line a report shows, whose ``to()`` a class has are all told by where the code runs from.
"""

from __future__ import annotations

import os
import sysconfig
from typing import Final

import torch

__all__ = ["AUTOREG_DIR", "INSTALLED_DIRS", "PYTHON_DIRS", "TORCH_DIR"]

AUTOREG_DIR: Final = os.path.join(os.path.dirname(os.path.abspath(__file__)), "")
TORCH_DIR: Final = os.path.join(os.path.dirname(torch.__file__), "")
_PATHS: Final = sysconfig.get_paths()
# Python's own modules; installed packages (which may live inside them: a system Python's)
PYTHON_DIRS: Final = tuple({os.path.join(_PATHS[key], "") for key in ("stdlib", "platstdlib")})
INSTALLED_DIRS: Final = tuple({os.path.join(_PATHS[key], "") for key in ("purelib", "platlib")})
