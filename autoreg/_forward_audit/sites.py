"""Call-site bookkeeping: where each tensor of the pass came from, as the user's line.

A tensor an operation makes from nothing (a factory, lifted data, a copy back to the CPU) or that
the code casts gets a ``Site``: the user's line that made it, the module whose code that is, the
dtype it made. A CPU tensor the pass meets without a tag was made before ``forward`` (a global, a
config object, a plain attribute): it gets a ``Site`` where it entered. What an operation
computes inherits the sites of its inputs. ``ByTensor`` keeps a fact by tensor identity without
keeping the tensor alive.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any, Final, Generic, TypeVar

import torch
from torch import nn
from torch.utils.weak import WeakIdKeyDictionary

from .._audit import Finding
from .._frames import is_library, torch_module
from .._paths import AUTOREG_DIR, TORCH_DIR
from .finding import ModeName

__all__ = ["ByTensor", "Lines", "Site", "call", "merged", "untyped", "user_line"]

_V = TypeVar("_V")
MAX_SITES: Final = 8  # the sites one tensor remembers: a tensor mixed from more is rare


@dataclasses.dataclass(frozen=True, eq=False)
class Site:
    """Where a tensor of the pass came from: made at ``filename:lineno``, or entered there.

    ``class_name`` and ``module_path`` name the module whose code that is (for a plain attribute:
    the module that holds it); ``origin`` says what made it there (the factory, ``"cast"``,
    ``"entered"``, ``"copied back"``), so that two tensors of one line are two sites. ``refs`` are
    the tensors the code there names (its locals) and ``owner`` the module that is its ``self``:
    the names a fix can use. ``dtype`` is the dtype the tensor had when it was made there.
    """

    filename: str
    lineno: int
    class_name: str
    module_path: str
    origin: str
    dtype: torch.dtype | None = None
    refs: tuple[tuple[str, torch.Tensor], ...] = ()
    owner: nn.Module | None = None
    host: bool = False  # made on the default device: it stays there when the model moves
    entered: bool = False  # made before forward: a global, a closure's, a plain attribute
    island: bool = False  # a cast of the model's own floating values: precision on purpose
    joined: bool = False  # computed with such a cast, in its dtype: the cast decides the dtype
    internal: bool = False  # a cast inside an operation (sdpa, autocast): torch's, not a stray
    copied_back: bool = False  # a copy of the model's values to the CPU
    random: str = ""  # the random factory that drew it: new at every call, no constant
    shaped: bool = False  # one of its dimensions is one of the inputs': not the same every call
    written: bool = False  # its dtype was written in the code (dtype=, .float(), .type(...))
    device_attribute: str = ""  # made on a device a module keeps in this attribute (self.device)
    attribute: Finding | None = None  # a plain attribute .to() left behind

    @property
    def key(self) -> tuple[str, int | str, str]:
        """One finding per key and kind: an attribute once, wherever it enters; anything else
        once per line and origin."""
        if self.attribute is not None:
            return "attribute", self.module_path, self.attribute.path
        return self.filename, self.lineno, self.origin


def merged(groups: Iterable[tuple[Site, ...] | None]) -> tuple[Site, ...] | None:
    """The sites of all ``groups``, each once, in order (at most ``MAX_SITES``)."""
    found: dict[tuple[object, ...], Site] = {}
    for group in groups:
        for site in group or ():
            found.setdefault((*site.key, site.dtype, site.island), site)
    return tuple(found.values())[:MAX_SITES] or None


def untyped(sites: tuple[Site, ...]) -> tuple[Site, ...]:
    """``sites`` for a tensor that is not floating: where it came from, without the floating
    dtype made there (a float draw compared into a bool mask gives no float its dtype)."""
    return tuple(
        dataclasses.replace(site, dtype=None)
        if site.dtype is not None and (site.dtype.is_floating_point or site.dtype.is_complex)
        else site
        for site in sites
    )


class ByTensor(Generic[_V]):
    """A value per tensor, by identity, that does not keep the tensor alive."""

    def __init__(self) -> None:
        self._map = WeakIdKeyDictionary()

    def get(self, tensor: torch.Tensor) -> _V | None:
        return self._map.get(tensor)  # type: ignore[no-any-return, no-untyped-call]

    def __setitem__(self, tensor: torch.Tensor, value: _V) -> None:
        self._map[tensor] = value

    def discard(self, tensor: torch.Tensor) -> None:
        self._map.pop(tensor, None)  # type: ignore[no-untyped-call]

    def __contains__(self, tensor: torch.Tensor) -> bool:
        return tensor in self._map


def call(run: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The audited call (the copy's forward, or the step given the copy); the boundary where the
    search for the user's line stops."""
    return run(*args, **kwargs)


def user_frame(frame: FrameType | None) -> FrameType | None:
    """The innermost frame outside torch and autoreg, up to the forward call."""
    while frame is not None and frame.f_code is not call.__code__:
        if not is_library(frame.f_code.co_filename):
            return frame
        frame = frame.f_back
    return None


# autoreg's files, and torch's that pass a call on to the function called (a Tensor method's
# Python wrapper, the override machinery, boolean_dispatch's choice of F.max_pool2d's form):
# the frame that called through them made the call.
_PASSING: Final = (
    AUTOREG_DIR,
    *(os.path.join(TORCH_DIR, name) for name in ("overrides.py", "_tensor.py", "_jit_internal.py")),
    os.path.join(TORCH_DIR, "utils", "_python_dispatch.py"),
)


def called_by_torch(frame: FrameType | None, func: object) -> bool:
    """Whether torch's own code made the call of ``func`` that the frames from ``frame`` out are
    running: a module's ``forward`` or a helper of torch's (``nn.MultiheadAttention`` converting
    a bool mask to the query's dtype), not the user's code. Then what the call makes is torch's
    doing, decided by what the user handed it."""
    code = getattr(func, "__code__", None)  # a Python function of torch's: its own frame
    while frame is not None:
        filename = frame.f_code.co_filename
        if frame.f_code is not code and not filename.startswith(_PASSING):
            return filename.startswith(TORCH_DIR)
        frame = frame.f_back
    return False


def user_line(frame: FrameType | None) -> tuple[str, int]:
    """The innermost frame outside torch and autoreg, up to the forward call; if there is none
    (torch's own module), the innermost line of torch/nn/modules."""
    found = user_frame(frame)
    if found is not None:
        return found.f_code.co_filename, found.f_lineno
    while frame is not None and frame.f_code is not call.__code__:
        if torch_module(frame.f_code.co_filename):
            return frame.f_code.co_filename, frame.f_lineno
        frame = frame.f_back
    return "<unknown>", 0


class Lines:
    """The user's line running now, and what the code there names."""

    def __init__(self, twin: nn.Module, mode: ModeName) -> None:
        self.mode = mode  # the mode the pass runs the copy in
        # The copy's modules by id, with their paths and classes.
        self.modules = {id(m): (path, type(m).__name__) for path, m in twin.named_modules()}
        self.root = self.modules[id(twin)]

    def line(self) -> tuple[str, int]:
        """The user's line: the innermost frame outside torch and autoreg."""
        return user_line(sys._getframe(1))

    def site(self, origin: str, holder: tuple[str, str] | None = None, **flags: Any) -> Site:
        """A ``Site`` at the user's line, with the module whose code it is: the nearest ``self``
        on the stack that is a module of the copy (the model itself when none is); ``holder``:
        the path and class of the module that holds a plain attribute, named instead."""
        here = sys._getframe(1)
        frame = user_frame(here)
        if frame is None:  # torch's own module
            path, cls = holder or self.root
            return Site(*user_line(here), cls, path, origin, **flags)
        local = frame.f_locals
        refs = tuple((n, v) for n, v in local.items() if isinstance(v, torch.Tensor))
        owner = local.get("self") if id(local.get("self")) in self.modules else None
        path, cls = holder or self.root
        caller: FrameType | None = None if holder else frame
        while caller is not None and caller.f_code is not call.__code__:
            found = self.modules.get(id(caller.f_locals.get("self")))
            if found is not None:
                path, cls = found
                break
            caller = caller.f_back
        filename, lineno = frame.f_code.co_filename, frame.f_lineno
        return Site(filename, lineno, cls, path, origin, refs=refs, owner=owner, **flags)
