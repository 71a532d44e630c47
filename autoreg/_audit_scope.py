"""What the audits look at in one module, and what they let pass: ``candidates``.

``find_unregistered`` and ``register_tensors`` read the same entries of a module's ``__dict__``:
tensors and list, tuple and dict attributes, less nn.Module's internal attributes, autoreg's own
``_autoreg_*`` keys, names an autoreg class declares ``autoreg.Plain``, and the tensors a forward
pre-hook of prune, weight_norm or spectral_norm recomputes at every call. Of those, what an
autoreg module carries moves with it (``carried_by_autoreg``), and so does what a class's own
``_apply`` converts (``overrides_apply``; a per-device cache it empties, ``is_device_cache``).

``find_unregistered`` also reads what no ``.to()`` ever moves (``entries``): numpy arrays
(``array_dtype``) and plain objects held in public attributes (a dataclass, a namespace, a
config, a distribution), one level into them: the entries of the instance's ``__dict__`` and
the values of its ``__slots__``, read through the descriptors of its class, never through the
object's own code (``__getattribute__``, properties). An attribute whose name starts with ``_``
holds a framework's object (Lightning's ``_trainer``): not walked, but for a field of a
``torch.distributions`` object, where it keeps its tensors (``is_read_field``).
"""

from __future__ import annotations

import inspect
import sys
import types
from collections.abc import Iterator
from typing import Any, Final, cast

import torch
from torch import nn
from torch.distributions import Distribution

from ._carry import carried
from ._declarations import Declaration
from ._facts import recomputed_names
from ._mixin import AutoRegisterMixin
from ._paths import AUTOREG_DIR, INSTALLED_DIRS, PYTHON_DIRS, TORCH_DIR
from ._state import MODULE_INTERNALS
from ._walk import CONTAINERS, iter_tensors

__all__ = [
    "NOT_OWN_DIRS",
    "OBJECT_DEPTH",
    "array_dtype",
    "candidates",
    "carried_by_autoreg",
    "class_entries",
    "entries",
    "history_free_memo",
    "is_device_cache",
    "is_holder",
    "is_own_code",
    "is_public",
    "is_read_field",
    "iter_arrays",
    "object_fields",
    "overrides_apply",
    "own_method",
    "rebuilt_by_apply",
]

# What is never walked as a plain object: values without fields of their own, and code.
_NOT_OBJECTS = (
    type(None),
    bool,
    int,
    float,
    complex,
    str,
    bytes,
    bytearray,
    type,
    types.ModuleType,
    torch.Tensor,
    nn.Module,
    torch.device,
    torch.dtype,
    torch.Size,
    range,
    slice,
    set,
    frozenset,
)


def candidates(module: nn.Module) -> Iterator[tuple[str, object]]:
    """The ``__dict__`` entries of ``module`` that hold, or may hold, tensors ``.to()`` ignores."""
    for name, value, kind in entries(module):
        if kind == "value":
            yield name, value


def entries(module: nn.Module) -> Iterator[tuple[str, object, str]]:
    """``(name, value, kind)`` for what the audit reads in ``module``'s ``__dict__``, in order:
    ``"value"`` (a tensor or a container), ``"array"`` (a numpy array) or ``"object"`` (a plain
    object in a public attribute)."""
    declarations: dict[str, Declaration] = (
        type(module).__autoreg__.declarations if isinstance(module, AutoRegisterMixin) else {}
    )
    recomputed = recomputed_names(module._forward_pre_hooks) | rebuilt_by_apply(type(module))
    for name, value in list(module.__dict__.items()):
        if name in MODULE_INTERNALS or name.startswith("_autoreg_") or name in recomputed:
            continue
        if declarations.get(name) is Declaration.PLAIN:
            continue
        # The type, never isinstance: that would ask the value for its __class__.
        if issubclass(type(value), (torch.Tensor, *CONTAINERS)):
            yield name, value, "value"
        elif array_dtype(value) is not None:
            yield name, value, "array"
        elif is_holder(name, value):
            yield name, value, "object"


def class_entries(cls: type) -> list[tuple[str, object, type]]:
    """``(name, value, owner)`` for the tensors, containers, numpy arrays and plain objects
    (``is_holder``) defined on the classes of ``cls`` (the first definition of each name in the
    MRO, as lookup finds it; dunder names, names an autoreg class declares ``autoreg.Plain``, and
    descriptors - methods, properties: code, not data - aside). An instance without an attribute
    of its own under the name reads it through its class, and ``.to()`` converts what the
    instance holds, never what its class does."""
    found: list[tuple[str, object, type]] = []
    declarations = cls.__autoreg__.declarations if issubclass(cls, AutoRegisterMixin) else {}
    seen = {name for name, declared in declarations.items() if declared is Declaration.PLAIN}
    for klass in cls.__mro__:
        for name, value in vars(klass).items():
            if name in seen or name.startswith("__"):
                continue
            seen.add(name)
            kind = type(value)  # the type: see entries
            if (
                issubclass(kind, (torch.Tensor, *CONTAINERS))
                or array_dtype(value) is not None
                or (not hasattr(kind, "__get__") and is_holder(name, value))
            ):
                found.append((name, value, klass))
    return found


def carried_by_autoreg(module: nn.Module, name: str, value: object) -> bool:
    """Whether ``module.name`` holds ``value`` that an autoreg module's ``.to()`` converts: the one
    place the audits ask autoreg's core what it carries.

    Only instances of autoreg classes carry: an instance unpickled after its class went back to
    ``nn.Module`` keeps autoreg's keys in its ``__dict__``, but nothing converts its tensors.
    """
    return isinstance(module, AutoRegisterMixin) and carried(module, name)


def is_device_cache(value: object) -> bool:
    """Whether ``value`` is a non-empty dict keyed by device names, as ``str(tensor.device)``."""
    return isinstance(value, dict) and bool(value) and all(map(_is_device_name, value))


def _is_device_name(key: object) -> bool:
    if not isinstance(key, str):
        return False
    try:
        return str(torch.device(key)) == key
    except (RuntimeError, TypeError, ValueError):
        return False


def overrides_apply(cls: type) -> bool:
    """Whether the ``_apply`` of ``cls`` is code of its own that may convert more than parameters
    and buffers: another than nn.Module's and the mixin's (by identity: a class may set any
    ``__module__``), and not torch's (by where its code lives: ``RNNBase``'s re-flattens weights,
    ``rebuilt_by_apply``; FSDP's reshards, and a deep copy of an FSDP module raises)."""
    function = _apply_of(cls)
    if function is _MODULE_APPLY or function is _MIXIN_APPLY:
        return False
    code = getattr(inspect.unwrap(function), "__code__", None)
    return code is None or not code.co_filename.startswith(TORCH_DIR)


def rebuilt_by_apply(cls: type) -> frozenset[str]:
    """The attributes of ``cls`` that torch's own ``_apply`` (told by identity) makes again from
    the module's attributes after converting: ``nn.RNNBase``'s ``_flat_weights``, the weights
    under ``_flat_weights_names`` (what a weight drop left there goes; a weight kept as a plain
    attribute is reported under its own name)."""
    return _REBUILT.get(_apply_of(cls), frozenset())


def _apply_of(cls: type) -> Any:
    return next(vars(klass)["_apply"] for klass in cls.__mro__ if "_apply" in vars(klass))


_MODULE_APPLY: Final = vars(nn.Module)["_apply"]
_REBUILT: Final = {vars(nn.RNNBase)["_apply"]: frozenset({"_flat_weights"})}
_MIXIN_APPLY: Final = vars(AutoRegisterMixin)["_apply"]


# Where code that is not the user's own lives: Python's own modules, installed packages (a
# framework's to(): Lightning's, transformers'), torch and autoreg (either may be a checkout).
NOT_OWN_DIRS: Final = (*PYTHON_DIRS, *INSTALLED_DIRS, TORCH_DIR, AUTOREG_DIR)
_NOT_OWN: Final = (*NOT_OWN_DIRS, "<frozen ")  # and Python's own import machinery


def is_own_code(filename: str) -> bool:
    """Whether code in ``filename`` is the user's own: not Python's, an installed package's,
    torch's or autoreg's (``<stdin>``, a notebook cell or ``exec`` code is the user's)."""
    return not filename.startswith(_NOT_OWN)


def own_method(cls: type, methods: tuple[str, ...]) -> tuple[str, str, str, int] | None:
    """``(method, class name, file, line)`` of the first of ``methods`` that a class of
    ``cls.__mro__`` defines in the user's own code; None if none does. Told by where the code
    lives, never by the class's ``__module__``, which any class may set. A framework's ``to()``
    or ``_apply`` (Lightning's, torchmetrics') moves what the framework keeps, never a tensor the
    user's class assigned; the user's own may (``self.scale = self.scale.to(device)``). Read from
    the class, never by calling it."""
    for klass in cls.__mro__:
        for method in methods:
            function = vars(klass).get(method)
            if function is None:
                continue
            code = getattr(inspect.unwrap(function), "__code__", None)
            if code is not None and is_own_code(code.co_filename):
                return method, klass.__name__, code.co_filename, code.co_firstlineno
    return None


# How many plain objects deep the attribute audit reads: the object a module holds, and the
# objects in its public fields and in theirs (a distribution wrapping a distribution, a config
# section inside a config). A bound, so that an object graph (an environment, a client) costs a
# few objects, not the graph.
OBJECT_DEPTH: Final = 3


def is_public(name: str) -> bool:
    """Whether an attribute or field ``name`` is the model's to read: one whose name starts with
    ``_`` is a framework's (Lightning's ``_trainer``, FSDP2's state)."""
    return not name.startswith("_")


def is_read_field(holder: object, field: str) -> bool:
    """Whether the audit reads the objects and containers in the field ``field`` of the plain
    object ``holder``: a public field; any field of a ``torch.distributions`` object (told by its
    type), which keeps its tensors and the distributions it wraps in ``_`` fields
    (``OneHotCategorical._categorical``, ``MixtureSameFamily._mixture_distribution``)."""
    return is_public(field) or issubclass(type(holder), Distribution)


def is_holder(name: str | None, value: object) -> bool:
    """Whether ``value``, held in ``name`` (None: an item of a container), is a plain object
    whose fields the audit reads."""
    if name is not None and not is_public(name):
        return False  # a framework's (private)
    if issubclass(type(value), (*_NOT_OBJECTS, *CONTAINERS)):
        return False  # a value without fields, or a container (walked)
    return bool(object_fields(value))  # code has none: a function's __dict__ is empty


def history_free_memo(model: nn.Module, memo: dict[int, Any] | None = None) -> dict[int, Any]:
    """A ``copy.deepcopy`` memo for ``model`` (added to ``memo``): each tensor with autograd
    history that its modules hold (an attribute, in a container, or in a field of a plain object
    they hold, ``OBJECT_DEPTH`` objects deep) mapped to a detached copy of its value, which
    ``deepcopy`` refuses to copy (a state kept by a training forward, a metric's state fed a
    tensor that requires grad)."""
    memo = {} if memo is None else memo
    seen: set[int] = set()
    for module in model.modules():
        level: list[tuple[str | None, object]] = list(vars(module).items())
        for _ in range(OBJECT_DEPTH + 1):
            deeper: list[tuple[str | None, object]] = []
            for name, value in level:
                if id(value) in seen:
                    continue
                seen.add(id(value))
                for _, tensor in iter_tensors(value):
                    if tensor.grad_fn is not None and id(tensor) not in memo:
                        memo[id(tensor)] = tensor.detach().clone()
                if is_holder(name, value):  # its fields (None: read whatever its name)
                    fields = object_fields(value)
                    deeper.extend((None if is_read_field(value, f) else f, v) for f, v in fields)
            level = deeper
    return memo


def object_fields(value: object) -> list[tuple[str, object]]:
    """The fields of ``value``: its instance ``__dict__`` and its ``__slots__``, read through the
    descriptors of its class (``object.__getattribute__`` would run an override of it)."""
    fields: list[tuple[str, object]] = []
    cls = type(value)
    for klass in cls.__mro__:
        descriptor = vars(klass).get("__dict__")
        if isinstance(descriptor, (types.GetSetDescriptorType, types.MemberDescriptorType)):
            namespace = descriptor.__get__(value, cls)
            if isinstance(namespace, dict):
                fields.extend((str(key), item) for key, item in namespace.items())
            break
    for klass in cls.__mro__:
        slots = vars(klass).get("__slots__", ())
        for slot in (slots,) if isinstance(slots, str) else slots:
            descriptor = vars(klass).get(slot)
            if isinstance(descriptor, types.MemberDescriptorType):
                try:
                    fields.append((slot, descriptor.__get__(value, cls)))
                except AttributeError:  # a slot never assigned
                    continue
    return fields


def array_dtype(value: object) -> torch.dtype | None:
    """The torch dtype of a numpy array the audit reports: a floating or complex one (``None``
    for anything else). An integer or boolean array holds sizes, indices or masks, which forward
    reads as numbers or hands to torch, and ``.to(dtype)`` would convert nothing in it; where
    forward makes a tensor of it, that tensor is the forward audit's finding, at the line that
    makes it. numpy is not imported: an array exists only where numpy already is."""
    numpy = sys.modules.get("numpy")
    if numpy is None or not issubclass(type(value), numpy.ndarray):
        return None
    try:
        dtype = torch.from_numpy(numpy.empty((0,), dtype=cast(Any, value).dtype)).dtype
    except TypeError:  # strings, objects: not what a tensor holds
        return None
    return dtype if dtype.is_floating_point or dtype.is_complex else None


def iter_arrays(value: object, path: str) -> Iterator[tuple[str, object]]:
    """``(path, array)`` for ``value`` itself or each numpy array nested in its containers."""
    seen: set[int] = set()

    def walk(item: object, where: str) -> Iterator[tuple[str, object]]:
        if id(item) in seen:
            return
        seen.add(id(item))
        if array_dtype(item) is not None:
            yield where, item
        elif isinstance(item, CONTAINERS):
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            for key, child in pairs:
                yield from walk(child, f"{where}[{key!r}]")

    return walk(value, path)
