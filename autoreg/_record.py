"""What autoreg knows about a class: decided once, kept on the class itself.

Each class that uses autoreg gets a ``ClassRecord`` in ``cls.__autoreg__``: its mode and default
persistence (each class keyword taken from the nearest class in the MRO that set it; the
``AUTOREG_MODE`` environment variable overrides the mode), its declarations (annotations, read
again when the class is first instantiated, so that forward references resolve), which of
nn.Module's own paths the mixin may take directly, whose code each class of the MRO is (row 4:
the framework's or the model's), and the decisions ``classify`` made for its instances, by
situation. The record lives on the class and refers only to the class, its MRO and code objects:
it keeps no instance alive, and dies with the class (torch's parametrizations create a class per
instance).
"""

from __future__ import annotations

import types
from collections.abc import Iterable, Mapping
from typing import Any, Final

from torch import nn

from ._config import Mode, check_bool, environment_mode
from ._declarations import Declaration, annotation_globals, own_annotations, read_declarations
from ._errors import ClassDefinitionError, ConfigurationError
from ._messages.contract import (
    MIXIN_AFTER_MODULE,
    MIXIN_WITHOUT_MODULE,
    STRICT_AND_WARN,
    UNKNOWN_KEYWORD,
    UNSEEN_CLASS,
)

__all__ = [
    "CACHE_LIMIT",
    "KEYWORDS",
    "ClassRecord",
    "create_record",
    "plain_subclass_of",
    "record_for_copy",
    "record_of",
    "unknown_keywords",
    "unseen_class",
]

KEYWORDS: Final = ("persistent", "strict", "warn")
# Entries each per-name cache of a class keeps at most: a model that makes up attribute names as
# it runs (``setattr(self, f"cache_{step}", t)``) must not grow its class without end. Past it, an
# assignment is decided as the first one was, and nothing more is kept.
CACHE_LIMIT: Final = 4096


class ClassRecord:
    """What autoreg decided about one class when the class was created."""

    __slots__ = (
        "apply_next",
        "attributes",
        "cls",
        "codes",
        "decisions",
        "declarations",
        "direct",
        "final",
        "framework_classes",
        "loud",
        "mixin",
        "mode",
        "model_classes",
        "namespace",
        "namespaces",
        "own",
        "persistent",
        "role_keys",
        "roots",
        "setattr_codes",
        "setattr_next",
        "shared",
        "shipped",
        "slots",
        "stated",
        "statement_file",
        "strict_by",
        "warned",
    )

    def __init__(
        self,
        cls: type,
        mixin: type,
        own: dict[str, bool],
        namespace: Mapping[str, Any] | None = None,
    ) -> None:
        """The record of ``cls``, read from the class and its MRO (a plain subclass's is derived
        from its base's: ``subclass``). ``own``: the keywords its class statement set itself;
        ``namespace``: the globals the statement ran in, where its string annotations resolve
        (``_declarations.defining_statement``)."""
        self.cls = cls
        self.mixin = mixin
        self.namespace = namespace
        # The file of a module whose code ran the class statement (not a function's: a factory's),
        # set by the mixin (_declarations.defining_statement); row 4 reads its package as the
        # model's (_attribution.judge_codes).
        self.statement_file: str | None = None
        # For a class made again from a pickle: the globals its plain mixins' annotations name,
        # by mixin (``__reduce__``); their own modules may not be the ones they were written in.
        self.shipped: Mapping[type, Mapping[str, Any]] = {}
        self.own = own  # the keywords this class statement set itself
        self.persistent = bool(_nearest(cls, own, "persistent")[0])
        self.stated: tuple[Mode, str] = _resolve_mode(cls, own)  # what the statements ask for,
        self._take_mode()  # and why; then the mode, AUTOREG_MODE's where set
        mro = cls.__mro__
        # The namespaces instance lookup searches, in order: live views, never stale (compiled
        # code reads them too, while dynamo traces: _facts.compiled_slot).
        self.namespaces: tuple[Mapping[str, Any], ...] = tuple(k.__dict__ for k in mro)
        # The next _apply and __setattr__ in the MRO (nn.Module's, or a base's override).
        after = mro[mro.index(mixin) + 1 :]
        self.apply_next: type = next(k for k in after if "_apply" in k.__dict__)
        self.setattr_next: type = next(k for k in after if "__setattr__" in k.__dict__)
        # Whether nn.Module.__setattr__ is the one after the mixin: then the mixin may take its
        # path for a value itself (register_buffer is checked live, see _execute.register).
        self.direct = self.setattr_next is nn.Module
        # Row 4: whose code each class of the MRO is (_attribution). The framework's: every base
        # that does not use autoreg, nn.Module or not, and the classes of its MRO; the model's:
        # the classes that use autoreg and the plain mixins listed before the mixin. nn.Module,
        # object and autoreg's own classes are neither. A plain subclass adds itself to its
        # base's model classes (it uses autoreg).
        framework = _framework_classes(cls, mixin)
        self.framework_classes = frozenset(framework)
        self.model_classes = frozenset(
            k for k in mro if k not in framework and k not in (nn.Module, object, mixin)
        )
        self.attributes = bool(self.framework_classes)  # only then is there anything to attribute
        # The code of the __setattr__ overrides of the class's MRO, decorated or not: the frames
        # between an assignment and the mixin's __setattr__ that tell nothing about whose it is
        # (_facts._assigner, the mixin's walk). Read again by ``finalize``; a plain subclass
        # without an override of its own shares its base's (replaced, never changed in place).
        self.setattr_codes = read_setattr_codes(mro)
        # Read now, so that no first read happens inside a compiled forward, and read again when
        # the class is first instantiated (``finalize``); a plain subclass has its base's.
        self.declarations = read_declarations(cls, _declares, self.globals_of)
        self.final = False
        # _contract.classify's decisions by situation (_facts.Situation -> _contract.Decision:
        # typed loosely, so that this module imports neither, which both read). Cleared only by
        # ``finalize``, which a final record never runs again.
        self.decisions: dict[tuple[Any, ...], Any] = {}
        # name -> _state.role_key(name), for eager assignments: built once per class and name, so
        # that an assignment looks its role up without building and hashing a new string.
        self.role_keys: dict[str, str] = {}
        self._start_caches()

    def subclass(
        self, cls: type, own: dict[str, bool], namespace: Mapping[str, Any] | None = None
    ) -> ClassRecord:
        """The record of ``cls``, a subclass of this record's class that adds nothing autoreg
        reads (``plain_subclass_of``) but maybe class keywords (``own``; ``namespace`` as for
        ``__init__``): this record's, but for the class itself. torch's parametrizations make
        such a class per instance, each gone with its parametrization: its cost is theirs, so
        it reads nothing ``__init__`` has read."""
        record: ClassRecord = object.__new__(ClassRecord)
        record.cls = cls
        record.mixin = self.mixin
        record.namespace = namespace
        record.statement_file = None
        record.shipped = {}
        record.own = own
        if own:
            record.persistent = bool(_nearest(cls, own, "persistent")[0])
            record.stated = _resolve_mode(cls, own)
        else:
            record.persistent = self.persistent
            record.stated = self.stated
        record._take_mode()
        # Its MRO is the base's, after the class itself.
        record.namespaces = (cls.__dict__, *self.namespaces)
        record.apply_next = self.apply_next
        record.setattr_next = self.setattr_next
        record.direct = self.direct
        record.framework_classes = self.framework_classes
        record.model_classes = self.model_classes | {cls}
        record.attributes = self.attributes
        if "__setattr__" in cls.__dict__:
            record.setattr_codes = {**self.setattr_codes, **read_setattr_codes((cls,))}
        else:
            record.setattr_codes = self.setattr_codes
        record.declarations = self.declarations  # replaced, never changed in place
        record.final = self.final
        # classify reads the declarations and the persistence: where they are the base's, so
        # are its decisions (a situation holds what the class defines under the name); then they
        # are one dict, shared, so that what one parametrized class of torch's learnt the next
        # one finds.
        shared = self.final and self.persistent == record.persistent
        record.decisions = self.decisions if shared else {}
        record.role_keys = self.role_keys
        record._start_caches()
        return record

    def _take_mode(self) -> None:
        """The mode: the one the class statements ask for, unless ``AUTOREG_MODE`` overrides
        every class; a bad value fails the user's class statement, not ``import autoreg``
        (which creates autoreg.Module)."""
        self.mode, self.strict_by = self.stated
        own_class = self.cls.__module__.partition(".")[0] == "autoreg"
        environment = _environment_or_none() if own_class else environment_mode()
        if environment is not None:
            self.mode = environment
            self.strict_by = "AUTOREG_MODE=strict"
        self.loud = self.mode is not Mode.REGISTER  # strict and warn mode act on concerns

    def _start_caches(self) -> None:
        """What the class learns as its instances are used, empty at first."""
        # Read by _attribution.judge_codes when row 4 is first asked for the class: id(code
        # object) -> (the code object, FRAMEWORK / MODEL / PASS / ambiguous), the code objects of
        # the functions of the classes above (keyed by id: hashing a code object hashes its
        # bytecode and compares equal code from another class; each kept beside its id, so that no
        # other code object can take it); the directories of the framework packages; for code
        # both sides have, their functions. A plain subclass reads its own when first asked.
        self.codes: dict[int, tuple[types.CodeType, str]] | None = None
        self.roots: tuple[str, ...] = ()
        self.shared: dict[int, list[tuple[types.FunctionType, str]]] = {}
        # name -> why it cannot hold a buffer (_facts.slot_kind), read when an instance first
        # assigns it: what the class defines under a name is a fact about the class.
        self.slots: dict[str, str | None] = {}
        self.warned: set[tuple[str, str]] = set()

    def globals_of(self, klass: type) -> Mapping[str, Any] | None:
        """The globals the class statement of ``klass``, a class of the MRO, ran in, where
        autoreg saw it (this class, or another autoreg class); None for any other."""
        if klass is self.cls:
            return self.namespace
        record = vars(klass).get("__autoreg__")
        return record.namespace if isinstance(record, ClassRecord) else self.shipped.get(klass)

    def statement_file_of(self, klass: type) -> str | None:
        """The file of the module whose code ran the class statement of ``klass``, a class of the
        MRO, where autoreg saw it (this class, or another autoreg class); None for any other, and
        for a statement a function ran."""
        if klass is self.cls:
            return self.statement_file
        record = vars(klass).get("__autoreg__")
        return record.statement_file if isinstance(record, ClassRecord) else None

    def finalize(self) -> None:
        """Read the class again, now that the module defining it is done: its annotations
        (forward references resolve) and its ``__setattr__`` overrides."""
        mro = self.cls.__mro__
        self.declarations = read_declarations(self.cls, _declares, self.globals_of)
        self.setattr_codes = read_setattr_codes(mro)
        self.decisions.clear()
        self.final = True

    def __reduce__(self) -> tuple[Any, ...]:
        """A class pickled by value (cloudpickle: a class of ``__main__`` or made in a function,
        as Ray, Dask and joblib ship it) is made again empty, then given its namespace: its
        record is made again for it (``record_for_copy``) from its keywords and the globals its
        string annotations name; the rest is read from the class when its first instance is
        assigned to (``finalize``). Pickling a record alone is no use: it holds the namespaces
        of the class's MRO."""
        names = annotation_globals(self.cls, self.namespace)
        mixins = {
            klass: annotation_globals(klass, self.globals_of(klass))
            for klass in self.cls.__mro__[1:]
            if _declares(klass) and not isinstance(vars(klass).get("__autoreg__"), ClassRecord)
        }  # plain mixins: autoreg saw no class statement of theirs
        return (record_for_copy, (self.cls, self.mixin, dict(self.own), names, mixins))

    def persistence(self, declaration: Declaration | None) -> bool:
        if declaration is Declaration.PERSISTENT:
            return True
        if declaration is Declaration.NONPERSISTENT:
            return False
        return self.persistent


def record_for_copy(
    cls: type,
    mixin: type,
    own: dict[str, bool],
    names: dict[str, Any],
    mixins: dict[type, dict[str, Any]],
) -> ClassRecord:
    """The record of ``cls``, made again by pickle while its namespace is not there yet (see
    ``ClassRecord.__reduce__``): not final, so that it reads the class at its first instance.
    Pickles name it: it keeps this name and place."""
    record = ClassRecord(cls, mixin, own, names)
    record.shipped = mixins
    return record


def read_setattr_codes(classes: Iterable[type]) -> dict[int, types.CodeType]:
    """The code of the ``__setattr__`` functions ``classes`` define, and of the functions they
    wrap (``__wrapped__``), by id, each kept beside its id. A function's own attributes are read,
    never a value's code."""
    codes: dict[int, types.CodeType] = {}
    for klass in classes:
        function = klass.__dict__.get("__setattr__")
        while type(function) is types.FunctionType:
            codes[id(function.__code__)] = function.__code__
            function = function.__dict__.get("__wrapped__")
    return codes


def plain_subclass_of(cls: type) -> ClassRecord | None:
    """The record of the one base of ``cls``, an autoreg class, when ``cls`` adds no annotations
    (its class keywords are the caller's to weigh: the mode and persistence are computed for
    every class). None otherwise."""
    if len(cls.__bases__) != 1:
        return None
    record = cls.__bases__[0].__dict__.get("__autoreg__")
    if not isinstance(record, ClassRecord):
        return None
    namespace = cls.__dict__
    annotated = namespace.get("__annotations__") or namespace.get("__annotate__") is not None
    if annotated and own_annotations(cls):  # what they are (Python 3.14 evaluates them lazily)
        return None
    return record


def _environment_or_none() -> Mode | None:
    try:
        return environment_mode()
    except ConfigurationError:
        return None


def record_of(module: object) -> ClassRecord:
    """The record of an autoreg instance's class."""
    record: ClassRecord = type(module).__autoreg__  # type: ignore[attr-defined]
    return record


def create_record(
    cls: type,
    mixin: type,
    keywords: dict[str, Any],
    parent: ClassRecord | None = None,
    namespace: Mapping[str, Any] | None = None,
) -> ClassRecord:
    """Check a new autoreg class and its keywords; return its record. ``parent``: the record of
    its one base, for a class without keywords that ``plain_subclass_of`` found (nothing to
    check); ``namespace``: the globals its class statement ran in."""
    own: dict[str, bool] = {}
    if parent is None:
        parent = plain_subclass_of(cls)
        _check_bases(cls, mixin)
        name = cls.__name__
        own = {
            key: value
            for key in KEYWORDS
            if (value := check_bool(name, key, keywords.get(key))) is not None
        }
        if own.get("strict") and own.get("warn"):
            raise ClassDefinitionError(STRICT_AND_WARN.format(cls=name))
    try:
        if parent is not None:
            return parent.subclass(cls, own, namespace)
        return ClassRecord(cls, mixin, own, namespace)
    except ConfigurationError as error:
        # A bad AUTOREG_MODE: the traceback goes from the user's class statement to this line.
        raise error.with_traceback(None) from None


def unseen_class(cls: type) -> ClassDefinitionError:
    """The error for an instance of ``cls`` whose class statement autoreg never saw: a base's
    ``__init_subclass__``, the one Python called for ``cls``, did not call the next one."""
    base = next(k for k in cls.__mro__[1:] if "__init_subclass__" in k.__dict__)
    return ClassDefinitionError(UNSEEN_CLASS.format(cls=cls.__name__, base=base.__name__))


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
    """The framework classes of ``cls``: those after the mixin in its MRO, and nn.Module
    subclasses without autoreg before it, with the classes of their MROs (nn.Module and object
    excepted)."""
    mro = cls.__mro__
    found = set(mro[mro.index(mixin) + 1 :])
    for klass in mro:
        if klass is not nn.Module and issubclass(klass, nn.Module) and not issubclass(klass, mixin):
            found.update(klass.__mro__)
    found.difference_update((nn.Module, object))
    return found
