"""Helpers shared by the audit tests."""

from __future__ import annotations

import inspect
from typing import Any


def line_of(obj: Any, text: str) -> int:
    """The number of the first line of ``obj``'s source (a class, function or module) that
    contains ``text``."""
    lines, start = inspect.getsourcelines(obj)
    return max(start, 1) + next(n for n, line in enumerate(lines) if text in line)
