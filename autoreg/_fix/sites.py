"""Where each attribute of each module is stored, recorded while a model is built or run.

``record_stores()`` replaces ``nn.Module.__setattr__`` (and autoreg's) for the duration of a
``with`` block by a wrapper that notes, for each store, the code that made it: the first frame
on the stack that runs neither one of the ``__setattr__`` overrides of the module's classes
(known by the identity of their code, decorated or not: ``_record.read_setattr_codes``) nor
autoreg's code. That is the user's ``self.mask = ...`` line, the ``setattr(self, name, t)``
call, a helper function's ``module.mask = ...``, or the ``__setattr__`` of another object that
stores into the module (a proxy's): what the audit's findings need to become edits. A store is
"construction" when an ``__init__`` of the module's classes (known by its code) runs for the
module, and "nested" when it runs inside another (a base's ``__init__``, called by
``super().__init__()``: before anything the class's own ``__init__`` does after that call).

Stores that bypass ``nn.Module.__setattr__`` (``self.__dict__[k] = v``, ``object.__setattr__``)
are not seen; ``plan`` lists such attributes instead of guessing where they come from.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import sys
from collections.abc import Iterator
from types import CodeType, FrameType
from typing import Any

import torch
from torch import nn

from .._audit_scope import is_own_code
from .._mixin import AutoRegisterMixin
from .._paths import AUTOREG_DIR
from .._record import read_setattr_codes
from .strays import Site

__all__ = ["Stores", "record_stores"]


class Stores:
    """The sites recorded for each ``(module, name)``, in the order they were first seen."""

    def __init__(self) -> None:
        self._sites: dict[tuple[int, str], list[Site]] = {}
        self._alive: dict[int, nn.Module] = {}  # keeps each id unique while the record lives
        self._setattr_codes: dict[type, dict[int, CodeType]] = {}  # per class, while it lives
        self._inits: dict[type, dict[int, CodeType]] = {}

    def of(self, module: nn.Module, name: str) -> tuple[Site, ...]:
        return tuple(self._sites.get((id(module), name), ()))

    def every(self) -> list[tuple[str, Site]]:
        """Each site recorded, with the name stored there."""
        return [(name, site) for (_, name), sites in self._sites.items() for site in sites]

    def add(self, module: nn.Module, name: str, value: object, frame: FrameType | None) -> None:
        cls = type(module)
        codes = self._setattr_codes.get(cls)
        if codes is None:
            codes = self._setattr_codes[cls] = read_setattr_codes(cls.__mro__)
        code = _storing_frame(frame, codes)
        if code is None:
            return
        self._alive[id(module)] = module
        sites = self._sites.setdefault((id(module), name), [])
        inits = self._inits.get(cls)
        if inits is None:
            inits = self._inits[cls] = _init_codes(cls)
        running = _running_inits(module, frame, inits)
        caller = None
        if not is_own_code(code.f_code.co_filename):  # a package's code: who called it
            outer = code.f_back
            while outer is not None and not is_own_code(outer.f_code.co_filename):
                outer = outer.f_back
            if outer is not None:
                caller = (_absolute(outer.f_code.co_filename), outer.f_lineno)
        site = Site(
            _absolute(code.f_code.co_filename),
            code.f_lineno,
            code.f_code.co_qualname,
            running > 0,
            _kind(value),
            "_buffers" in module.__dict__,
            running > 1,
            caller,
        )
        if site not in sites:
            sites.append(site)


@contextlib.contextmanager
def record_stores(stores: Stores | None = None) -> Iterator[Stores]:
    """Record every store made inside the block through ``nn.Module.__setattr__`` or autoreg's
    (an autoreg class stores some values without calling nn.Module's), into ``stores`` (a new
    record if None)."""
    stores = Stores() if stores is None else stores
    originals = {cls: cls.__dict__["__setattr__"] for cls in (nn.Module, AutoRegisterMixin)}

    def watch(original: Any) -> Any:
        def __setattr__(self: nn.Module, name: str, value: Any) -> None:  # noqa: N807
            stores.add(self, name, value, sys._getframe(1))
            original(self, name, value)

        return __setattr__

    try:
        for cls, original in originals.items():
            type.__setattr__(cls, "__setattr__", watch(original))
        yield stores
    finally:
        for cls, original in originals.items():
            type.__setattr__(cls, "__setattr__", original)


def _storing_frame(frame: FrameType | None, setattr_codes: dict[int, CodeType]) -> FrameType | None:
    """The frame of the code that stored the value: the frames of the module's ``__setattr__``
    overrides (``setattr_codes``) and autoreg's own skipped. A ``__setattr__`` of another object
    that stores into the module (a proxy's) is where the store is made."""
    while frame is not None and (
        id(frame.f_code) in setattr_codes or frame.f_code.co_filename.startswith(AUTOREG_DIR)
    ):
        frame = frame.f_back
    return frame


@functools.lru_cache(maxsize=1024)
def _absolute(filename: str) -> str:
    return os.path.abspath(filename)


def _init_codes(cls: type) -> dict[int, CodeType]:
    """The code of each ``__init__`` of ``cls.__mro__``, by its id (a function assigned as
    ``__init__`` under another name, a decorated one, a dataclass's, a partialmethod's), kept
    beside (alive as long as the id stands). Never hashed: a code object hashes its constants,
    which dynamo's rewritten code may hold unhashable (a dict)."""
    codes: dict[int, CodeType] = {}
    for klass in cls.__mro__:
        function = vars(klass).get("__init__")
        if function is None:
            continue
        function = inspect.unwrap(function)
        function = getattr(function, "func", function)  # functools.partialmethod
        code = getattr(function, "__code__", None)
        if code is not None:
            codes[id(code)] = code
    return codes


def _running_inits(module: nn.Module, frame: FrameType | None, inits: dict[int, CodeType]) -> int:
    """How many calls of an ``__init__`` of the module's classes (``inits``) for ``module`` run:
    one while it is built; two or more inside a base's ``__init__`` called from its class's."""
    running = 0
    while frame is not None:
        code = frame.f_code
        if (
            id(code) in inits
            and code.co_argcount
            and frame.f_locals.get(code.co_varnames[0]) is module
        ):
            running += 1
        frame = frame.f_back
    return running


def _kind(value: object) -> str:
    if isinstance(value, nn.Parameter):
        return "parameter"
    if isinstance(value, nn.Module):
        return "module"
    if isinstance(value, torch.Tensor):
        return "tensor"
    if value is None:
        return "none"
    if isinstance(value, (list, tuple, dict)):
        return "container"
    return "other"
