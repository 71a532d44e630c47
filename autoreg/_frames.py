"""Where in the user's code: the innermost frame outside torch and autoreg, and short paths; and
frames read past dynamo.

Both the forward audit (which line made a stray, which line raised) and the command line (which
line of the user's factory raised) report the user's line, not the library frames under it.

Inside code dynamo compiles, frames cannot be walked (dynamo cannot trace ``sys._getframe``): what
autoreg reads from them there (row 4's walk, a warning's line, a class statement's namespace) is
read by eager Python, past dynamo (``past_dynamo``), in a graph break, as a warning is.
"""

from __future__ import annotations

import functools
import os
import traceback
import types
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final, TypeVar

import torch

from ._paths import AUTOREG_DIR, TORCH_DIR

__all__ = [
    "error_line",
    "is_library",
    "location",
    "past_dynamo",
    "short_path",
    "skip_as_dynamo_frame",
    "skip_as_dynamo_frames",
    "torch_module",
]

# When the code is torch's own module (nn.Linear's forward), the line to report is in
# torch/nn/modules, not in the module-calling machinery.
_TORCH_MODULES: Final = os.path.join(TORCH_DIR, "nn", "modules") + os.sep
_MODULE_CALL: Final = os.path.join(_TORCH_MODULES, "module.py")

_T = TypeVar("_T")


def past_dynamo(function: Callable[..., _T], *args: Any) -> _T:
    """``function(*args)``, called from code dynamo compiles, run by eager Python past dynamo
    (``torch.compiler.disable``): its frames are the eager ones, torch's own between. Asked for at
    each call (30 to 50 µs eagerly, measured on torch 2.5.1 and 2.13, against 0.5 µs for a kept
    wrapper), which is rare: once per instance and name (a first store), per class and name (a
    warning), per class statement; and never before dynamo is loaded (``import autoreg`` imports
    none of it). A kept wrapper would be state that traced code reads, and dynamo guards on what
    traced code reads."""
    disable: Any = torch.compiler.disable  # (untyped in some torch versions)
    disabled: Any = disable(function)
    result: _T = disabled(*args)
    return result


def skip_as_dynamo_frames(modules: Iterable[types.ModuleType]) -> None:
    """Mark the code of the functions and methods ``modules`` define (with the code nested in
    them) as code dynamo never compiles as a frame of its own, as it never compiles
    ``nn.Module``'s (torch's files are skipped). Eager code that dynamo lets run under its frame
    callback (a frame it cannot compile: an ``nn.LSTM`` subclass's ``forward``) calls the
    mixin's ``__setattr__``: dynamo compiled it, and each function it calls, as frames of their
    own (an ``nn.LSTM`` subclass's store of its state traced 19 frames against the twin's 1,
    recompiling for each new name up to dynamo's limit). Dynamo still inlines the code
    where it traces a caller (a store in a compiled ``forward``). Each module that model code
    calls marks itself, once, when imported (``_mixin`` the core's); a construction wrapper is
    marked when made (``_construction``)."""
    for module in modules:
        for code in _defined_codes(module):
            skip_as_dynamo_frame(code)


def skip_as_dynamo_frame(code: types.CodeType) -> None:
    """Mark ``code`` as ``skip_as_dynamo_frames`` does, through torch's C API, which imports no
    dynamo: ``set_code_exec_strategy`` (the frame skipped, its callees as they are; torch 2.7
    on), or ``skip_code`` (torch 2.5 and 2.6); where neither is there, nothing is marked, and the
    frames are compiled as before."""
    mark = _marker()
    if mark is not None:
        mark(code)


@functools.cache
def _marker() -> Callable[[types.CodeType], object] | None:
    try:
        from torch._C._dynamo import eval_frame
    except ImportError:  # pragma: no cover - a torch without dynamo
        return None
    skip_code: Callable[[types.CodeType], object] | None = getattr(eval_frame, "skip_code", None)
    if skip_code is not None:
        return skip_code
    try:
        skip = eval_frame._FrameExecStrategy(
            eval_frame._FrameAction.SKIP, eval_frame._FrameAction.DEFAULT
        )
        set_strategy = eval_frame.set_code_exec_strategy
    except AttributeError:
        return None
    return lambda code: set_strategy(code, skip)


def _defined_codes(module: types.ModuleType) -> Iterator[types.CodeType]:
    """The code objects of the functions and methods ``module`` defines, and those nested in
    them (lambdas, comprehensions, inner functions: constants of their code); written in
    autoreg's files only: a class ``module`` defines holds code Python shares with every program
    (a named tuple's ``_make``, an enum's ``__new__``, ``contextlib``'s ``helper`` behind a
    ``@contextmanager``), which is not autoreg's to mark."""
    name = module.__name__
    for value in list(vars(module).values()):
        if getattr(value, "__module__", None) != name:
            continue  # imported, not defined here
        functions = list(vars(value).values()) if isinstance(value, type) else [value]
        for function in functions:
            function = getattr(function, "__func__", function)  # static and class methods
            if isinstance(function, property):
                accessors = [function.fget, function.fset, function.fdel]
            else:
                accessors = [function]
            for accessor in accessors:
                code = getattr(accessor, "__code__", None)
                pending = [code] if isinstance(code, types.CodeType) else []
                while pending:
                    code = pending.pop()
                    if code.co_filename.startswith(AUTOREG_DIR):
                        yield code
                        pending += [c for c in code.co_consts if isinstance(c, types.CodeType)]


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
