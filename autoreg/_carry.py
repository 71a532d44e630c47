"""``.to()`` for what autoreg carries (rows 8, 10 and 11): where nn.Module converts a buffer.

What autoreg carries is recorded where the decision is carried out (``_execute``): an assignment
whose decision ``moves`` a value autoreg stores marks the name ``CARRIED``; any other assignment
but ``None``, or a registration, takes the mark away (``_state``); ``None`` and a deletion (state
reset or freed) keep it, with nothing to convert until a tensor comes back. ``.to()``, the audits
and ``reset_buffers`` read the same mark (``carried``), so they agree with the contract by
construction; a copy carries what the original carries, since it copies the marks; and a value that
nothing carries any more (``self.h = 3``) is not looked at. An instance unpickled from before its
class used autoreg is adopted: what the contract would carry is marked (``adopt``).

One ``.to()`` (any ``_apply``): nn.Module's ``_apply`` converts a module's children, then its
parameters, then its buffers; ``fn`` is handed to it untouched. An autoreg module's ``_apply``
(``apply``) converts what the module carries right after that, in the same call: where and when
nn.Module converts a buffer held in the same place, whoever calls it (a parent's recursion, an
``_apply`` override that converts an EMA copy, a plain root), as often as nn.Module converts its
buffers (a submodule shared by two parents: twice), so an override around ``super()._apply``
sees what it would see on the hand-written twin. Nothing is shared between two modules' calls
and nothing outlives a call: nothing is walked but the module itself, and a cycle raises
``RecursionError`` as nn.Module's recursion does.

Identity is kept within one module, where it holds whatever the root: before nn.Module's work
the module notes which carried values hold its own parameters and buffers (``_Conversion``), and
after it such a value becomes what nn.Module made of that tensor; a tensor the module carries in
several places is converted once and stays one tensor. A parameter is never converted here: a
carried value keeps the parameter object, or, where nn.Module replaces a parameter of the module
or of a module below it (``.to("meta")``, ``to_empty``), gets the new one. Another module's buffer
held in a carried value is converted as a buffer registered in two modules is: a tensor each.

A value that cannot be converted (a tensor that escaped ``torch.func.vmap``, a tuple subclass that
cannot be rebuilt) is left as it is, as nn.Module leaves every plain attribute; warn mode says so.
Each value is converted fully or not at all, and written back at once, so that the old one is
freed as nn.Module frees an old buffer.

A carried complex tensor follows the device of ``.to()`` and a complex dtype, never a real one
(``_complex``): nn.Module casts a complex buffer to a real dtype and drops its imaginary part,
where the plain attribute it was before migrating is never touched. (Row 10 carries a complex
tensor assigned while the module is built, rather than register it, for the same reason.)
"""

from __future__ import annotations

import sys
import warnings
import weakref
from collections.abc import Callable
from typing import Any, Final

import torch
from torch import nn

from ._config import Mode
from ._contract import STORE, decide
from ._errors import AutoRegisterWarning
from ._facts import HELD, kind_of, situation
from ._facts import is_compiling as _is_compiling
from ._messages.contract import NOT_CONVERTED
from ._messages.describe import describe
from ._record import ClassRecord
from ._state import (
    BUFFER,
    CARRIED,
    CARRYING,
    MODULE_INTERNALS,
    OWN_KEYS,
    SWEEP_AT,
    UNLISTED,
    role_key,
    role_name,
)
from ._walk import iter_tensors, map_tensors

__all__ = [
    "adopt",
    "apply",
    "carried",
    "carried_values",
    "carry",
    "deleted_roles",
    "listed",
    "sweep",
]

_ApplyFn = Callable[[torch.Tensor], torch.Tensor]
_ref: Final = weakref.ref
_Tensor: Final = torch.Tensor
_Parameter: Final = nn.Parameter
_NONE: Final[dict[str, str]] = {}


def carried(module: nn.Module, name: str) -> bool:
    """Whether ``.to()`` converts what ``module.name`` holds: autoreg carries the name, and the
    module holds it (a carried name deleted keeps its role)."""
    d = module.__dict__
    return name in d and d.get(role_key(name)) == CARRIED


def carried_values(module: nn.Module) -> dict[str, Any]:
    """The values ``module`` (an autoreg instance) carries, by name."""
    d = module.__dict__
    return {
        name: d[name] for name, key in listed(module).items() if name in d and d.get(key) == CARRIED
    }


def carry(module: nn.Module, name: str) -> None:
    """Record that autoreg carries ``module.name``: its role, and the instance's list of the
    names it has carried (a name deleted stays in it, its role kept, until the list is pruned as
    it grows). A name is added to the list in place (a model that makes up names as it runs
    would copy it at every new one), where a copy that bypassed autoreg's hooks may see it: the
    copy's own roles say what it carries (``_state``)."""
    if _is_compiling():  # the list is left to eager code (_state.UNLISTED)
        object.__setattr__(module, role_key(name), CARRIED)
        object.__setattr__(module, CARRYING, UNLISTED)
        return
    # Interned, as setattr interns the key it stores: every instance's list then holds the one
    # string the instances' __dict__s hold, which .to() finds there by identity, in cache.
    key = sys.intern(role_key(name))
    object.__setattr__(module, key, CARRIED)
    names = module.__dict__.get(CARRYING)
    if names is UNLISTED:
        names = listed(module)
    if names is None:
        object.__setattr__(module, CARRYING, {name: key})
    elif name not in names:
        size = len(names)
        if size >= _PRUNE_FROM and not size & (size - 1):  # at each power of two: amortized O(1)
            names = _pruned(module, names)
        names[name] = key


_PRUNE_FROM: Final = 16


def _pruned(module: nn.Module, names: dict[str, str]) -> dict[str, str]:
    """The instance's list of carried names without those it no longer carries (deleted, given
    up, or taken out of ``__dict__`` around ``__delattr__``), whose role keys holding None (a
    deleted name's) or ``CARRIED`` (a name no longer held) go too: a model that makes up a name at
    every step and forgets it keeps a bounded list. A new dict: a copy that holds the old one
    keeps it (_state)."""
    d = module.__dict__
    kept = {n: k for n, k in names.items() if n in d and d.get(k) == CARRIED}
    for n, k in names.items():
        if n not in kept and k in d and (d[k] is None or d[k] == CARRIED):
            del d[k]
    d[CARRYING] = kept
    return kept


_SWEEP_FROM: Final = 64


def deleted_roles(d: dict[str, Any], *, replica: bool = False) -> list[str]:
    """The keys in ``d`` (an instance's ``__dict__``, or its state) of the roles of names deleted:
    None, or ``CARRIED`` for a name ``d`` no longer holds (``__delattr__``). With ``replica`` (``d``
    a copy of another instance's ``__dict__`` made past autoreg's hooks: ``DataParallel``'s
    replicas), every role of a name ``d`` does not hold itself but autoreg's buffers'
    (``BUFFER``): a replica's parameters are taken out of its registry and their copies stored
    under their names by torch (``replicate``), and what a name held in a registry was to the
    original (the model's, carried once) tells nothing of that store."""
    deleted = []
    for key, role in d.items():
        if type(key) is str and (
            role is None or (type(role) is str and (role != BUFFER if replica else role == CARRIED))
        ):
            name = role_name(key)
            if name is not None and (role is None or name not in d):
                deleted.append(key)
    return deleted


def sweep(d: dict[str, Any]) -> None:
    """Forget the roles of the names deleted from the instance whose ``__dict__`` is ``d``, once it
    has doubled in size since the last sweep (amortized O(1)): a class with a framework base gives
    every name it is assigned a role, which its deletion leaves holding None, and the list of
    carried names (``_pruned``) holds only the names carried. Eager code only."""
    if len(d) < d.get(SWEEP_AT, _SWEEP_FROM):
        return
    for key in deleted_roles(d):
        del d[key]
    d[SWEEP_AT] = max(_SWEEP_FROM, 2 * len(d))


def listed(module: nn.Module) -> dict[str, str]:
    """The instance's list of carried names; made again from the names' roles when compiled code
    left ``UNLISTED`` in its place (every name carried then has its role: nothing is lost)."""
    d = module.__dict__
    names: Any = d.get(CARRYING, _NONE)
    if names is UNLISTED:
        names = {}
        for key, role in list(d.items()):
            if type(role) is str and role == CARRIED:
                name = role_name(key)
                if name is not None:
                    names[name] = key
        d[CARRYING] = names
    listing: dict[str, str] = names
    return listing


def adopt(module: nn.Module) -> None:
    """Carry what an instance unpickled from before its class used autoreg holds: each value
    that the contract would carry were it assigned now, at run time."""
    record: ClassRecord = type(module).__autoreg__  # type: ignore[attr-defined]
    d = module.__dict__
    for name in list(d.keys() - MODULE_INTERNALS):
        value = d[name]
        if name.startswith(OWN_KEYS) or kind_of(value) not in HELD:
            continue
        s = situation(record, d, name, value, d.get(role_key(name)), None)
        decision = decide(record, s, compiling=False)
        if decision.moves and decision.action is STORE:
            carry(module, name)


# --- one .to() -----------------------------------------------------------------------------------


def apply(module: nn.Module, fn: _ApplyFn, recurse: bool = True) -> Any:
    """``module._apply(fn, recurse)`` for an autoreg module (``AutoRegisterMixin._apply``):
    nn.Module's work, then what the module carries.

    A module that carries nothing costs one small frame (the 2,000 blocks of the benchmark's
    model: a larger one cost 40 ns more per block). For one that does, ``_carrying`` converts
    the common case (plain tensors, each carried once, none the module's own) inline, without a
    call per value: on the benchmark's small layer each extra call is measurable. Anything else
    is a ``_Conversion``.
    """
    d = module.__dict__
    names = d.get(CARRYING)
    # The next _apply in the MRO, looked up by name so that a patched one is honoured; recurse is
    # passed on only when unset, as nn.Module does, so that overrides written before it existed
    # (torchmetrics' Metric._apply) keep working.
    apply_next: Any = type(module).__autoreg__.apply_next._apply  # type: ignore[attr-defined]
    if not names:  # nothing carried: nn.Module's work, from a frame kept small
        return apply_next(module, fn) if recurse else apply_next(module, fn, recurse)
    if names is UNLISTED:  # compiled code carried a name first
        names = listed(module)
    return _carrying(module, fn, recurse, d, names, apply_next)


def _carrying(
    module: nn.Module,
    fn: _ApplyFn,
    recurse: bool,
    d: dict[str, Any],
    names: dict[str, str],
    apply_next: Any,
) -> Any:
    """``apply`` for a module that carries something (``names``, its ``CARRYING``)."""
    # Before nn.Module's work, while the old tensors are where the module registers them: is it
    # the common case? (Only code below the mixin runs until the conversion, and none of it
    # assigns what the model carries: the values read now are those converted.) One carried
    # tensor, the most common case of all, first.
    if len(names) == 1:
        for name, key in names.items():  # noqa: B007 - the one, read after the loop
            tensor = d.get(name)
        if type(tensor) is _Tensor:
            for registered in d["_buffers"].values():  # (a parameter is no plain tensor)
                if registered is tensor:
                    break
            else:
                one: torch.Tensor = tensor
                result = apply_next(module, fn) if recurse else apply_next(module, fn, recurse)
                # Where nn.Module has just converted the module's buffers: the carried tensor.
                if d.get(name) is not tensor:  # not what was there before: the general case
                    _Conversion(module, fn, recurse).run_one(name, key)
                elif d.get(key) == CARRIED and not (one.requires_grad and one.is_leaf):
                    try:  # (a leaf that requires grad is a weight, row 6: left)
                        new = _complex(one, fn) if one.dtype.is_complex else fn(one)
                    except RecursionError:
                        raise
                    except Exception as error:  # noqa: BLE001 - left as nn.Module leaves it
                        _not_converted(module, name, one, error)
                        return result
                    if new is not one:
                        d[name] = new  # a conversion, not an assignment: as nn.Module does
                return result
    simple = True
    buffers = d["_buffers"].values()  # (a parameter is no plain tensor)
    for name in names:
        value = d.get(name)
        if value is None:
            continue
        if type(value) is _Tensor:
            for registered in buffers:
                if registered is value:
                    break
            else:
                continue
        simple = False
        break
    if simple and len(names) > 1:
        held = [value for name in names if (value := d.get(name)) is not None]
        simple = len({id(value) for value in held}) == len(held)  # no tensor carried twice
    if not simple:
        conversion = _Conversion(module, fn, recurse)
        result = apply_next(module, fn) if recurse else apply_next(module, fn, recurse)
        conversion.run()  # where nn.Module has just converted the module's buffers
        return result
    result = apply_next(module, fn) if recurse else apply_next(module, fn, recurse)
    # Where nn.Module has just converted the module's buffers: what the module carries. (A
    # snapshot of the list: fn may store new state on the module, and carry() adds in place.)
    for name, key in tuple(names.items()):
        tensor = d.get(name)
        if tensor is None or d.get(key) != CARRIED:
            continue
        if type(tensor) is not _Tensor:  # not what was there before: the general case
            _Conversion(module, fn, recurse).run_one(name, key)
            continue
        if tensor.requires_grad and tensor.is_leaf:
            continue  # a weight (row 6)
        try:
            new = _complex(tensor, fn) if tensor.dtype.is_complex else fn(tensor)
        except RecursionError:
            raise
        except Exception as error:  # noqa: BLE001 - left as nn.Module leaves it
            _not_converted(module, name, tensor, error)
            continue
        if new is not tensor:
            d[name] = new  # a conversion, not an assignment: as nn.Module writes _buffers
    return result


def _complex(tensor: torch.Tensor, fn: _ApplyFn) -> torch.Tensor:
    """``fn(tensor)`` for a complex tensor, except that it is never cast to a real dtype: where
    ``fn`` would (``.to(torch.bfloat16)``, ``.type(torch.float32)``), it is moved to ``fn``'s
    device only. Where ``fn`` sends it is asked of an empty tensor like it: no copy, and no value
    dropped (torch warns about that only when there are values)."""
    where = fn(tensor.new_empty(0))
    if where.is_complex():
        return fn(tensor)
    return tensor.to(where.device)


class _Conversion:
    """What one module carries, converted in one ``_apply``: each value fully or not at all,
    each tensor once, a carried alias of the module's own parameter or buffer (or of a parameter
    of a module below it) made what nn.Module made of it. Built before nn.Module's work (the
    places of those tensors), run after it."""

    __slots__ = ("done", "fn", "module", "places")

    def __init__(self, module: nn.Module, fn: _ApplyFn, recurse: bool) -> None:
        self.module = module
        self.fn = fn
        # id(tensor) -> (tensor, registry, key): where a carried tensor is registered, for the
        # module's own parameters and buffers, and the parameters below it. The tensor is held
        # until it is converted: its id stays its own (it is carried, so alive anyway).
        self.places: dict[int, tuple[torch.Tensor, dict[str, Any], str]] = {}
        # id(original) -> (weak original, converted), and id(converted) -> itself: a tensor met
        # again (carried twice, or in a container carried under two names) is converted once.
        # None when no tensor can be met twice: the values are distinct plain tensors.
        self.done: dict[int, tuple[weakref.ref[torch.Tensor], torch.Tensor]] | None = None
        held: dict[int, torch.Tensor] = {}
        parameters = False
        d = module.__dict__
        for name, key in listed(module).items():
            value = d.get(name)
            if value is None or d.get(key) != CARRIED:
                continue
            if type(value) is _Tensor:
                if id(value) in held:
                    self.done = {}
                held[id(value)] = value
                continue
            self.done = {}  # a container: it may hold a tensor twice, or be held twice
            for _, tensor in iter_tensors(value):
                held[id(tensor)] = tensor
                parameters = parameters or (
                    type(tensor) is not _Tensor and isinstance(tensor, _Parameter)
                )
        if not held:
            return
        for registry in (d["_parameters"], d["_buffers"]):
            if registry:
                self._note(held, registry)
        if parameters and recurse:  # a parameter below: nn.Module may replace it (meta)
            for below in module.modules():
                if below is not module:
                    self._note(held, below._parameters)

    def _note(self, held: dict[int, torch.Tensor], registry: dict[str, Any]) -> None:
        for key, tensor in registry.items():
            if id(tensor) in held and id(tensor) not in self.places:
                self.places[id(tensor)] = (tensor, registry, key)

    def run(self) -> None:
        """Convert what the module carries now, each value written back once converted."""
        for name, key in list(listed(self.module).items()):
            self.run_one(name, key)

    def run_one(self, name: str, key: str) -> None:
        """Convert what the module carries under ``name`` (its role under ``key``)."""
        d = self.module.__dict__
        value = d.get(name)
        if value is None or d.get(key) != CARRIED:
            return
        try:
            new = self.tensor(value) if type(value) is _Tensor else self.value(value)
        except RecursionError:
            raise
        except Exception as error:  # noqa: BLE001 - left as nn.Module leaves it
            _not_converted(self.module, name, value, error)
            return
        if new is not value:
            d[name] = new  # a conversion, not an assignment: as nn.Module writes _buffers

    def value(self, value: Any) -> Any:
        """What a carried value that is not a plain tensor becomes: its tensors converted, and a
        tuple with its own ``.to()`` (a ``PackedSequence``) moved by it."""
        if self.done is None:  # a value that changed since the conversion began: be careful
            self.done = {}
        if isinstance(value, torch.Tensor):
            return self.tensor(value)

        def move(value: Any) -> Any:  # to the device and dtype fn gives its first tensor
            first = next((t for _, t in iter_tensors(value)), None)
            if first is None:
                return value
            probe = self.tensor(first)
            if probe.device == first.device and probe.dtype == first.dtype:
                return value
            return value.to(device=probe.device, dtype=probe.dtype)

        return map_tensors(value, self.tensor, move)

    def tensor(self, tensor: torch.Tensor) -> torch.Tensor:
        """What one carried tensor becomes, once per tensor."""
        done = self.done
        if done is not None:
            seen = done.get(id(tensor))
            if seen is not None and seen[0]() is tensor:
                return seen[1]
        new: torch.Tensor | None = None
        if self.places:
            place = self.places.pop(id(tensor), None)
            if place is not None and place[0] is tensor:
                new = place[1].get(place[2])  # what nn.Module made of it
        if new is None:
            if (tensor.requires_grad and tensor.is_leaf) or (
                type(tensor) is not _Tensor and isinstance(tensor, _Parameter)
            ):
                return tensor  # a weight (row 6), or a parameter: its module converts it
            new = _complex(tensor, self.fn) if tensor.is_complex() else self.fn(tensor)
        if done is not None:
            done[id(tensor)] = (_ref(tensor), new)
            if new is not tensor:
                done[id(new)] = (_ref(new), new)
        return new


def _not_converted(module: nn.Module, name: str, value: object, error: Exception) -> None:
    record: ClassRecord = type(module).__autoreg__  # type: ignore[attr-defined]
    key = ("convert", name)
    if record.mode is Mode.WARN and key not in record.warned:
        record.warned.add(key)
        message = NOT_CONVERTED.format(
            cls=type(module).__name__, name=name, value=describe(value), error=error
        )
        warnings.warn(message, AutoRegisterWarning, stacklevel=2)
