"""The audits' copies of a model: deep copies that share nothing with it.

Both audits convert a copy (the forward audit runs it on the CPU and in a low precision, the
attribute audit moves a class's own ``_apply`` to the meta device), and the model must be left
as it was. ``copy.deepcopy`` alone does not promise that:

- it shares functions: a function a module keeps (minGPT's ``Block.mlpf``, a lambda over the
  block's own MLP; in a list, a ``partial``, behind a decorator) would run the original's weights,
  and write the original's closure state. Here a function with a closure, defaults or attributes
  is made again, what it holds copied through the same memo (a cell two functions share stays
  shared; what cannot be copied is shared, as ``deepcopy`` would); a ``staticmethod`` or
  ``classmethod`` kept as an attribute, which ``deepcopy`` refuses, wraps a copy of its function;
- a class's own ``__deepcopy__`` may share: ``copy.copy(self)`` shares the parameters, and their
  registries, which the copy's ``.to()`` converts in place: the copy gets registries and
  parameters of its own; one that gives back the module itself cannot be converted apart from
  it, and the copy is refused (``SharedModuleError``).

Told by identity: the copy's objects against the model's.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import threading
import types
from collections.abc import Iterator
from typing import Any, Final

import torch
from torch import nn

from ._messages.audits import COPY_IS_ITSELF

__all__ = ["SharedModuleError", "isolated_copy"]

_REGISTRIES: Final = ("_parameters", "_buffers", "_modules", "_non_persistent_buffers_set")


class SharedModuleError(Exception):
    """A module of the model whose deep copy is the module itself."""


def isolated_copy(model: nn.Module, memo: dict[int, Any]) -> nn.Module:
    """``copy.deepcopy(model, memo)``, sharing nothing with ``model`` that the copy's conversion
    or run would change. Raises ``SharedModuleError`` for a module whose copy is itself."""
    originals = {id(module) for module in model.modules()}
    with _functions_copied():
        twin: nn.Module = copy.deepcopy(model, memo)
        if id(twin) in originals:
            raise SharedModuleError(COPY_IS_ITSELF.format(cls=type(model).__name__))
        registries = {
            id(registry)
            for module in model.modules()
            for name in _REGISTRIES
            if (registry := module.__dict__.get(name)) is not None
        }
        todo = [twin]
        while todo:  # the copy's modules, each given registries of its own
            d = todo.pop().__dict__
            for name in _REGISTRIES:
                registry = d.get(name)
                if registry is not None and id(registry) in registries:
                    d[name] = copy.copy(registry)  # shared by a shallow copy: its own now
            children = d.get("_modules") or {}
            for key, child in children.items():
                if child is not None and id(child) in originals:  # never deep-copied
                    made = copy.deepcopy(child, memo)
                    if made is child:
                        raise SharedModuleError(COPY_IS_ITSELF.format(cls=type(child).__name__))
                    children[key] = made
                if child is not None:
                    todo.append(children[key])
    tensors = {id(t) for module in model.modules() for t in _registered(module)}
    copies: dict[int, torch.Tensor] = {}
    for module in twin.modules():
        for name in ("_parameters", "_buffers"):
            registry = module.__dict__.get(name) or {}
            for key, tensor in registry.items():
                if tensor is not None and id(tensor) in tensors:  # a shallow copy's
                    if id(tensor) not in copies:
                        copies[id(tensor)] = _copy_tensor(tensor)
                    registry[key] = copies[id(tensor)]
    return twin


def _registered(module: nn.Module) -> Iterator[torch.Tensor]:
    for name in ("_parameters", "_buffers"):
        yield from (t for t in (module.__dict__.get(name) or {}).values() if t is not None)


def _copy_tensor(tensor: torch.Tensor) -> torch.Tensor:
    """A copy of a parameter or buffer, of its kind."""
    value = tensor.detach().clone()
    if isinstance(tensor, nn.Parameter):
        return nn.Parameter(value, tensor.requires_grad)
    return value


# Thread ids of the copies being made now: only theirs copy functions (deepcopy's dispatch table
# is the process's; another thread's deepcopy keeps sharing them).
_COPYING: set[int] = set()
_LOCK: Final = threading.Lock()


@contextlib.contextmanager
def _functions_copied() -> Iterator[None]:
    """``copy.deepcopy`` copies functions, in this thread, while the block runs."""
    me = threading.get_ident()
    dispatch: dict[type, Any] = copy._deepcopy_dispatch  # type: ignore[attr-defined]
    with _LOCK:
        if not _COPYING:
            _SAVED.update({kind: dispatch.get(kind) for kind in _COPIERS})
            dispatch.update(_COPIERS)
        _COPYING.add(me)
    try:
        yield
    finally:
        with _LOCK:
            _COPYING.discard(me)
            if not _COPYING:
                for kind, copier in _SAVED.items():
                    if copier is None:
                        dispatch.pop(kind, None)
                    else:
                        dispatch[kind] = copier


def _deepcopy_function(function: types.FunctionType, memo: dict[int, Any]) -> Any:
    if threading.get_ident() not in _COPYING:
        return function
    holds = function.__closure__ or function.__defaults__ or function.__kwdefaults__
    if not (holds or function.__dict__):
        return function  # it holds nothing: a module-level function, shared
    cells = tuple(_cell(cell, memo) for cell in function.__closure__ or ())
    made = types.FunctionType(
        function.__code__, function.__globals__, function.__name__, None, cells or None
    )
    memo[id(function)] = made  # before what it holds: a function that reaches itself
    _keep_alive(function, memo)
    for old, new in zip(function.__closure__ or (), cells, strict=True):
        if new is not old and _has_contents(old):
            new.cell_contents = _deep(old.cell_contents, memo)
    made.__defaults__ = _deep(function.__defaults__, memo)
    made.__kwdefaults__ = _deep(function.__kwdefaults__, memo)
    made.__dict__.update(_deep(function.__dict__, memo))
    made.__qualname__ = function.__qualname__
    made.__module__ = function.__module__
    made.__doc__ = function.__doc__
    made.__annotations__ = function.__annotations__
    return made


def _deepcopy_wrapper(wrapper: Any, memo: dict[int, Any]) -> Any:
    """A ``staticmethod`` or ``classmethod`` a module keeps as an attribute (a library exposing a
    helper so), which ``deepcopy`` refuses: the same kind, around a copy of its function."""
    if threading.get_ident() not in _COPYING:  # another thread's copy: refused, as deepcopy does
        return copy._reconstruct(  # type: ignore[attr-defined]
            wrapper, memo, *wrapper.__reduce_ex__(4)
        )
    return type(wrapper)(copy.deepcopy(wrapper.__func__, memo))


_COPIERS: Final[dict[type, Any]] = {
    types.FunctionType: _deepcopy_function,
    staticmethod: _deepcopy_wrapper,
    classmethod: _deepcopy_wrapper,
}
_SAVED: dict[type, Any] = {}


def _cell(old: types.CellType, memo: dict[int, Any]) -> types.CellType:
    """The copy's cell for ``old``: one per cell, whichever function holds it; an empty cell (a
    name not bound yet) is shared, as it holds nothing."""
    if not _has_contents(old):
        return old
    new: types.CellType | None = memo.get(id(old))
    if new is None:
        new = memo[id(old)] = types.CellType()
        _keep_alive(old, memo)
    return new


def _has_contents(cell: types.CellType) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - raises ValueError when empty
    except ValueError:
        return False
    return True


def _deep(value: Any, memo: dict[int, Any]) -> Any:
    """``value`` deep-copied through ``memo``. Where that fails (a lock, a file inside), what
    the failed copy left in ``memo`` (half-built copies) is taken out, and a dict, list, tuple
    or plain object is made again around what of it can be copied, the rest shared: a layer of
    the model it holds is the copy's still."""
    # deepcopy only adds to memo, in order: what a failed copy added is its last entries (read
    # from the end: the cost follows the failed copy, not the model copied so far).
    size = len(memo)
    kept = len(memo.get(id(memo), ()))
    try:
        return copy.deepcopy(value, memo)
    except Exception:  # noqa: BLE001 - copied piece by piece below
        for key in list(itertools.islice(reversed(memo), max(len(memo) - size, 0))):
            del memo[key]
        if id(memo) in memo:
            del memo[id(memo)][kept:]
    if type(value) in (dict, list, tuple):
        items = value.items() if isinstance(value, dict) else enumerate(value)
        made: Any = {} if isinstance(value, dict) else [None] * len(value)
        if not isinstance(value, tuple):
            memo[id(value)] = made
            _keep_alive(value, memo)
        for key, item in items:
            made[key] = _deep(item, memo)
        return tuple(made) if isinstance(value, tuple) else made
    fields = getattr(value, "__dict__", None)
    if type(fields) is dict and not isinstance(value, (type, types.ModuleType, nn.Module)):
        try:
            made = copy.copy(value)
        except Exception:  # noqa: BLE001 - shared, as deepcopy shares what it cannot copy
            return value
        memo[id(value)] = made
        _keep_alive(value, memo)
        made.__dict__.update({key: _deep(item, memo) for key, item in fields.items()})
        return made
    return value


def _keep_alive(value: object, memo: dict[int, Any]) -> None:
    """What ``deepcopy`` does for each object it copied: its id keys ``memo`` while it lives."""
    memo.setdefault(id(memo), []).append(value)
