"""``AutoRegisterMixin``: tensors assigned to a module move with it.

Design note
-----------
Every assignment takes one path: ``situation`` reads its facts, ``decide`` returns what ``classify``
decided for that situation (kept per class), ``enforce`` applies strict and warn mode, ``execute``
carries the decision out. There is no second decision: a steady-state assignment (``m.x = 1``, a
runtime tensor updated in ``forward``) is a dictionary lookup of a decision ``classify`` made; a
buffer updated with a plain tensor, the commonest, is row 3 whatever the name's role, taken
without building the situation (``test_rows`` holds ``classify`` to that answer). What ``.to()``
converts is what those decisions carried, marked per name when they were carried out
(``_execute``, ``_carry``). One fact is read by ``__setattr__`` itself, after ``situation``:
whether a first tensor stored after construction is torch's own (row 4: fx's tracer, FSDP1,
DataParallel's replicate, functional_call; ``_facts.TORCH_UNREAD``), from the caller's frame.
Inside a compiled function, after a graph break, dynamo runs an eager ``__setattr__`` as it is
but compiles the functions it calls as frames of their own, where no frame can be read.

Decisions about a class are made when the class is created (``_record``, ``_construction``) and
finalized when its first instance is assigned to (annotations read again). Per instance, autoreg
keeps in ``__dict__`` only the roles of some names (``_state``).

Footguns this catches: a tensor left behind by ``.cuda()``; ``.half()`` leaving a constant in
float32; a checkpoint that changes when a model migrates (buffers are non-persistent by default);
per-rank runtime state overwritten by DDP's buffer broadcast (runtime tensors are not buffers);
the weights prune / weight_norm / spectral_norm derive turned into buffers (row 6);
``nn.Buffer(persistent=False)`` silently made persistent (nn.Module handles ``nn.Buffer``); a buffer
hidden behind a class attribute (reported, never registered); a framework's own state
(Lightning's hyperparameters, torchmetrics' states) converted or broadcast (row 4); an old pickle
of the class, from before it used autoreg, whose tensors would stay behind (they are carried).

Nothing on the steady-state path calls ``warnings``, ``logging``, a ``ContextVar`` or
``sys._getframe``: they break torch.compile graphs on every call. Inside code dynamo compiles,
the path reads only what the assignments there cannot change (no per-class dict that grows), so
that compile counts are the hand-written module's.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any, ClassVar, Final

import torch
from torch import nn

from ._carry import adopt, apply, carry, deleted_roles, listed, sweep
from ._construction import (
    CONSTRUCTION_METHODS,
    compiled_marks,
    finalize,
    made_again_from,
    prepare,
)
from ._contract import EXPLICIT_ROW, OTHER_ROW, REGISTER, REGISTERED, STORE, Decision, decide
from ._declarations import Declaration, defining_statement
from ._enforce import enforce
from ._execute import execute, register, unregister
from ._export import refuse_while_exporting
from ._facts import (
    BUFFERS,
    EXPLICIT,
    OTHER,
    RUNTIME_KINDS,
    TENSOR,
    TORCH_ASSIGNS,
    TORCH_UNREAD,
    Situation,
    compiled_torch_assigns,
    read_torch_assigners,
    situation,
)
from ._facts import is_compiling as _is_compiling
from ._frames import past_dynamo, skip_as_dynamo_frames
from ._paths import AUTOREG_DIR, TORCH_DIR
from ._record import (
    CACHE_LIMIT,
    ClassRecord,
    create_record,
    plain_subclass_of,
    record_of,
    unknown_keywords,
    unseen_class,
)
from ._state import (
    BUFFER,
    CARRIED,
    CARRYING,
    CONSTRUCTING,
    FRAMEWORK,
    LEGACY_ROLES,
    MODULE_INTERNALS,
    OWN_KEYS,
    PENDING,
    PICKLED,
    UNDECIDED,
    role_key,
)

__all__ = ["AutoRegisterMixin", "Module"]
_TENSOR: Final = torch.Tensor
_MODULE: Final = nn.Module

# What a copy never takes from the state it is made from: a copy is not being built.
_CONSTRUCTION_KEYS: Final = (CONSTRUCTING, PENDING)
_NOT_RESTORED: Final = frozenset((*_CONSTRUCTION_KEYS, PICKLED, LEGACY_ROLES))


if TYPE_CHECKING:
    # Type checkers see the mixin as the module it always ends up in; at run time it is a plain
    # class, so that it can stand before any nn.Module subclass in the bases.
    _MixinBase = nn.Module
else:
    _MixinBase = object


class AutoRegisterMixin(_MixinBase):
    """Mix into an ``nn.Module`` subclass, first in its bases: its assigned tensors move with it.

    Class keywords, inherited by subclasses (each from the nearest class in the MRO that set it)
    and overridable by them:

    - ``persistent`` (default False): whether auto-registered buffers are saved in ``state_dict``.
    - ``strict`` (default False): raise ``UnregisteredTensorError`` on a tensor whose name is not
      declared by an annotation, instead of registering or carrying it.
    - ``warn`` (default False): register or carry it, and warn once per class and name.
    """

    __autoreg__: ClassVar[ClassRecord]

    # What an instance reads under _state.CONSTRUCTING where its __dict__ holds no mark of a
    # construction: compiled code reads the mark with getattr, which thus runs no __getattr__
    # (_state.is_building_compiled).
    _autoreg_constructing: ClassVar[None] = None

    def __init_subclass__(
        cls,
        *,
        persistent: bool | None = None,
        strict: bool | None = None,
        warn: bool | None = None,
        **kwargs: Any,
    ) -> None:
        if kwargs:
            unknown_keywords(cls, AutoRegisterMixin, kwargs)
        super().__init_subclass__(**kwargs)
        keywords = {"persistent": persistent, "strict": strict, "warn": warn}
        if _is_compiling():
            # A class statement inside a compiled function: dynamo compiles this frame too, and
            # would trace the reading of the class (sys._getframe warns, its frame walk raised).
            # Read by eager Python, as in eager code.
            past_dynamo(_set_up_past_dynamo, cls, keywords)
        else:
            _set_up(cls, keywords, sys._getframe(1))

    def __setattr__(self, name: str, value: Any) -> None:
        cls = type(self)
        record = cls.__autoreg__
        d = self.__dict__
        if _is_compiling():
            # Frames cannot be walked in compiled code, nor grown dicts read (dynamo would guard
            # on them): the decision is made afresh (the class read while dynamo traces).
            role_at = role_key(name)
            role = d.get(role_at)
            compiled_marks(cls)  # (before the mark is read)
            s = situation(record, d, name, value, role, self)
            if s[2] is UNDECIDED:
                # Row 4 cannot tell here, and warn or strict mode says so: read eagerly (from the
                # frames), a graph break, as a warning is
                past_dynamo(AutoRegisterMixin.__setattr__, self, name, value)
                return
            if (
                role is None
                and s[3] is None
                and s[1] in RUNTIME_KINDS
                and not s[4]
                and s[2] != FRAMEWORK
                and compiled_torch_assigns(cls, name)  # as below, read while dynamo traces
            ):
                s = (name, s[1], FRAMEWORK, s[3], s[4], s[5], s[6])
            if s[2] is not role:  # row 4 answered: kept, as in eager code (the first decides)
                object.__setattr__(self, role_at, s[2])  # traced as carry() stores a role
            decision = decide(record, s, compiling=True)
        else:
            if record.cls is not cls:  # a base's __init_subclass__ hid the class from autoreg
                raise unseen_class(cls)
            key = record.role_keys.get(name)
            if key is None:
                key = role_key(name)
                if len(record.role_keys) < CACHE_LIMIT:
                    record.role_keys[name] = key
            role = d.get(key)
            buffers = d.get("_buffers")
            value_type = type(value)  # what situation reads first: three replays start from it
            if value_type is _TENSOR:
                if (
                    buffers  # (a new name, the commonest in construction, fails at the next test)
                    and name in buffers
                    and "_parameters" in d
                    and name not in d["_parameters"]
                    and not getattr(value, "_is_buffer", False)  # an nn.Buffer is row 1's
                ):
                    # A buffer updated with a tensor: row 3 whatever the name's role (classify's
                    # answer, tested), the facts situation would read (registries first) read
                    # here.
                    if record.direct or role == CARRIED:
                        s = (name, TENSOR, role, BUFFERS, False, None, False)
                        execute(self, record, s, value, REGISTERED)
                    else:  # past a base's __setattr__ override, as below
                        base_setattr: Any = record.setattr_next.__setattr__
                        base_setattr(self, name, value)
                    return
            elif role is None and record.final:  # (else the path below finalizes the class)
                if issubclass(value_type, _MODULE):  # (its type only, as kind_of reads it)
                    parameters = d.get("_parameters")
                    if (
                        parameters is not None
                        and name not in parameters
                        and name not in (buffers or ())
                        and name not in d.get("_modules", ())
                    ):
                        # A module under a new name (every submodule a constructor adds): row 1
                        # whatever else (classify's answer, tested), the facts read here.
                        s = (name, EXPLICIT, None, None, False, None, False)
                        execute(self, record, s, value, EXPLICIT_ROW)
                        return
                elif name == "__class__" and isinstance(value, type):
                    # A class under a name no registry can hold: row 12 whatever else
                    # (classify's answer, tested). torch's parametrizations swap an instance's
                    # class twice per round.
                    s = (name, OTHER, None, None, False, None, False)
                    execute(self, record, s, value, OTHER_ROW)
                    return
                elif name == "__dict__" and type(value) is dict:
                    # A copy of another instance's __dict__, made past autoreg's hooks
                    # (DataParallel's replicas): the roles it holds of names it does not hold
                    # itself are the original's (_carry.deleted_roles says which).
                    for stale in deleted_roles(value, replica=True):
                        del value[stale]
            s = situation(record, d, name, value, role, None, True)  # True: from __setattr__
            if (
                not s[4]  # constructing (first: every assignment of a constructor stops here)
                and role is None
                and s[3] is None  # no registry holds the name (rows 1 to 3 decide it)
                and s[1] in RUNTIME_KINDS
                and s[5] is None  # slot
                and s[6] is False  # derived
                and s[2] != FRAMEWORK
                and name not in record.declarations
                and name not in d  # torch's own state comes under names the module lacks
                # nor one it carried once and still lists (given up, then deleted: its own role
                # None, not a copy's name; a carried name deleted keeps its role)
                and not (key in d and name in listed(self))
            ):
                # A first tensor or container stored after construction, under a new name: torch's
                # own (TORCH_ASSIGNS) is row 4's on any class. (A name the module holds is not
                # new: functional_call puts back under it what it swapped out; so is one it carried
                # that the forward deleted meanwhile, the model's state.) Read here, in a
                # frame dynamo never compiles on its own, and inline: dynamo compiles on their own
                # the functions an eager __setattr__ calls inside a compiled function.
                caller = sys._getframe(1)
                while id(caller.f_code) in record.setattr_codes and caller.f_back is not None:
                    caller = caller.f_back  # the overrides of the instance's classes
                for unread in tuple(TORCH_UNREAD):
                    if unread in sys.modules:
                        read_torch_assigners()
                        break
                if id(caller.f_code) in TORCH_ASSIGNS:
                    s = (name, s[1], FRAMEWORK, s[3], s[4], s[5], s[6])
            if s[2] is not role:  # row 4 answered, for good: the first assignment decides
                d[key] = s[2]  # eager code only: dynamo before 2.7 cannot trace this store
                sweep(d)  # a new role: the roles of deleted names go, now and then
            cached: Decision | None = record.decisions.get(s)
            if cached is None:
                if not record.final:
                    finalize(cls)  # the first instance: its class's annotations read again
                cached = decide(record, s, compiling=False)
            decision = cached
            if decision.moves and not s[4] and name not in d and decision.action is STORE:
                # A value carried under a name the module does not hold (new, or carried and
                # deleted): not while non-strict torch.export traces (_export says why). Eager
                # code only: compiled code would guard on what it found in the __dict__.
                refuse_while_exporting(self, name, value, "carry")
        if decision.concern is not None and (record.loud or decision.always):
            if decision.moves and decision.action is STORE and not record.direct:
                _store_then_enforce(self, record, s, value, decision)
                return
            enforce(self, record, name, value, decision)
        elif decision is REGISTERED and not record.direct and role != CARRIED:
            # Row 3 past a base's __setattr__ override (execute's first branch, without its
            # frame): the base's, then nn.Module's.
            setattr_next: Any = record.setattr_next.__setattr__
            setattr_next(self, name, value)
            return
        execute(self, record, s, value, decision)

    def __delattr__(self, name: str) -> None:
        d = self.__dict__
        if name == CONSTRUCTING:
            # Dynamo 2.12 replays a construction method it traced whole as the deletion of its
            # mark, the class attribute above taken for one the instance held: none to delete.
            d.pop(CONSTRUCTING, None)
            return
        key = type(self).__autoreg__.role_keys.get(name) or role_key(name)
        role = d.get(key)
        if role is None or role == CARRIED:
            # A carried name deleted stays carried, holding nothing for .to() to convert, as
            # after `self.h = None`: what is stored there next is the model's state again, as it
            # would be anyway (a tensor at run time is carried; in construction a buffer, and
            # the mark goes), and compiled code, which reads the role of the name it assigns,
            # sees nothing change (state freed between compiled calls recompiles nothing, as on
            # the twin). It goes with the name when the list of carried names is pruned.
            super().__delattr__(name)
            return
        # Any other name deleted is a new name: its role is None, as a missing one reads, before
        # the next __delattr__ runs (a base's that stores a default again decides it afresh),
        # and back if that one refuses. The key is kept: inside a compiled forward, dynamo
        # replays this method after the graph and then its own record of a key removed, which
        # raised KeyError, and this method cannot ask whether it is compiled (the call breaks
        # the graph, and dynamo recursed). A role of a name never carried is swept when eager
        # code next gives a name a role (_carry.sweep); copies and pickles drop it.
        d[key] = None
        try:
            super().__delattr__(name)
        except BaseException:
            d[key] = role
            raise

    def __getstate__(self) -> Any:
        """nn.Module's state, without construction state (a copy is never being built), and
        marked as autoreg's (see ``__setstate__``). A framework base's own state that is no dict
        (torch's quantized modules keep a tuple) is its own, passed on as it is."""
        state = super().__getstate__()  # type: ignore[no-untyped-call]
        if type(state) is not dict:
            return state
        for key in _CONSTRUCTION_KEYS:
            state.pop(key, None)
        for key in deleted_roles(state):
            del state[key]  # the role of a name deleted (__delattr__): new to the copy
        if CARRYING in state:  # a list of its own (carry() adds in place), never UNLISTED, of
            # the names carried now (a name deleted, or given up, stays in the original's)
            state[CARRYING] = {n: k for n, k in listed(self).items() if state.get(k) == CARRIED}
        state[PICKLED] = True
        return state

    def __setstate__(self, state: Any) -> None:
        """nn.Module's, less construction state, which a ``__getstate__`` of the class's own
        (``self.__dict__.copy()``) keeps. A pickle made before the class used autoreg has none of
        autoreg's keys: on a class with a framework base, whose each of its names is cannot be
        known, so all stay nn.Module's (row 4); on other classes, autoreg adopts what the contract
        would carry (``adopt``). Then the declarations the class has now win (``_declare_loaded``).
        A state that is no dict is a framework base's own: its ``__setstate__`` restores it, and
        what it assigns is the framework's, as any assignment its code makes.
        """
        if type(state) is not dict:
            super().__setstate__(state)  # type: ignore[no-untyped-call]
            return
        pickled = PICKLED in state or any(str(key).startswith(OWN_KEYS) for key in state)
        legacy = state.get(LEGACY_ROLES)  # autoreg 0.1 kept every role in one dict
        state = {k: v for k, v in state.items() if k not in _NOT_RESTORED}
        super().__setstate__(state)  # type: ignore[no-untyped-call]
        d = self.__dict__
        names = d.get(CARRYING)
        if names is not None and type(names) not in (dict, bool):  # a 0.1 pickle: a frozenset
            d[CARRYING] = {name: role_key(name) for name in names}
        if legacy is not None:
            for name, role in legacy.items():
                if role in (BUFFER, FRAMEWORK):
                    d[role_key(name)] = role
            adopt(self)
        elif not pickled:
            if type(self).__autoreg__.attributes:
                for name in list(d):
                    if name not in MODULE_INTERNALS and not name.startswith(OWN_KEYS):
                        d.setdefault(role_key(name), FRAMEWORK)
            else:
                adopt(self)
        _declare_loaded(self, adopted=legacy is not None or not pickled)

    # Convert parameters and buffers as nn.Module does, then what the module carries, at the
    # moment nn.Module converts a buffer held here: the function itself, not a method that calls
    # it (.to() runs it once per autoreg module; a frame costs).
    _apply = apply


def _set_up(cls: type, keywords: dict[str, bool | None], caller: types.FrameType) -> None:
    """Make ``cls`` an autoreg class: its record, read from the class statement (run in the
    frame ``caller``, or one of its callers), and its construction methods wrapped."""
    record: ClassRecord
    made_again = _made_again(cls)
    if made_again is not None:  # that statement's keywords (this one set none)
        own = made_again.own
        keywords = {
            key: own.get(key) if value is None else value for key, value in keywords.items()
        }
    # A class statement that sets no keyword: each one None itself (a value that only compares
    # equal to None, as unittest.mock.ANY does, is no boolean: create_record refuses it).
    elif keywords["persistent"] is None and keywords["strict"] is None and keywords["warn"] is None:
        parent = plain_subclass_of(cls)
        if parent is not None:  # torch's parametrizations make one such class per instance
            record = create_record(cls, AutoRegisterMixin, {}, parent)
            cls.__autoreg__ = record  # type: ignore[attr-defined]
            if not CONSTRUCTION_METHODS.isdisjoint(cls.__dict__):
                prepare(cls)  # else its __init__ is its base's, prepared already
            return
    # The globals the class statement ran in (for a class made again, the first statement's: this
    # caller is the decorator).
    namespace, statement_file = (
        (made_again.namespace, made_again.statement_file)
        if made_again is not None
        else defining_statement(cls, caller)
    )
    record = create_record(cls, AutoRegisterMixin, keywords, namespace=namespace)
    record.statement_file = statement_file
    cls.__autoreg__ = record  # type: ignore[attr-defined]
    prepare(cls)
    if made_again is not None:
        made_again_from(cls, made_again.cls)


def _made_again(cls: type) -> ClassRecord | None:
    """The record of the class ``cls`` was made again from (its namespace copied, with its bases,
    without its class keywords: ``@dataclass(slots=True)``, attrs' slotted classes), known by the
    record's identity in that namespace; None for a class made by its own statement."""
    record = cls.__dict__.get("__autoreg__")  # the namespace's, before it is replaced
    made_again = (
        isinstance(record, ClassRecord)
        and record.cls is not cls
        and record.cls.__bases__ == cls.__bases__
    )
    return record if made_again else None


def _set_up_past_dynamo(cls: type, keywords: dict[str, bool | None]) -> None:
    """``_set_up``, called by eager Python past dynamo from an ``__init_subclass__`` dynamo
    compiles: the frames between (torch's, which run this, and ``past_dynamo``'s) and the mixin's
    ``__init_subclass__`` are passed, and the class statement is found from its caller up, as in
    eager code."""
    frame = sys._getframe(1)
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_PAST_DYNAMO_DIRS):
        frame = frame.f_back
    _set_up(cls, keywords, frame)


_PAST_DYNAMO_DIRS: Final = (TORCH_DIR, AUTOREG_DIR)


def _declare_loaded(module: nn.Module, *, adopted: bool) -> None:
    """Bring what an unpickled instance holds under each declared name in line with the
    declarations its class has now, which may postdate the pickle (the migration guide's step 3):
    a value autoreg carried (role ``CARRIED``), a buffer autoreg registered (role ``BUFFER``),
    and, in a pickle from before the class used autoreg (``adopted``), any plain attribute, is
    decided as if assigned now (rows 5 and 9). What the instance's own code registered by hand,
    the framework's names (row 4), and what autoreg left a plain attribute (a leaf that required
    grad, row 6; a value written around ``__setattr__``) are as the original holds them: a copy
    of a live instance, under the same declarations, changes nothing (a registration would
    also reach the original's ``_buffers``, which a shallow copy shares)."""
    record = record_of(module)
    if not record.final:
        finalize(type(module))  # the annotations as the finished class has them
    d = module.__dict__
    for name, declaration in record.declarations.items():
        key = role_key(name)
        role = d.get(key)
        if role == FRAMEWORK:
            continue
        buffers = d.get("_buffers", {})
        if name in buffers:
            if role != BUFFER:
                continue  # registered by hand, or under a declaration already: explicit
            del d[key]  # declared names are no longer autoreg's guess (row 2 no longer applies)
            if declaration not in (Declaration.CARRIED, Declaration.PLAIN):
                persistent = record.persistence(declaration)
                others = d["_non_persistent_buffers_set"] - {name}  # replaced: see _state
                d["_non_persistent_buffers_set"] = others if persistent else others | {name}
                continue
            value = buffers[name]
            unregister(module, name)
            d[name] = value  # to be decided afresh, as a plain attribute
        elif name not in d or (role != CARRIED and not adopted):
            continue  # nothing of autoreg's: as the original holds it
        value = d[name]
        decision = decide(record, situation(record, d, name, value, role, None), compiling=False)
        if decision.action is REGISTER:
            register(module, name, value, decision)
            d.pop(key, None)
        elif decision.moves and decision.action is STORE:
            carry(module, name)
        elif d.get(key) == CARRIED:
            del d[key]


def _store_then_enforce(
    module: nn.Module, record: ClassRecord, s: Situation, value: Any, decision: Decision
) -> None:
    """Carry out a decision that carries ``value`` on a class whose base overrides ``__setattr__``,
    then refuse (strict) or warn about it if the base stored it under its name in ``__dict__``:
    what the base keeps elsewhere (pyro's ``PyroParam``) is not autoreg's to carry, and nothing
    before the base has run can tell. A refusal puts back what the ``__dict__`` held."""
    d = module.__dict__
    name = s[0]
    key = role_key(name)
    # Compiled code never adds to the list of carried names (_state), nor reads it: dynamo would
    # guard on it, and every name carried eagerly afterwards would recompile.
    kept = (name, key) if _is_compiling() else (name, key, CARRYING)
    before = {k: d[k] for k in kept if k in d}
    if type(before.get(CARRYING)) is dict:  # a copy: carry() adds to the list in place (_state)
        before[CARRYING] = dict(before[CARRYING])
    execute(module, record, s, value, decision)
    if d.get(name) is not value:
        return
    try:
        enforce(module, record, name, value, decision)
    except BaseException:
        for k in kept:
            if k in before:
                d[k] = before[k]
            else:
                d.pop(k, None)
        raise


class Module(AutoRegisterMixin, nn.Module):
    """``nn.Module`` whose assigned tensors move with it. Subclass it instead of ``nn.Module``.

    A tensor assigned while the module is built (``__init__``, ``configure_model()``,
    ``reset_buffers()``) becomes a buffer, non-persistent unless the class or an annotation says
    otherwise, so ``state_dict()`` keeps its keys; a tensor, list, tuple or dict first stored at
    run time is carried: a plain attribute that ``.to()``, ``.cuda()``, ``.half()`` convert, not
    module state. Everything else is what ``nn.Module`` does. The rules, row by row, are in the
    contract (docs/contract.md); the class keywords ``persistent=``, ``strict=`` and ``warn=`` are
    those of ``AutoRegisterMixin``.
    """


# What dynamo lets run eagerly (a frame it cannot compile) calls the mixin's methods under its frame
# callback: autoreg's own code, loaded by now, is never a frame it compiles on its own (_frames).
skip_as_dynamo_frames(
    module
    for name, module in list(sys.modules.items())
    if name.startswith(f"{__package__}.") and module is not None
)
