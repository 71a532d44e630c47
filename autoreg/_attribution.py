"""Row 4: whose is an assignment, the framework's or the model's? Judged by code identity.

The model's code is the functions of the instance's own classes: the class, its autoreg bases and
the plain mixins listed before ``AutoRegisterMixin`` (``_record``). A framework's code is the
functions of every other base (``LightningModule``, a ``Metric``, the ``torch.nn`` class the mixin
is put before, diffusers' ``ConfigMixin``, which is no nn.Module) and every function of the
packages those bases' code lives in (pyro's ``to_pyro_module_``): a package is the directory tree
under the top-level package of a code object's file, torch's and autoreg's excepted, and never one
where a model class's functions were written beside its statement (their globals are the
statement's), or where a module's code ran its statement (``class Net(AutoRegisterMixin, Net):
pass``, a migration in place): a framework's function the class holds, or a framework's factory
that ran the statement in a function, does not make the framework's package the model's.

A function is found through what wraps it (``__wrapped__``, ``functools.partial``,
``partialmethod``, static and class methods, property accessors, a decorator's closure, what a
decorator object that does not say what it wraps holds), and its nested functions, lambdas and
comprehensions are its own (their code objects sit in its ``co_consts``). A wrapper that says
what it wraps (``functools.wraps``, ``torch.no_grad()``) is no class's: its code is shared by
every function it wraps. Functions are told apart by their code objects, never by ``__module__``
or ``__qualname__``, which two classes can share.

Walking out from the assignment, the nearest frame whose code is the model's or a framework's
decides; other frames tell nothing (autoreg's own, ``__setattr__`` overrides of the model's
classes, helpers outside the classes, the decorators' shared wrappers, torch). No such frame at all
(code outside the module assigns): the model's. The same code can be the model's and a
framework's (one factory made both classes, or one function is set on both): a frame's
``__class__`` cell, or what it closes over, tells which function it runs; when nothing does,
autoreg cannot tell, and does what nn.Module does (the framework's, a plain attribute), which warn
mode says.

What the classes hold is read when the question is first asked for the class (the first instance
to assign a name), and kept in the class record: the code objects of its classes' functions, by
id, with each code object, which the class keeps alive anyway. Code outside the classes (a notebook
cell, ``exec``) is never kept. Inside code dynamo compiles, frames cannot be walked:
``compiled_attribution`` runs when dynamo traces the assignment, and reads the same answer from
the functions dynamo is inlining there and the frames that called the compiled one. A store that
dynamo runs eagerly inside a compiled function (a graph break at the store) is read by a walk past
dynamo (``attribute_past_dynamo``). A frame running code dynamo made (a function's compiled
bytecode, a resume function after a graph break) is read as the function it was made from
(``source_code``: dynamo's own maps, by identity).
"""

from __future__ import annotations

import functools
import os
import sys
import types
import warnings
from collections import ChainMap
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final, TypeVar, cast

from ._errors import AutoRegisterWarning
from ._frames import past_dynamo
from ._messages.contract import UNDETERMINED_OWNER
from ._messages.describe import describe
from ._paths import AUTOREG_DIR, TORCH_DIR
from ._record import ClassRecord
from ._state import FRAMEWORK, MODEL, PASS, UNDECIDED

__all__ = [
    "CONSTANT_RESULT",
    "attribute",
    "attribute_past_dynamo",
    "compiled_attribution",
    "constant_result",
    "inlined_codes",
    "judge_codes",
    "source_code",
    "warn_at_assignment",
]

# What torch.compiler.assume_constant_result sets on a function: dynamo calls such a function while
# it traces, and puts its result in the graph as a constant.
CONSTANT_RESULT: Final = "_dynamo_marked_constant"

_F = TypeVar("_F", bound=Callable[..., Any])


def constant_result(function: _F) -> _F:
    """``function``, called by dynamo while it traces, its answer a constant of the graph: marked
    as torch.compiler.assume_constant_result marks a function (a test compares the two), without
    calling it: on most supported torch versions it imports torch._dynamo, and every eager
    program on autoreg would import torch.compile's front end (1.7 s). Its code is renamed: dynamo
    2.5 stores the answer in the compiled frame's module globals under the code's name, over what
    that module holds there (autoreg's own module, where dynamo compiles one of its functions as a
    frame of its own: the function itself was replaced by its answer); dynamo 2.13 picks a name
    the module does not hold.
    """
    function.__code__ = function.__code__.replace(
        co_name=f"_autoreg_constant_{function.__code__.co_name}"
    )
    setattr(function, CONSTANT_RESULT, True)
    return function


_AMBIGUOUS: Final = "ambiguous"  # the code of a function of the model's and of a framework's
_LIBRARIES: Final = (TORCH_DIR, AUTOREG_DIR)


def attribute(record: ClassRecord, frame: types.FrameType | None, name: str, value: object) -> str:
    """``FRAMEWORK`` or ``MODEL``: whose is ``module.name = value``, made in ``frame`` (and its
    callers), on an instance of ``record``'s class."""
    codes = record.codes if record.codes is not None else judge_codes(record)
    roots = record.roots
    dynamo = sys.modules.get("torch._dynamo.utils")  # loaded: frames may run code it compiled
    while frame is not None:
        code = frame.f_code
        entry = codes.get(id(code))
        if entry is None and dynamo is not None:
            code = source_code(code)
            entry = codes.get(id(code))
        if entry is not None:
            verdict = entry[1]
            if verdict == _AMBIGUOUS:
                verdict = _resolve(record, code, frame.f_locals)
                if verdict == _AMBIGUOUS:
                    _undetermined(record, name, value, code)
                    return FRAMEWORK
            if verdict != PASS:
                return verdict
        elif roots and code.co_filename.startswith(roots):
            return FRAMEWORK
        frame = frame.f_back
    return MODEL


@constant_result
def compiled_attribution(cls: type) -> str:
    """What ``attribute`` answers for an assignment that dynamo is tracing, on an instance of
    ``cls``: called by dynamo while it traces, never at run time (its answer is a constant of the
    compiled code). The frames it walks are the functions dynamo inlines down to the assignment,
    then the real frames that called the compiled function; autoreg's and torch's own (dynamo's)
    tell nothing. When dynamo's tracing state cannot be read, it cannot tell: nn.Module's rules.
    When the code of both sides runs and nothing tells which, in warn or strict mode
    ``UNDECIDED``: the store is left to eager code, which says so at the user's line."""
    record: ClassRecord = cls.__autoreg__  # type: ignore[attr-defined]
    codes = record.codes if record.codes is not None else judge_codes(record)
    traced = _translators()
    if traced is None:
        return FRAMEWORK
    roots = record.roots
    for tx in traced:
        code = source_code(tx.f_code)  # a resume function dynamo traces: the function it resumes
        entry = codes.get(id(code))
        if entry is not None:
            verdict = entry[1]
            if verdict == _AMBIGUOUS:
                verdict = _resolve(record, code, _traced_cells(tx, code))
                if verdict == _AMBIGUOUS:  # nothing tells: nn.Module's rules, which warn and
                    return UNDECIDED if record.loud else FRAMEWORK  # strict mode say (eagerly)
            if verdict != PASS:
                return verdict
        elif roots and code.co_filename.startswith(roots):
            return FRAMEWORK
    return attribute(record, sys._getframe(1), "", None)


def source_code(code: types.CodeType) -> types.CodeType:
    """The code of the function whose frame runs ``code``: ``code`` itself, unless dynamo made it
    (the bytecode it compiled a frame into, or a resume function that runs the rest of a frame
    after a graph break, which are told by dynamo's own maps, by identity)."""
    utils = sys.modules.get("torch._dynamo.utils")
    if utils is None:
        return code
    resume = sys.modules.get("torch._dynamo.resume_execution")
    try:
        for _ in range(_MAX_MAPPINGS):
            original = utils.orig_code_map.get(code)
            if original is None and resume is not None:
                meta = resume.ContinueExecutionCache.generated_code_metadata.get(code)
                original = None if meta is None else meta.code
            if original is None or original is code:
                break
            code = original
    except Exception:  # noqa: BLE001 - dynamo's internals changed: what was found so far
        return code
    return code


_MAX_MAPPINGS: Final = 64  # a resume function of a resume function ...: bounded all the same


def attribute_past_dynamo(record: ClassRecord, name: str, value: object) -> str:
    """``attribute`` for an eager ``__setattr__`` of the mixin's whose callee dynamo compiles as
    a frame of its own: inside a compiled function, a store dynamo cannot trace (a warning) runs
    eagerly, and dynamo never compiles ``__setattr__`` frames but compiles the functions they
    call, where it cannot trace ``sys._getframe``. The frames are walked by eager Python, past
    dynamo, from the mixin's ``__setattr__``; none found: cannot tell, nn.Module's rules."""
    return past_dynamo(_attribute_eagerly, record, name, value)


def _attribute_eagerly(record: ClassRecord, name: str, value: object) -> str:
    frame: types.FrameType | None = sys._getframe(1)
    setattr_codes = record.setattr_codes
    while frame is not None and id(frame.f_code) not in setattr_codes:
        frame = frame.f_back  # dynamo's frames, and the one it compiled
    if frame is None:
        return FRAMEWORK
    return attribute(record, frame, name, value)  # attribute walks past the overrides


_UNREAD: Final = object()


def inlined_codes() -> list[types.CodeType] | None:
    """The code objects dynamo is tracing, innermost first (the function it inlines last, ...,
    the function it compiles); None when its state cannot be read."""
    traced = _translators()
    return None if traced is None else [tx.f_code for tx in traced]


def _translators() -> list[Any] | None:
    """Dynamo's translators of the functions it is tracing, innermost first; None when its state
    cannot be read."""
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator

        tx: Any = InstructionTranslator.current_tx().output.current_tx
        found = []
        while tx is not None:
            found.append(tx)
            tx = getattr(tx, "parent", None)
    except Exception:  # noqa: BLE001 - dynamo's internals changed: cannot tell
        return None
    return found


def _traced_cells(tx: Any, code: types.CodeType) -> dict[str, object]:
    """What the function a dynamo translator ``tx`` traces closes over, by name, as ``_resolve``
    reads a frame's ``f_locals``: the cells of the function it inlines (``funcvar``) or of the
    frame it compiles (``closure``); on dynamo versions that keep neither, the values it read
    from them (a class, an object: compared by identity). Nothing when ``tx`` runs other code
    than ``code`` (a resume function) or dynamo's state cannot be read: cannot tell."""
    if tx.f_code is not code:
        return {}
    try:
        closure = None
        funcvar = getattr(tx, "funcvar", None)
        if funcvar is not None:
            function = funcvar.get_function()
            if getattr(function, "__code__", None) is code:
                closure = function.__closure__
        elif getattr(tx, "closure", None) is not None:
            closure = tx.closure
        if closure is not None:
            return {
                var: _contents(cell) for var, cell in zip(code.co_freevars, closure, strict=True)
            }
        read = getattr(tx, "symbolic_locals", {})  # what it made of each cell (2.5, 2.6; a
        # frame it compiles, 2.9 to 2.11: read in their wheels, 2026-12-07)
        found = {}
        for var in code.co_freevars:
            made = read.get(var)
            made = getattr(made, "pre_existing_contents", made)  # a cell's (2.6 on)
            value = getattr(made, "value", _UNREAD)  # a class, an object, read as such
            if value is not _UNREAD:
                found[var] = value
        return found
    except Exception:  # noqa: BLE001 - dynamo's internals changed: cannot tell
        return {}


def _resolve(record: ClassRecord, code: types.CodeType, local: Mapping[str, object]) -> str:
    """Which function runs ``code``, both the model's and a framework's, in a frame whose
    ``f_locals`` (or what dynamo read of them) is ``local``: its class (the ``__class__`` cell of a
    method that calls ``super()``), else what it closes over."""
    free = code.co_freevars
    if not free:
        return _AMBIGUOUS
    if "__class__" in free:
        owner = local.get("__class__")
        if owner in record.model_classes:
            return MODEL
        if owner in record.framework_classes:
            return FRAMEWORK
        return _AMBIGUOUS
    verdicts = set()
    for function, verdict in record.shared.get(id(code), ()):
        cells = dict(zip(function.__code__.co_freevars, function.__closure__ or (), strict=True))
        compared = [var for var in free if var in cells and var in local]
        if compared and all(_contents(cells[var]) is local[var] for var in compared):
            verdicts.add(verdict)
    return verdicts.pop() if len(verdicts) == 1 else _AMBIGUOUS


def _contents(cell: Any) -> object:
    try:
        return cell.cell_contents
    except ValueError:  # empty
        return cell


def _undetermined(record: ClassRecord, name: str, value: object, code: types.CodeType) -> None:
    """Warn mode: autoreg cannot tell whose assignment it is, and keeps nn.Module's rules."""
    if not record.loud or not name:
        return
    key = ("framework", name)
    if key in record.warned:
        return
    record.warned.add(key)
    owners = [k for k in record.cls.__mro__ if any(_has_code(k, code))]
    model = next((k for k in owners if k in record.model_classes), record.cls)
    framework = next((k for k in owners if k in record.framework_classes), record.cls)
    message = UNDETERMINED_OWNER.format(
        cls=record.cls.__name__,
        name=name,
        value=describe(value),
        model=model.__name__,
        framework=framework.__name__,
        function=code.co_name,
    )
    warn_at_assignment(record, message)


def _has_code(klass: type, code: types.CodeType) -> Iterator[bool]:
    for attribute in vars(klass).values():
        yield any(found is code for found, _ in _codes(attribute, set()))


def warn_at_assignment(record: ClassRecord, message: str) -> None:
    """``warnings.warn`` at the user's assignment: the first frame out from here that runs
    neither autoreg's code, nor one of the ``__setattr__`` overrides of the instance's classes (by
    identity, as ``_facts._assigner`` walks: a decorated override's frame is its wrapper's), nor
    dynamo's (its wrapper around a function run past it). Eager code only."""
    frame: types.FrameType | None = sys._getframe(1)
    level = 2
    while frame is not None and (
        frame.f_code.co_filename.startswith(_NOT_THE_USERS)
        or id(frame.f_code) in record.setattr_codes
    ):
        frame = frame.f_back
        level += 1
    warnings.warn(message, AutoRegisterWarning, stacklevel=level)


_NOT_THE_USERS: Final = (AUTOREG_DIR, os.path.join(TORCH_DIR, "_dynamo", ""))


# --- what the classes hold, read once per class ---------------------------------------------


def judge_codes(record: ClassRecord) -> dict[int, tuple[types.CodeType, str]]:
    """Read the code objects of the functions of ``record``'s classes and the framework
    packages; keep them in the record; return the code objects' verdicts by id."""
    mro = record.cls.__mro__
    found: dict[int, tuple[types.CodeType, str]] = {}
    shared: dict[int, list[tuple[types.FunctionType, str]]] = {}
    files: dict[str, set[str]] = {MODEL: set(), FRAMEWORK: set()}
    for index, klass in enumerate(mro):
        written: object = None  # for a model class: the globals its statement ran in
        if klass in record.model_classes:
            side = MODEL
            namespace = record.globals_of(klass)
            written = namespace.maps[-1] if isinstance(namespace, ChainMap) else namespace
            statement = record.statement_file_of(klass)
            if statement is not None:  # written in a module's code (a factory's leaves none)
                files[MODEL].add(statement)
        elif klass in record.framework_classes:
            side = FRAMEWORK
        else:
            continue  # nn.Module, object, autoreg's own
        for key, attribute in vars(klass).items():
            if _inherited_construction(attribute, mro[index + 1 :], key):
                continue  # autoreg's wrapper of an __init__ the class inherits: not its own
            told = PASS if key == "__setattr__" else side  # an override tells nothing
            for code, function in _codes(attribute, set()):
                if side == MODEL and code.co_filename.startswith(_LIBRARIES):
                    continue  # torch's or autoreg's code set on a model class tells nothing
                # A model class's package is where its functions were written beside its
                # statement (their globals are the statement's), and where a module's code ran
                # the statement (above): not that of a framework's function it holds, nor of a
                # framework's factory that ran its statement. For a class autoreg did not see
                # made (a plain mixin): where each was written.
                if side == FRAMEWORK or written is None or function.__globals__ is written:
                    files[side].add(code.co_filename)
                verdict = told
                known = found.get(id(code))
                if known is not None and known[1] != verdict:
                    verdict = PASS if PASS in (known[1], verdict) else _AMBIGUOUS
                found[id(code)] = (code, verdict)
                shared.setdefault(id(code), []).append((function, side))
    record.shared = {key: value for key, value in shared.items() if found[key][1] == _AMBIGUOUS}
    model_roots = {_package(path) for path in files[MODEL]}
    framework_roots = {_package(path) for path in files[FRAMEWORK]}
    record.roots = tuple(sorted(root for root in framework_roots - model_roots if root))
    record.codes = found
    return found


def _inherited_construction(attribute: object, later: Iterable[type], key: str) -> bool:
    """Whether ``attribute`` is autoreg's construction wrapper of a method the class inherits
    (``_construction.prepare``): a function's own attributes are read, never a value's code."""
    if type(attribute) is not types.FunctionType:
        return False
    own = attribute.__dict__
    wrapped = own.get("__wrapped__")
    return (
        wrapped is not None
        and own.get("__autoreg_constructs__", False)
        and any(k.__dict__.get(key) is wrapped for k in later)
    )


def _codes(
    attribute: object, seen: set[int], depth: int = 0
) -> Iterator[tuple[types.CodeType, types.FunctionType]]:
    """The code objects of the functions ``attribute`` is or wraps, with their nested code; with
    each, the function whose code (or nested code) it is. Known by ``type(attribute)``, never by
    what the value says its class is (a proxy's ``__class__`` is code of its own), and read
    through the descriptors of the types named here (a subclass's property of the same name, or
    a value's truth, is code of its own)."""
    if id(attribute) in seen or depth > _DEEPEST:
        return  # (what wraps deeper than any decorator does tells nothing: nn.Module's rules)
    seen.add(id(attribute))
    kind = type(attribute)
    if kind is types.FunctionType:
        function = cast(types.FunctionType, attribute)
        wrapped = function.__dict__.get("__wrapped__")
        if wrapped is not None:  # a wrapper that says what it wraps: its code is shared
            yield from _codes(wrapped, seen, depth + 1)
            return
        yield from _nested(function.__code__, function)
        for cell in function.__closure__ or ():  # a decorator without functools.wraps
            contents = _contents(cell)
            if contents is not cell and not issubclass(type(contents), type):
                yield from _codes(contents, seen, depth + 1)
    elif kind is types.MethodType:
        yield from _codes(cast(types.MethodType, attribute).__func__, seen, depth + 1)
    elif issubclass(kind, functools.partial):
        yield from _codes(_PARTIAL_FUNC(attribute), seen, depth + 1)
    elif issubclass(kind, property):
        for accessor in _PROPERTY_ACCESSORS:
            yield from _codes(accessor(attribute), seen, depth + 1)
    elif issubclass(kind, staticmethod):
        yield from _codes(_STATIC_FUNC(attribute), seen, depth + 1)
    elif issubclass(kind, classmethod):
        yield from _codes(_CLASS_FUNC(attribute), seen, depth + 1)
    else:
        own = _own_dict(attribute)
        if issubclass(kind, functools.singledispatchmethod):
            dispatcher = own.get("dispatcher")
            if type(dispatcher) is types.FunctionType:
                registry = dispatcher.__dict__.get("registry")
                for function in dict(registry or {}).values():  # the default's among them
                    yield from _codes(function, seen, depth + 1)
        elif issubclass(kind, (functools.partialmethod, functools.cached_property)):
            yield from _codes(own.get("func"), seen, depth + 1)
        elif "__wrapped__" in own:  # a wrapper of another type that says what it wraps
            yield from _codes(own["__wrapped__"], seen, depth + 1)  # (lru_cache, a decorator class)
        elif _binds_or_calls(kind):  # a decorator object that does not say: what it holds,
            for value in own.values():  # as a decorator's closure
                if not issubclass(type(value), type):
                    yield from _codes(value, seen, depth + 1)


def _binds_or_calls(kind: type) -> bool:
    """Whether instances of ``kind`` bind as methods or are called (a decorator object), read
    from the ``__dict__`` of its classes; an object that does neither (a configuration) is no
    method, and what it holds is not the class's code."""
    return any(
        "__get__" in _DICT_OF(klass) or "__call__" in _DICT_OF(klass)
        for klass in _MRO_OF(kind)
        if klass is not object
    )


# How deep what wraps a function is followed: wrappers of wrappers, never a chain of objects.
_DEEPEST: Final = 32

# The descriptors of the wrappers' own types, and what a class's metaclass cannot replace (the
# class's own MRO and __dict__, read as type reads them).
_PARTIAL_FUNC: Final = functools.partial.__dict__["func"].__get__
_PROPERTY_ACCESSORS: Final = tuple(
    property.__dict__[key].__get__ for key in ("fget", "fset", "fdel")
)
_STATIC_FUNC: Final = staticmethod.__dict__["__func__"].__get__
_CLASS_FUNC: Final = classmethod.__dict__["__func__"].__get__
_MRO_OF: Final = type.__dict__["__mro__"].__get__
_DICT_OF: Final = type.__dict__["__dict__"].__get__


def _own_dict(attribute: object) -> dict[str, object]:
    """``attribute``'s own ``__dict__``, read through its type's ``__dict__`` slot only (never a
    value's code); empty if it has none, or its type's slot is code of its own."""
    kind = type(attribute)
    for klass in _MRO_OF(kind):
        slot = _DICT_OF(klass).get("__dict__")
        if slot is not None:
            if type(slot) is not types.GetSetDescriptorType:
                return {}
            own = slot.__get__(attribute, kind)
            return own if type(own) is dict else {}
    return {}


def _nested(
    code: types.CodeType, function: types.FunctionType
) -> Iterator[tuple[types.CodeType, types.FunctionType]]:
    yield code, function
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            yield from _nested(constant, function)


@functools.lru_cache(maxsize=1024)
def _package(path: str) -> str | None:
    """The top-level package directory a code object's file lives in (with a trailing
    separator); None for a file that is in no package (a script, a notebook cell, ``exec``) and
    for torch's and autoreg's own. Kept for the last files asked about: a class per instance
    (torch's parametrizations) asks about the same files each time."""
    if not os.path.isabs(path) or path.startswith(_LIBRARIES):
        return None
    directory = os.path.dirname(path)
    if not os.path.exists(os.path.join(directory, "__init__.py")):
        return None
    while os.path.exists(os.path.join(os.path.dirname(directory), "__init__.py")):
        directory = os.path.dirname(directory)
    return directory + os.sep
