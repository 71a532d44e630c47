"""Call-site bookkeeping: where each tensor of the pass came from, as the user's line.

A tensor an operation makes from nothing (a factory, lifted data, a copy back to the CPU) gets a
``Site``: the user's line that made it and the module whose code that is. A CPU tensor the pass
meets without one was made before ``forward`` (a global, a config object, a plain attribute):
it gets a ``Site`` where it entered. What an operation computes inherits the sites of its
inputs. ``ByTensor`` keeps such facts by tensor identity without keeping tensors alive.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterable
from types import FrameType
from typing import Any, Final, Generic, TypeVar

import torch
from torch import nn
from torch.utils.weak import WeakIdKeyDictionary

from .._audit import Finding
from .._frames import is_library, torch_module
from .finding import ModeName

__all__ = ["ByTensor", "Lines", "Site", "call", "merged", "user_line"]

_V = TypeVar("_V")
MAX_SITES: Final = 8  # the sites one tensor remembers: a tensor mixed from more is rare


@dataclasses.dataclass(frozen=True, eq=False)
class Site:
    """Where a tensor of the pass came from: made at ``filename:lineno``, or entered there.

    ``class_name`` and ``module_path`` name the module whose code that is; ``origin`` says what
    made it there (the factory, ``"entered"``, ``"copied back"``), so that two tensors of one line
    are two sites. ``refs`` are the tensors the code there names (its locals) and ``owner`` the
    module that is its ``self``: the names a fix can use.
    """

    filename: str
    lineno: int
    class_name: str
    module_path: str
    origin: str
    refs: tuple[tuple[str, torch.Tensor], ...] = ()
    owner: nn.Module | None = None
    entered: bool = False  # made before forward: a global, a closure's, a plain attribute
    typed: bool = False  # its dtype was written in the code: not a dtype stray
    copied_back: bool = False  # a copy of a stand-in tensor to the CPU
    random: str = ""  # the random factory that drew it: new at every call, no constant
    shaped: bool = False  # one of its dimensions is one of the inputs': not the same every call
    attribute: Finding | None = None  # a plain attribute .to() left behind

    @property
    def key(self) -> tuple[str, int, str]:
        return self.filename, self.lineno, self.origin


def merged(groups: Iterable[tuple[Site, ...] | None]) -> tuple[Site, ...] | None:
    """The sites of all ``groups``, each once, in order (at most ``MAX_SITES``)."""
    found: dict[tuple[str, int, str, bool], Site] = {}
    for group in groups:
        for site in group or ():
            found.setdefault((*site.key, site.typed), site)
    return tuple(found.values())[:MAX_SITES] or None


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


def call(twin: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The forward call; the boundary where the search for the user's line stops."""
    return twin(*args, **kwargs)


def user_frame(frame: FrameType | None) -> FrameType | None:
    """The innermost frame outside torch and autoreg, up to the forward call."""
    while frame is not None and frame.f_code is not call.__code__:
        if not is_library(frame.f_code.co_filename):
            return frame
        frame = frame.f_back
    return None


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

    def site(self, origin: str, **flags: Any) -> Site:
        """A ``Site`` at the user's line, with the module whose code it is: the nearest ``self``
        on the stack that is a module of the copy (the model itself when none is)."""
        here = sys._getframe(1)
        frame = user_frame(here)
        if frame is None:  # torch's own module
            return Site(*user_line(here), self.root[1], self.root[0], origin, **flags)
        local = frame.f_locals
        refs = tuple((n, v) for n, v in local.items() if isinstance(v, torch.Tensor))
        owner = local.get("self") if id(local.get("self")) in self.modules else None
        path, cls = self.root
        caller: FrameType | None = frame
        while caller is not None and caller.f_code is not call.__code__:
            found = self.modules.get(id(caller.f_locals.get("self")))
            if found is not None:
                path, cls = found
                break
            caller = caller.f_back
        filename, lineno = frame.f_code.co_filename, frame.f_lineno
        return Site(filename, lineno, cls, path, origin, refs, owner, **flags)
