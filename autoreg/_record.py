"""What autoreg decides about a class, once, when the class is created.

Each class that uses autoreg gets a ``ClassRecord`` in ``cls.__autoreg__``: its mode and default
persistence (each class keyword taken from the nearest class in the MRO that set it; the
``AUTOREG_MODE`` environment variable overrides the mode), its declarations (annotations, read the
first time an instance is built), which of nn.Module's own paths the mixin may take directly, and
the code of the framework base classes whose assignments keep nn.Module's behaviour (row 4 of the
README's contract table). ``mark_construction`` wraps a class's ``__init__`` so that an instance
knows when its construction ends.
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from torch import nn

from ._config import Mode, check_bool, environment_mode
from ._declarations import Declaration, read_declarations
from ._errors import ClassDefinitionError
from ._messages import MIXIN_AFTER_MODULE, MIXIN_WITHOUT_MODULE, STRICT_AND_WARN, UNKNOWN_KEYWORD

__all__ = [
    "CONSTRUCTING",
    "KEYWORDS",
    "ClassRecord",
    "create_record",
    "mark_construction",
    "record_of",
    "unknown_keywords",
]

CONSTRUCTING: Final = "_autoreg_constructing"  # instance key, present only while __init__ runs
KEYWORDS: Final = ("persistent", "strict", "warn")

_MISSING: Final = object()
_FRAMES: Final = 8  # how far out row 4 looks for the method that made an assignment


class ClassRecord:
    """What autoreg decided about one class when the class was created."""

    __slots__ = (
        "apply_next",
        "cls",
        "declarations",
        "direct",
        "framework_code",
        "mixin",
        "mode",
        "namespaces",
        "own",
        "own_code",
        "persistent",
        "registers",
        "resolved",
        "setattr_next",
        "snapshot",
        "strict_by",
        "warned",
    )

    def __init__(self, cls: type, mixin: type, own: dict[str, bool]) -> None:
        self.cls = cls
        self.mixin = mixin
        self.own = own  # the keywords this class statement set itself
        persistent, _ = _nearest(cls, own, "persistent")
        self.persistent = bool(persistent)
        self.mode, self.strict_by = _resolve_mode(cls, own)
        environment = environment_mode()  # AUTOREG_MODE overrides every class
        if environment is not None:
            self.mode = environment
            self.strict_by = "AUTOREG_MODE=strict"
        mro = cls.__mro__
        after = mro[mro.index(mixin) + 1 :]
        # The namespaces instance lookup searches, in order: live views, never stale.
        self.namespaces: tuple[Mapping[str, Any], ...] = tuple(k.__dict__ for k in mro)
        # The same as one plain dict, as the class was created: what a compiled forward reads
        # (dynamo before torch 2.9 cannot trace a lookup in a class's __dict__).
        self.snapshot: dict[str, Any] = {
            name: attribute for k in reversed(mro) for name, attribute in k.__dict__.items()
        }
        # The next _apply in the MRO (nn.Module's, or e.g. RNNBase's), looked up by name at call
        # time so that a patched nn.Module._apply is honoured.
        self.apply_next: type = next(k for k in after if "_apply" in k.__dict__)
        self.setattr_next: type = next(k for k in after if "__setattr__" in k.__dict__)
        # Whether nn.Module's __setattr__ and register_buffer are what the mixin defers to: then
        # it may take their paths for a value itself; when a base overrides either, it calls it.
        self.direct = all(
            "__setattr__" not in k.__dict__ for k in after if k not in (nn.Module, object)
        ) and all("register_buffer" not in k.__dict__ for k in mro if k is not nn.Module)
        self.warned: set[tuple[str, str]] = set()
        # name -> persistence, for the names that rows 9 and 10 registered during construction
        # in register mode: the next instance's __setattr__ takes that decision inline.
        self.registers: dict[str, bool] = {}
        # Read now, so that no first read happens inside a compiled forward, and read again when
        # the first instance is built: forward references resolve against the finished module.
        self.declarations = read_declarations(cls, _declares)
        self.resolved = False
        # The code of the framework bases (row 4): a base that is an nn.Module subclass without
        # autoreg (LightningModule with its HyperparametersMixin, Metric, nn.Linear) and the
        # classes in its MRO; nn.Module itself and object are not. And the code of the classes
        # that use autoreg, which is the model's own.
        framework = _framework_classes(cls, mixin)
        self.framework_code = _code_of(framework)
        self.own_code = (
            _code_of(
                {
                    k
                    for k in cls.__mro__
                    if issubclass(k, mixin) and k.__module__ != mixin.__module__
                }
            )
            if self.framework_code
            else frozenset()
        )

    def resolve_declarations(self) -> None:
        """Read the annotations again, once, now that the module defining the class is done."""
        if not self.resolved:
            self.declarations = read_declarations(self.cls, _declares)
            self.registers.clear()
            self.resolved = True

    def by_framework(self, frame: types.FrameType | None) -> bool:
        """Whether the assignment made in ``frame`` is a framework base's (row 4).

        The frames are walked outwards to the first one that runs a method of a class in the MRO:
        a framework base's method (``save_hyperparameters`` -> a helper in Lightning's utilities
        -> the assignment) makes it the framework's; a method of an autoreg class (a helper that
        the model's own ``__init__`` calls) makes it the model's.
        """
        for _ in range(_FRAMES):
            if frame is None:
                break
            code = frame.f_code
            if code in self.framework_code:
                return True
            if code in self.own_code:
                return False
            frame = frame.f_back
        return False

    def persistence(self, declaration: Declaration | None) -> bool:
        if declaration is Declaration.PERSISTENT:
            return True
        if declaration is Declaration.NONPERSISTENT:
            return False
        return self.persistent


def record_of(module: object) -> ClassRecord:
    """The record of an autoreg instance's class."""
    record: ClassRecord = type(module).__autoreg__  # type: ignore[attr-defined]
    return record


def create_record(cls: type, mixin: type, keywords: dict[str, Any]) -> ClassRecord:
    """Check a new autoreg class and its keywords; return its record."""
    _check_bases(cls, mixin)
    name = cls.__name__
    own = {
        key: value
        for key in KEYWORDS
        if (value := check_bool(name, key, keywords.get(key))) is not None
    }
    if own.get("strict") and own.get("warn"):
        raise ClassDefinitionError(STRICT_AND_WARN.format(cls=name))
    return ClassRecord(cls, mixin, own)


def unknown_keywords(cls: type, mixin: type, keywords: dict[str, Any]) -> None:
    """Raise for keywords no base takes, when no base after the mixin takes keywords at all."""
    mro = cls.__mro__
    after = mro[mro.index(mixin) + 1 :]
    if all("__init_subclass__" not in k.__dict__ for k in after if k is not object):
        names = ", ".join(f"{key}=" for key in keywords)
        raise ClassDefinitionError(UNKNOWN_KEYWORD.format(cls=cls.__name__, names=names))


def _nearest(cls: type, own: dict[str, bool], keyword: str) -> tuple[bool | None, int]:
    """A class keyword's value from the nearest class in the MRO that set it, and its depth.

    ``own``: the keywords of ``cls`` itself, whose record is being made.
    """
    if keyword in own:
        return own[keyword], 0
    for depth, klass in enumerate(cls.__mro__[1:], start=1):
        record = klass.__dict__.get("__autoreg__")
        if isinstance(record, ClassRecord) and keyword in record.own:
            return record.own[keyword], depth
    return None, len(cls.__mro__)


def _resolve_mode(cls: type, own: dict[str, bool]) -> tuple[Mode, str]:
    """The mode the class statements ask for; with it, what to quote when strict refuses."""
    strict, strict_depth = _nearest(cls, own, "strict")
    warn, warn_depth = _nearest(cls, own, "warn")
    if strict and (not warn or strict_depth < warn_depth):
        return Mode.STRICT, f"class {cls.__mro__[strict_depth].__name__}(..., strict=True)"
    if warn:
        return Mode.WARN, ""
    return Mode.REGISTER, ""


def _declares(klass: type) -> bool:
    """Whether the annotations of ``klass`` declare: autoreg classes and plain mixins do."""
    return klass is not nn.Module and (
        hasattr(klass, "__autoreg__") or not issubclass(klass, nn.Module)
    )


def _check_bases(cls: type, mixin: type) -> None:
    mro = cls.__mro__
    if nn.Module not in mro:
        raise ClassDefinitionError(MIXIN_WITHOUT_MODULE.format(cls=cls.__name__))
    if mro.index(nn.Module) < mro.index(mixin):
        bases = ", ".join(
            f"{base.__module__}.{base.__qualname__}" for base in cls.__bases__ if base is not mixin
        )
        raise ClassDefinitionError(MIXIN_AFTER_MODULE.format(cls=cls.__name__, bases=bases))


def _framework_classes(cls: type, mixin: type) -> set[type]:
    found: set[type] = set()
    for klass in cls.__mro__:
        if klass is not nn.Module and issubclass(klass, nn.Module) and not issubclass(klass, mixin):
            found.update(k for k in klass.__mro__ if k not in (nn.Module, object))
    return found


def _code_of(classes: set[type]) -> frozenset[types.CodeType]:
    code: set[types.CodeType] = set()
    for klass in classes:
        code |= _class_code(klass)
    return frozenset(code)


@functools.cache
def _class_code(klass: type) -> frozenset[types.CodeType]:
    """The code objects of the functions ``klass`` defines, nested functions included."""
    code: set[types.CodeType] = set()
    for attribute in klass.__dict__.values():
        for function in _functions(attribute):
            _collect(getattr(function, "__code__", None), code)
    return frozenset(code)


def _functions(attribute: object) -> Iterator[object]:
    if isinstance(attribute, (staticmethod, classmethod)):
        attribute = attribute.__func__
    if isinstance(attribute, property):
        yield from (f for f in (attribute.fget, attribute.fset, attribute.fdel) if f is not None)
    elif callable(attribute):
        yield attribute
        wrapped = inspect.unwrap(attribute) if hasattr(attribute, "__wrapped__") else attribute
        if wrapped is not attribute:
            yield wrapped


def _collect(code: object, into: set[types.CodeType]) -> None:
    if isinstance(code, types.CodeType) and code not in into:
        into.add(code)
        for constant in code.co_consts:
            _collect(constant, into)


# --- construction ----------------------------------------------------------------------------


def mark_construction(cls: type, pending: str, on_end: Callable[[Any], None]) -> None:
    """Wrap ``cls.__init__`` so that an instance knows when it is being constructed.

    ``on_end(instance)`` runs when the outermost ``__init__`` returns, if the instance's
    ``__dict__`` holds the key ``pending`` then. Classes whose ``__init__``
    is nn.Module's (they define none) are not wrapped: nn.Module's assigns nothing through
    ``__setattr__``; a wrapper there would cost a frame on every construction for nothing.
    """
    init = cls.__dict__.get("__init__", _MISSING)
    if init is _MISSING:
        inherited = cls.__init__  # type: ignore[misc]
        if inherited is nn.Module.__init__ or getattr(inherited, "__autoreg_marks__", False):
            return
        init = inherited
    if getattr(init, "__autoreg_marks__", False):
        return

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:  # noqa: N807
        d = self.__dict__
        if CONSTRUCTING in d:  # an __init__ further down the chain: the outermost one marks
            init(self, *args, **kwargs)
            return
        record = type(self).__autoreg__
        if not record.resolved:
            record.resolve_declarations()
        d[CONSTRUCTING] = True
        try:
            init(self, *args, **kwargs)
        finally:
            self.__dict__.pop(CONSTRUCTING, None)
        if pending in self.__dict__:
            on_end(self)

    __init__.__autoreg_marks__ = True  # type: ignore[attr-defined]
    cls.__init__ = __init__  # type: ignore[misc]
