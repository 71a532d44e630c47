"""Annotations that declare a tensor's role, and how a class's annotations are read.

``Persistent``, ``NonPersistent``, ``Carried`` and ``Plain`` are ``Annotated[torch.Tensor, ...]``:
type checkers read them as ``torch.Tensor``; autoreg reads the marker. A bare ``torch.Tensor`` (or
``Optional[torch.Tensor]``) annotation declares a buffer whose persistence follows the class.

Annotations are read lazily, the first time an instance needs them, so that forward references and
``from __future__ import annotations`` resolve against the finished module. Python 3.14 evaluates
annotations lazily itself: there they are read with ``annotationlib`` in the FORWARDREF format, so
that a name which does not evaluate (e.g. one imported only under ``TYPE_CHECKING``) comes back as a
``ForwardRef`` and declares nothing, as its string does before 3.14, instead of raising
``NameError`` at construction.

Only classes that use autoreg, and plain mixins, declare: the annotations of an ordinary
``nn.Module`` base (``nn.Linear`` has ``weight: Tensor``) describe that class as it is, for
TorchScript and type checkers, and are not read as declarations.
"""

from __future__ import annotations

import ast
import collections
import enum
import inspect
import sys
import types
from collections.abc import Callable, Iterable, Mapping
from types import FrameType
from typing import (
    Annotated,
    Any,
    ClassVar,
    Final,
    ForwardRef,
    TypeAlias,
    Union,
    get_args,
    get_origin,
)

import torch
from torch import nn

from ._paths import AUTOREG_DIR, INSTALLED_DIRS, PYTHON_DIRS

__all__ = [
    "Carried",
    "Declaration",
    "NonPersistent",
    "Persistent",
    "Plain",
    "annotation_globals",
    "buffer_declarations",
    "defining_statement",
    "own_annotations",
    "read_declarations",
]


class Declaration(enum.Enum):
    """The role an annotation gives to an attribute."""

    TENSOR = "buffer"  # persistence follows the class keyword
    PERSISTENT = "persistent buffer"
    NONPERSISTENT = "non-persistent buffer"
    CARRIED = "carried attribute"  # runtime state: moved by .to(), never module state
    PLAIN = "plain attribute"


Persistent: TypeAlias = Annotated[torch.Tensor, Declaration.PERSISTENT]
"""A buffer that is saved in ``state_dict``."""

NonPersistent: TypeAlias = Annotated[torch.Tensor, Declaration.NONPERSISTENT]
"""A buffer that is left out of ``state_dict``."""

Carried: TypeAlias = Annotated[torch.Tensor, Declaration.CARRIED]
"""Runtime state: a plain attribute that ``.to()`` converts; never a buffer, nor in ``state_dict``.

Carried wherever it is assigned, ``__init__`` included; strict and warn mode accept it as declared.
"""

Plain: TypeAlias = Annotated[torch.Tensor, Declaration.PLAIN]
"""A tensor attribute that autoreg never registers or moves."""


def read_declarations(
    cls: type,
    declares: Callable[[type], bool],
    globals_of: Callable[[type], Mapping[str, Any] | None],
) -> dict[str, Declaration]:
    """Map each declared attribute of ``cls`` to its declaration.

    ``declares(klass)`` tells whether the annotations of ``klass``, a class in ``cls.__mro__``,
    count; ``globals_of(klass)``, the global namespace its class statement ran in, if known
    (``defining_statement``). Subclasses override their bases, and re-annotating a name with a
    non-tensor type undeclares it.
    """
    found: dict[str, Declaration | None] = {}
    for klass in reversed(cls.__mro__):
        if not declares(klass):
            continue
        for name, annotation in own_annotations(klass).items():
            found[name] = _classify(_resolve(annotation, klass, globals_of(klass)))
    return {name: declaration for name, declaration in found.items() if declaration is not None}


# Code between a class's creation and the code that asks for it: autoreg's and Python's own
# (whose directory may hold the installed packages).
_PASSED_BY: Final = (AUTOREG_DIR, *PYTHON_DIRS)


def _passed_by(filename: str) -> bool:
    return filename.startswith(_PASSED_BY) and not filename.startswith(INSTALLED_DIRS)


_BUFFERS: Final = (Declaration.TENSOR, Declaration.PERSISTENT, Declaration.NONPERSISTENT)


def buffer_declarations(klass: type) -> tuple[str, ...]:
    """The names the own annotations of ``klass``, a class that does not use autoreg yet, would
    declare buffers once it did (``temperature: torch.Tensor``): names that then refuse any
    value but a tensor or None, where nn.Module reads the annotation as a type hint only."""
    namespace = _globals_of(klass)
    return tuple(
        name
        for name, annotation in own_annotations(klass).items()
        if _classify(_resolve(annotation, klass, namespace)) in _BUFFERS
    )


def defining_statement(
    cls: type, frame: FrameType | None
) -> tuple[Mapping[str, Any] | None, str | None]:
    """Where the string annotations of ``cls`` resolve: the global namespace of the code whose
    class statement (or ``type()`` call) is creating ``cls``, from ``frame`` (the caller of an
    ``__init_subclass__``) up - the first frame that runs neither autoreg's code, Python's own
    (``types.new_class``, ``dataclasses.make_dataclass``), an ``__init_subclass__`` of the bases
    of ``cls`` nor a method of its metaclass, known by the identity of their code - which
    ``cls.__module__`` need not name (a library's public path); with, over it, the locals of
    that code that the annotations name, when it is a function's (``import autoreg as ar`` in a
    factory: ``"ar.Persistent"``), as Python resolves a name in a class body there.

    With it, the file of that code when it is a module's (or a class body's in one), not a
    function's (a factory's): row 4 reads the package of a model class written there as the
    model's; None otherwise."""
    found = _statement_frame(cls, frame)
    if found is None:
        return None, None
    at_module_level = not found.f_code.co_flags & inspect.CO_NEWLOCALS
    return _namespace_of(cls, found), found.f_code.co_filename if at_module_level else None


def _statement_frame(cls: type, frame: FrameType | None) -> FrameType | None:
    """The frame whose code runs the class statement (or ``type()`` call) creating ``cls``:
    ``frame`` or the first of its callers that runs none of the code ``defining_statement``
    passes."""
    skipped: set[int] = set()  # the ids of the code passed (the functions hold it)
    methods = [(klass, "__init_subclass__") for klass in cls.__mro__]
    for klass in inspect.getmro(type(cls)):  # what runs between the statement and those
        methods += [(klass, method) for method in ("__new__", "__init__", "__call__")]
    for klass, method in methods:
        function = vars(klass).get(method)
        function = getattr(function, "__func__", function)  # a classmethod's, a staticmethod's
        code = getattr(inspect.unwrap(function), "__code__", None) if function else None
        if code is not None:
            skipped.add(id(code))  # by identity: hashing a code object hashes its constants,
            # which dynamo's rewritten code may hold unhashable (a dict)
    while frame is not None and (
        id(frame.f_code) in skipped or _passed_by(frame.f_code.co_filename)
    ):
        frame = frame.f_back
    return frame


def _namespace_of(cls: type, frame: FrameType) -> Mapping[str, Any]:
    """The globals ``frame`` runs in, with the locals the string annotations of ``cls`` name."""
    namespace = frame.f_globals
    names = _names_in(own_annotations(cls).values())
    if names:
        local = frame.f_locals  # the globals themselves, for a module's code
        if local is not namespace:
            captured = {name: local[name] for name in names if name in local}
            if captured:
                return collections.ChainMap(captured, namespace)  # the globals stay live
    return namespace


def _names_in(annotations: Iterable[Any]) -> set[str]:
    """The names the string annotations among ``annotations`` read (``"ar.Persistent"``:
    ``ar``)."""
    names: set[str] = set()
    for annotation in annotations:
        text = annotation.__forward_arg__ if isinstance(annotation, ForwardRef) else annotation
        if not isinstance(text, str):
            continue
        try:
            tree = ast.parse(text, mode="eval")
        except SyntaxError:
            continue
        names.update(node.id for node in ast.walk(tree) if isinstance(node, ast.Name))
    return names


if sys.version_info >= (3, 14):
    import annotationlib

    def own_annotations(klass: type) -> dict[str, Any]:
        """The annotations ``klass`` itself declares; names that do not evaluate are ForwardRefs."""
        return annotationlib.get_annotations(klass, format=annotationlib.Format.FORWARDREF)

else:

    def own_annotations(klass: type) -> dict[str, Any]:
        """The annotations ``klass`` itself declares, strings left unevaluated."""
        return inspect.get_annotations(klass)


def annotation_globals(klass: type, namespace: Mapping[str, Any] | None) -> dict[str, Any]:
    """The globals the string annotations of ``klass`` name (``"ar.Persistent"``: ``ar``),
    looked up where they resolve (``namespace``, else what ``_globals_of`` finds): what a copy
    of the class made in another process needs to read them (``ClassRecord.__reduce__``)."""
    if namespace is None:
        namespace = _globals_of(klass)
    names = _names_in(own_annotations(klass).values())
    return {name: namespace[name] for name in sorted(names) if name in namespace}


def _resolve(annotation: Any, klass: type, namespace: Mapping[str, Any] | None) -> Any:
    """Evaluate a string annotation where its class was written (``namespace``, else what
    ``_globals_of`` finds); None when it cannot be resolved.

    A ``ForwardRef`` (what Python 3.14 gives for a name it could not evaluate) is its string.
    """
    if isinstance(annotation, ForwardRef):
        annotation = annotation.__forward_arg__
    if not isinstance(annotation, str):
        return annotation
    if namespace is None:
        namespace = _globals_of(klass)
    try:
        return eval(annotation, dict(namespace), dict(vars(klass)))  # noqa: S307
    except Exception:  # noqa: BLE001 - e.g. a name imported only under TYPE_CHECKING
        return None


def _globals_of(klass: type) -> dict[str, Any]:
    """For a class whose class statement autoreg did not see (a plain mixin): the global
    namespace of its module, or, for a class created by exec() in a namespace that is no module,
    the one its own methods carry."""
    module = sys.modules.get(klass.__module__)
    if module is not None:
        return vars(module)
    for attribute in vars(klass).values():
        function = inspect.unwrap(getattr(attribute, "__func__", attribute))
        namespace = getattr(function, "__globals__", None)
        if isinstance(namespace, dict) and function.__module__ == klass.__module__:
            return namespace
    return {}


def _classify(annotation: Any) -> Declaration | None:
    origin = get_origin(annotation)
    if origin is ClassVar:
        return None
    if origin is Annotated:
        base, *metadata = get_args(annotation)
        for marker in metadata:
            if isinstance(marker, Declaration):
                return marker
        return _classify(base)
    if origin is Union or origin is types.UnionType:
        members = [arg for arg in get_args(annotation) if arg is not type(None)]
        return _classify(members[0]) if len(members) == 1 else None
    is_tensor_type = isinstance(annotation, type) and issubclass(annotation, torch.Tensor)
    if is_tensor_type and not issubclass(annotation, nn.Parameter):
        return Declaration.TENSOR
    return None
