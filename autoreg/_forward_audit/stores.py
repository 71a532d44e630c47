"""State that ``forward`` stores on the model where ``.to()`` leaves it: ``"stored"`` findings.

Two observations on the audit's copy, and their difference. ``find_unregistered`` runs on the copy
before the pass (``copying.strand``) and after it: what it reports after and not before was
stored by the pass. The line that stored it comes from ``StoreWatch``: each module of the copy is
switched to a subclass of its own class, made once per class and named like it, whose
``__setattr__`` notes the user's line of the first store of each attribute, then calls the
class's own ``__setattr__``. A tensor put into a container in place (``self.cache["k"] = k``,
``self.keys.append(k)``) makes no attribute store: it is reported at the user's line that computed
it. The copy is the audit's: the caller's modules and classes are left as they were.

A state that forward recomputes before every use is no stray (``recomputed``): a hand-made weight
drop sets ``setattr(lstm, "weight_hh_l0", F.dropout(raw, ...))`` before each call of the LSTM,
which then reads only the new weight (and re-flattens it into ``_flat_weights``); after ``.to()``,
the next forward replaces what was left before reading it, as ``weight_norm``'s hook does. Told
by running it: a fresh copy runs forward twice, and an attribute whose tensors from the first
call the second never reads, while it reads the ones it stored instead, is recomputed.
"""

from __future__ import annotations

import contextlib
import inspect
import linecache
import sys
import types
import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from .._audit import Located, locate_unregistered
from .._messages.describe import dtype_name
from .finding import ForwardFinding, ModeName
from .fixes import stored_fix
from .rules import tensors_in
from .sites import ByTensor, user_line

__all__ = ["StoreWatch", "recomputed", "stored_findings"]

Line = tuple[str, int]


class StoreWatch:
    """The user's line of the first store of each attribute of the copy's modules in the pass,
    by ``(id(module), name)``. A module whose class cannot be subclassed is not watched."""

    def __init__(self, twin: nn.Module) -> None:
        self.lines: dict[tuple[int, str], Line] = {}
        watching: dict[type, type | None] = {}
        for module in twin.modules():
            cls = type(module)
            if cls not in watching:
                watching[cls] = self._subclass(cls)
            subclass = watching[cls]
            if subclass is not None:
                with contextlib.suppress(TypeError):  # a layout __class__ cannot take
                    module.__class__ = subclass

    def _subclass(self, cls: type) -> type | None:
        lines = self.lines
        setattr_of: Any = cls.__setattr__

        # Named __setattr__, so that autoreg's own frame walk passes over it, as over any
        # override that calls the next one.
        def __setattr__(module: nn.Module, name: str, value: Any) -> None:  # noqa: N807
            key = (id(module), name)
            if key not in lines:
                lines[key] = user_line(sys._getframe(1))
            setattr_of(module, name, value)

        def body(namespace: dict[str, Any]) -> None:
            namespace.update(
                __setattr__=__setattr__, __module__=cls.__module__, __qualname__=cls.__qualname__
            )

        try:
            return types.new_class(cls.__name__, (cls,), exec_body=body)
        except Exception:  # noqa: BLE001 - a class that refuses subclasses: not watched
            return None


def stored_findings(
    twin: nn.Module,
    mode: ModeName,
    before: dict[int, Located],
    lines: dict[tuple[int, str], Line],
    made: ByTensor[Line],
    device: str,
) -> list[tuple[tuple[str | int, ...], ForwardFinding]]:
    """``(key, finding)`` for each tensor the pass stored on ``twin`` where ``.to()`` leaves it:
    what ``find_unregistered`` reports now and did not ``before`` the pass, at the line that
    stored its attribute (``lines``), else at the line that computed it (``made``); ``device``:
    where the model given is, and so the tensor it would store."""
    found: list[tuple[tuple[str | int, ...], ForwardFinding]] = []
    for entry in locate_unregistered(twin):
        finding, holder = entry.finding, entry.holder
        if id(finding.tensor) in before or finding.kind != "tensor":
            continue  # there before the pass; or in an object, or an array: no module's store
        line = lines.get((id(holder), finding.attribute)) or made.get(finding.tensor)
        filename, lineno = line or _forward_line(holder)
        key = ("stored", filename, lineno, entry.holder_path, finding.attribute)
        fix, what = stored_fix(holder, finding)
        stored = ForwardFinding(
            kind="stored",
            filename=filename,
            lineno=lineno,
            source=linecache.getline(filename, lineno).strip(),
            op="",
            op_filename="",
            op_lineno=0,
            tensor=f"{dtype_name(finding.dtype)}{list(finding.shape)}",
            entered=False,
            fix=fix,
            attribute=finding.attribute,
            class_name=finding.class_name,
            module_path=entry.holder_path,
            mode=mode,
            modes=(mode,),
            dtype=dtype_name(finding.dtype),
            shape=finding.shape,
            device=device,
            stored=what,
        )
        found.append((key, stored))
    return found


def _forward_line(module: nn.Module) -> Line:
    """The first line of ``module``'s ``forward``: where a store no hook saw is reported."""
    forward = type(module).forward
    try:
        return inspect.getsourcefile(forward) or "<unknown>", inspect.getsourcelines(forward)[1]
    except (OSError, TypeError):
        return "<unknown>", 0


_Held = dict[tuple[str, str], list[torch.Tensor]]  # by (module path, attribute)


def recomputed(
    run: Callable[[], object], twin: nn.Module, before: dict[int, Located]
) -> set[tuple[str, str]]:
    """The ``(module path, attribute)`` of the state forward stores on ``twin`` (a fresh copy, not
    run yet; ``before``: what ``.to()`` leaves behind in it) that it recomputes before every use:
    ``run`` (its forward) is called twice, and the second call reads none of the tensors the
    first stored there, and reads one it stored there itself. Empty when a call raises."""
    try:
        run()
        first = _stored(twin, before)
        with _Reads() as reads:
            run()
    except Exception:  # noqa: BLE001 - what cannot run twice stays reported
        return set()
    second = _stored(twin, before)
    return {
        key
        for key, old in first.items()
        if not any(reads.read(t) for t in old)
        and any(reads.read(t) and not any(t is o for o in old) for t in second.get(key, ()))
    }


def _stored(twin: nn.Module, before: dict[int, Located]) -> _Held:
    """The tensors stored on ``twin`` where ``.to()`` leaves them, not there ``before``."""
    held: _Held = {}
    for entry in locate_unregistered(twin):
        finding = entry.finding
        if id(finding.tensor) not in before and finding.kind == "tensor":
            held.setdefault((entry.holder_path, finding.attribute), []).append(finding.tensor)
    return held


class _Reads(TorchFunctionMode):
    """The tensors the code hands to torch (not a read of their shape, dtype or device)."""

    def __init__(self) -> None:
        super().__init__()
        self._read: dict[int, weakref.ref[torch.Tensor]] = {}

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        result = func(*args, **(kwargs or {}))
        if getattr(func, "__name__", "") != "__get__" or isinstance(result, torch.Tensor):
            for tensor in tensors_in((args, kwargs)):
                self._read[id(tensor)] = weakref.ref(tensor)
        return result

    def read(self, tensor: torch.Tensor) -> bool:
        seen = self._read.get(id(tensor))
        return seen is not None and seen() is tensor
