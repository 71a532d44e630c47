"""From the audits' findings on a built model to ``Stray`` records: plain data for ``plan``.

The one step of ``autoreg fix`` that looks at tensors and classes. A finding names a tensor, the
class of the module that holds it and the attribute; here it gets the module itself (found by
walking the model as ``find_unregistered`` does), what the attribute holds (a tensor, a container
of tensors or of modules, a weight that requires grad, ...), where it was stored (``sites``), and
where the module's class and its bases are defined (``inspect``).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import os
import sys
import textwrap
import types
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Final

import torch
from torch import nn

from .._audit import locate_unregistered, viewed_parameter
from .._audit_scope import class_entries, is_device_cache, is_own_code, own_method
from .._declarations import buffer_declarations
from .._facts import why_no_buffer_slot
from .._forward_audit import ForwardFinding
from .._frames import is_library, location
from .._messages.fix import (
    FIX_HAND_ALIAS,
    FIX_HAND_ALIAS_EDIT,
    FIX_HAND_ARRAY,
    FIX_HAND_ARRAYS,
    FIX_HAND_AUTOGRAD,
    FIX_HAND_AUTOGRAD_EDIT,
    FIX_HAND_CLASS_ATTRIBUTE,
    FIX_HAND_DEVICE_CACHE,
    FIX_HAND_DEVICE_CACHE_EDIT,
    FIX_HAND_DICT_READ,
    FIX_HAND_DICT_READ_EDIT,
    FIX_HAND_DTYPE,
    FIX_HAND_DTYPE_EDIT,
    FIX_HAND_FINDING,
    FIX_HAND_FROM_PRETRAINED,
    FIX_HAND_FROM_PRETRAINED_EDIT,
    FIX_HAND_GRAD,
    FIX_HAND_GRAD_EDIT,
    FIX_HAND_IN_OBJECT,
    FIX_HAND_IN_OBJECTS,
    FIX_HAND_MOVES_ITSELF,
    FIX_HAND_MOVES_ITSELF_EDIT,
    FIX_HAND_NO_SLOT,
    FIX_HAND_NO_SLOT_EDIT,
    FIX_HAND_PARAMETER,
    FIX_HAND_PARAMETER_EDIT,
    FIX_HAND_PARAMETER_VIEW,
    FIX_HAND_PARAMETER_VIEW_EDIT,
    FIX_HAND_STORED,
    FIX_MAY_BE_WRITTEN,
    FIX_SETTER_DESCRIPTOR,
    FIX_SETTER_SETATTR,
    FIX_WRITTEN,
    PLAIN_COMMENT_ALIAS,
    PLAIN_COMMENT_DICT_READ,
    PLAIN_COMMENT_DTYPE,
    PLAIN_COMMENT_FROM_PRETRAINED,
)
from .._mixin import AutoRegisterMixin
from .._paths import TORCH_DIR
from .._walk import CONTAINERS, iter_modules, iter_tensors
from .project import function_stores
from .sites import Stores
from .strays import ClassInfo, Kind, Site, Stray

# A finding's holder class, attribute and kind ("tensor", "object": in a plain object, "numpy").
Key = tuple[type, str, str]

__all__ = ["autoreg_keeps_complex", "collect"]


def collect(
    model: nn.Module,
    stores: Stores,
    forward: Iterable[ForwardFinding] = (),
    *,
    exercised: bool,
) -> list[Stray]:
    """One ``Stray`` per class and attribute that leaves tensors behind, in the order
    ``find_unregistered`` reports them, then the state ``forward`` stores (its ``"stored"``
    findings), with the sites ``stores`` recorded while the model was built. Tensors inside a
    plain object and numpy arrays are strays of their own, listed (``Kind.HAND``) with the
    audit's fix: autoreg moves neither, in any style. ``exercised``: the model's forward ran in
    both modes (``analyse``), so that a tensor nothing has written in place is one forward does
    not write; otherwise tensors that share values are listed, whether or not they were."""
    holders: dict[Key, list[nn.Module]] = {}
    fixes: dict[Key, str] = {}
    paths: dict[Key, list[str]] = {}  # a held object's or an array's paths, in the first module
    later: dict[Key, list[Site]] = {}
    follows: dict[Key, str] = {}  # what an alias follows (_audit.Located.follows)
    written: dict[Key, bool] = {}  # whether it is known to be written in place
    for entry in locate_unregistered(model):
        held = entry.finding
        key = (type(entry.holder), held.attribute, held.kind)
        modules = holders.setdefault(key, [])
        if entry.holder not in modules:
            modules.append(entry.holder)
        fixes.setdefault(key, held.fix)
        if entry.follows is not None and (not exercised or _written(held.tensor)):
            # It shares its values with another tensor, and they were written in place (while
            # built, or in forward), or may be (forward did not run in both modes): converted
            # apart, they would stop sharing them. Never written, as a mask handed to every
            # block, each may be converted alone.
            follows.setdefault(key, entry.follows)
            written.setdefault(key, exercised)
        if entry.holder is modules[0]:
            relative = held.path.removeprefix(f"{entry.holder_path}.")
            paths.setdefault(key, []).append(relative)
    for finding in forward:
        if finding.kind == "stored":
            module = model.get_submodule(finding.module_path)
            key = (type(module), finding.attribute, "tensor")
            holders.setdefault(key, [module])
            fixes.setdefault(key, finding.fix)
            where = os.path.abspath(finding.filename)
            site = Site(where, finding.lineno, "forward", False, finding.stored)
            later.setdefault(key, []).append(site)
    meta_built = _from_pretrained(model)
    strays = []
    for (cls, attribute, kind), modules in holders.items():
        sites = [site for module in modules for site in stores.of(module, attribute)]
        sites += later.get((cls, attribute, kind), [])
        fix, unique = fixes[cls, attribute, kind], tuple(dict.fromkeys(sites))
        if (cls, attribute, kind) in follows:  # a second name for another tensor
            reason = FIX_HAND_ALIAS.format(
                follows=follows[cls, attribute, kind],
                written=FIX_WRITTEN if written[cls, attribute, kind] else FIX_MAY_BE_WRITTEN,
            )
            edit = FIX_HAND_ALIAS_EDIT.format(
                follows=follows[cls, attribute, kind], attribute=attribute
            )
            strays.append(
                Stray(
                    _classes(cls),
                    attribute,
                    Kind.HAND,
                    unique,
                    reason=reason,
                    edit=edit,
                    plain=PLAIN_COMMENT_ALIAS,
                )
            )
        elif kind == "tensor":
            strays.append(_stray(cls, attribute, modules[0], unique, fix, meta_built))
        else:  # in a plain object, or a numpy array: autoreg moves neither, whatever the style
            held = inspect.getattr_static(modules[0], attribute, None)  # the class's, maybe
            reason = _not_moved(kind, held, paths[cls, attribute, kind])
            strays.append(
                Stray(_classes(cls), attribute, Kind.HAND, unique, reason=reason, edit=fix)
            )
    stored = stores.every()
    return [_with_seen(stray, stored) for stray in strays]


def _with_seen(stray: Stray, stored: list[tuple[str, Site]]) -> Stray:
    """``stray``, each of its classes given the stores of ``stored`` (every store the run saw)
    of a name its annotations would declare, in its class statement (``ClassInfo.seen``): a
    store whose value the source does not tell (``F.cross_entropy(...)``) is known by what it
    stored. The same for a class whichever stray names it."""
    classes = tuple(
        dataclasses.replace(
            c,
            seen=tuple(
                dict.fromkeys(
                    (name, site.lineno, site.value)
                    for name, site in stored
                    if name in c.declared
                    and site.filename == c.filename
                    and c.lineno <= site.lineno <= c.end_lineno
                )
            ),
        )
        if c.declared
        else c
        for c in stray.classes
    )
    return dataclasses.replace(stray, classes=classes)


def _not_moved(kind: str, value: object, paths: list[str]) -> str:
    """Why a tensor inside a plain object (``kind`` ``"object"``), or a numpy array, is listed:
    neither ``.to()`` nor autoreg moves it."""
    several = len(paths) > 1
    if kind == "object":
        holder = type(value).__name__
        template = FIX_HAND_IN_OBJECTS if several else FIX_HAND_IN_OBJECT
        return template.format(holder=holder, paths=", ".join(paths))
    return (FIX_HAND_ARRAYS if several else FIX_HAND_ARRAY).format(paths=", ".join(paths))


def _holds_tensor(value: object) -> bool:
    """Whether ``value`` holds a tensor (a forward that stores one under a name the class gives
    a tuple of numbers is no class attribute's)."""
    return any(True for _ in iter_tensors(value))


def _stray(
    cls: type,
    attribute: str,
    module: nn.Module,
    sites: tuple[Site, ...],
    fix: str,
    meta_built: bool = False,
) -> Stray:
    """``meta_built``: the model is a transformers ``PreTrainedModel`` (``_from_pretrained``)."""
    classes = _classes(cls)
    value = module.__dict__.get(attribute)

    text = {"attribute": attribute, "cls": cls.__qualname__}

    def hand(reason: str, edit: str) -> Stray:
        return Stray(classes, attribute, Kind.HAND, sites, reason=reason, edit=edit)

    if attribute not in module.__dict__:  # read through the class, as the audit found it
        owner = next(
            (k for name, on, k in class_entries(cls) if name == attribute and _holds_tensor(on)),
            None,
        )
        if owner is not None:
            return hand(FIX_HAND_CLASS_ATTRIBUTE.format(owner=owner.__qualname__), fix)
    through = _read_through_dict(cls, attribute)
    if through is not None:  # a buffer is in _buffers, never in the instance's __dict__
        reader, line = through
        reason = FIX_HAND_DICT_READ.format(owner=reader, where=line)
        edit = FIX_HAND_DICT_READ_EDIT.format(**text)
        return dataclasses.replace(hand(reason, edit), plain=PLAIN_COMMENT_DICT_READ)
    viewed = next(
        (p for _, t in iter_tensors(value) if (p := viewed_parameter(module, t)) is not None), None
    )
    if viewed is not None:
        reason = FIX_HAND_PARAMETER_VIEW.format(parameter=viewed)
        return hand(reason, FIX_HAND_PARAMETER_VIEW_EDIT.format(parameter=viewed, **text))
    if isinstance(value, torch.Tensor):
        if isinstance(value, nn.Parameter):
            return hand(FIX_HAND_PARAMETER, FIX_HAND_PARAMETER_EDIT.format(**text))
        if value.requires_grad and value.is_leaf:
            return hand(FIX_HAND_GRAD, FIX_HAND_GRAD_EDIT.format(**text))
        if value.requires_grad and any(site.construction for site in sites):
            return hand(FIX_HAND_AUTOGRAD, FIX_HAND_AUTOGRAD_EDIT)
        where = why_no_buffer_slot(cls, attribute)
        if where is not None:
            return hand(FIX_HAND_NO_SLOT.format(where=where, **text), FIX_HAND_NO_SLOT_EDIT)
        kind = Kind.TENSOR
    elif not isinstance(value, CONTAINERS):  # stored by forward, in the audit's copy only
        stored = {site.value for site in sites if not site.construction}
        if "container" in stored:
            return Stray(classes, attribute, Kind.TENSORS, sites, "container")
        if "tensor" not in stored:
            return hand(FIX_HAND_STORED, fix)
        kind = Kind.TENSOR
    elif is_device_cache(value):
        return hand(FIX_HAND_DEVICE_CACHE, FIX_HAND_DEVICE_CACHE_EDIT.format(**text))
    elif any(True for _ in iter_modules(value)):
        container = type(value).__name__
        return Stray(classes, attribute, Kind.MODULES, sites, container, _wrappable(value))
    elif any(t.requires_grad and t.is_leaf for _, t in iter_tensors(value)):
        return hand(FIX_HAND_GRAD, FIX_HAND_GRAD_EDIT.format(**text))
    else:
        kind = Kind.TENSORS
    if isinstance(module, AutoRegisterMixin):  # autoreg would move it: something else is wrong
        return hand(FIX_HAND_FINDING.format(**text), fix)
    built = any(site.construction and site.value == "tensor" for site in sites)
    if meta_built and kind is Kind.TENSOR and built:  # a None declared there is no value
        edit = FIX_HAND_FROM_PRETRAINED_EDIT.format(**text)
        return dataclasses.replace(
            hand(FIX_HAND_FROM_PRETRAINED, edit), plain=PLAIN_COMMENT_FROM_PRETRAINED
        )
    dtype = _own_dtype(value)
    if dtype:  # chosen on purpose: .to(dtype) converts a buffer, or autoreg's carried state
        reason = FIX_HAND_DTYPE.format(dtype=dtype, default=_name(torch.get_default_dtype()))
        edit = FIX_HAND_DTYPE_EDIT.format(**text)
        return dataclasses.replace(
            hand(reason, edit), plain=PLAIN_COMMENT_DTYPE.format(dtype=dtype)
        )
    override = _moves_itself(cls)
    if override is not None:  # its own code may move it already: moved twice once registered
        method, where = override
        reason = FIX_HAND_MOVES_ITSELF.format(method=method, where=where, **text)
        return hand(reason, FIX_HAND_MOVES_ITSELF_EDIT.format(method=method, **text))
    container = type(value).__name__ if kind is Kind.TENSORS else ""
    complex_ = any(t.is_complex() for _, t in iter_tensors(value))
    return Stray(
        classes,
        attribute,
        kind,
        sites,
        container,
        complex=complex_,
        answers=_answers(cls),
        subclass=_stored_by_subclass(cls, attribute),
        setter=_setter(cls, attribute),
        hidden=_hidden_by_subclass(cls, attribute),
    )


def _answers(cls: type) -> str:
    """The class whose own ``__getattr__`` (not nn.Module's) the lookup finds first on ``cls``,
    else on a loaded subclass of the user's (told by the class that defines it); ``""`` if
    none: ``register_buffer`` asks ``hasattr()``, which such a fallback may answer."""
    for klass in (cls, *_loaded_subclasses(cls)):
        owner = next((k for k in klass.__mro__ if "__getattr__" in vars(k)), nn.Module)
        if owner is not nn.Module:
            return owner.__qualname__
    return ""


def _hidden_by_subclass(cls: type, attribute: str) -> tuple[str, str] | None:
    """The first loaded subclass of the user's, and ``why_no_buffer_slot``'s words, whose own
    classes (past ``cls.__mro__``) define ``attribute`` on the class: ``hasattr()`` finds it
    there, and a ``register_buffer`` of it in ``cls`` raises KeyError. (A data descriptor is
    ``_setter``'s.)"""
    mro = set(cls.__mro__)
    for sub in _loaded_subclasses(cls):
        if any(attribute in vars(k) for k in sub.__mro__ if k not in mro):
            where = why_no_buffer_slot(sub, attribute)
            if where is not None:
                return sub.__qualname__, where
    return None


def _own_dtype(value: object) -> str:
    """The floating dtype, other than the default one, of a tensor ``value`` holds (a float64
    schedule): a plain attribute keeps it under ``.half()``, a buffer would not. (A float
    tensor of the default dtype, a counter ``torch.zeros(())`` too, is converted as nn.Module
    converts a buffer: the model's dtype is what it was made in.)"""
    default = torch.get_default_dtype()
    return next(
        (
            _name(t.dtype)
            for _, t in iter_tensors(value)
            if t.is_floating_point() and t.dtype != default
        ),
        "",
    )


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _stored_by_subclass(cls: type, attribute: str) -> str:
    """The first subclass, loaded and in the user's own code, of a class of ``cls.__mro__``
    (not one of them) whose own methods, or those of another class of its MRO in the user's code
    (a mixin), store ``self.<attribute>``: a store the run did not see, which a buffer
    registered in its base would meet (a float default raises there); ``""`` if none."""
    mro = set(cls.__mro__)
    for sub in _loaded_subclasses(cls):
        own = [k for k in sub.__mro__ if k not in mro and _is_own_class(k)]
        if any(
            _stores_self(function, attribute, k.__name__) for k in own for function in _functions(k)
        ):
            return sub.__qualname__
    return ""


def _loaded_subclasses(cls: type) -> Iterator[type]:
    """Each loaded subclass of a class of ``cls.__mro__`` in the user's own code, none of them,
    its subclasses included, each once."""
    mro = set(cls.__mro__)
    todo: list[type] = []
    for klass in cls.__mro__:
        if _is_own_class(klass):
            todo.extend(klass.__subclasses__())
    seen: set[type] = set()
    while todo:
        sub = todo.pop(0)
        if sub in seen or sub in mro:
            continue
        seen.add(sub)
        todo.extend(sub.__subclasses__())
        yield sub


def _setter(cls: type, attribute: str) -> str:
    """What runs on ``self.<attribute> = ...`` and not on ``register_buffer``, in the words of
    ``FIX_HAND_SETTER``: a data descriptor (a property with a setter, any object with
    ``__set__``) of the name, or a ``__setattr__`` other than nn.Module's and autoreg's, in a
    class of ``cls.__mro__`` or of a loaded subclass's (its mixins included); ``""`` if none."""
    classes = dict.fromkeys(cls.__mro__)
    for sub in _loaded_subclasses(cls):
        classes.update(dict.fromkeys(sub.__mro__))
    for klass in classes:
        held = vars(klass).get(attribute)
        if held is not None and hasattr(type(held), "__set__"):
            what = "property" if isinstance(held, property) else "data descriptor"
            return FIX_SETTER_DESCRIPTOR.format(
                owner=klass.__qualname__, attribute=attribute, what=what
            )
        setattr_ = vars(klass).get("__setattr__")
        if setattr_ is not None and not _standard_setattr(klass, setattr_):
            return FIX_SETTER_SETATTR.format(owner=klass.__qualname__)
    return ""


_AUTOREG_DIR: Final = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "")


def _standard_setattr(klass: type, setattr_: object) -> bool:
    """Whether ``setattr_``, the ``__setattr__`` ``klass`` defines, is object's, nn.Module's or
    autoreg's (by where its code lives): the assignment ``register_buffer`` stands for."""
    if klass is object or klass is nn.Module:
        return True
    code = getattr(inspect.unwrap(setattr_), "__code__", None)  # type: ignore[arg-type]
    return code is not None and os.path.abspath(code.co_filename).startswith(_AUTOREG_DIR)


def _is_own_class(cls: type) -> bool:
    """Whether ``cls``'s code lives in the user's own files, all of it (a function of the
    user's set on ``nn.Module`` makes no class of torch's the user's: its subclasses would be
    every module loaded)."""
    return _lives_in(cls, is_own_code)


def _stores_self(function: types.FunctionType, attribute: str, owner: str) -> bool:
    """Whether the source of ``function``, a method of the class ``owner`` in the user's own
    code, stores ``<first argument>.<attribute>`` (``project.function_stores``)."""
    code = function.__code__
    if not code.co_argcount or not is_own_code(code.co_filename):
        return False
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return False
    return any(
        function_stores(node, attribute, owner)
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    )


def _read_through_dict(cls: type, attribute: str) -> tuple[str, str] | None:
    """The first class of ``cls.__mro__`` or of a loaded subclass's, in the user's own code,
    whose methods read or write ``attribute`` through an instance's ``__dict__`` or ``vars()``
    (``x.__dict__["a"]``, ``vars(x).get("a")``, ``"a" in x.__dict__``), and where
    (``file.py:line``); None if none does. A buffer lives in ``_buffers``: registered, the name
    is no longer there."""
    classes = dict.fromkeys(cls.__mro__)
    for sub in _loaded_subclasses(cls):
        classes.update(dict.fromkeys(sub.__mro__))
    for klass in classes:
        if not _is_own_class(klass):
            continue
        for function in _functions(klass):
            try:
                lines, first = inspect.getsourcelines(function)
                tree = ast.parse(textwrap.dedent("".join(lines)))
            except (OSError, TypeError, SyntaxError):
                continue
            for node in ast.walk(tree):
                if _reads_dict(node, attribute):
                    line = first + getattr(node, "lineno", 1) - 1
                    return klass.__qualname__, location(function.__code__.co_filename, line)
    return None


def _reads_dict(node: ast.AST, attribute: str) -> bool:
    """Whether ``node`` reads or writes ``attribute`` through a ``__dict__`` or ``vars()``."""

    def through(value: ast.expr) -> bool:
        return (isinstance(value, ast.Attribute) and value.attr == "__dict__") or (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id == "vars"
            and len(value.args) == 1
        )

    def named(value: ast.expr) -> bool:
        return isinstance(value, ast.Constant) and value.value == attribute

    if isinstance(node, ast.Subscript):  # x.__dict__["a"], vars(x)["a"]
        return through(node.value) and named(node.slice)
    if isinstance(node, ast.Call):  # x.__dict__.get("a"), .pop, .setdefault
        func = node.func
        return (
            isinstance(func, ast.Attribute)
            and through(func.value)
            and bool(node.args)
            and named(node.args[0])
        )
    if isinstance(node, ast.Compare):  # "a" in x.__dict__
        return named(node.left) and any(
            isinstance(op, (ast.In, ast.NotIn)) and through(right)
            for op, right in zip(node.ops, node.comparators, strict=True)
        )
    return False


def _written(tensor: torch.Tensor) -> bool:
    """Whether ``tensor``'s values were written in place since it was made (its version counter,
    which its views share); an inference tensor keeps none: taken as written."""
    try:
        return bool(tensor._version)
    except RuntimeError:
        return True


def _from_pretrained(model: nn.Module) -> bool:
    """Whether ``model`` is a transformers ``PreTrainedModel`` (by identity, once transformers
    has loaded it: nothing is imported here). Its ``from_pretrained`` builds the model on the
    meta device and gives each non-persistent buffer uninitialised memory, which only its
    ``_init_weights`` sets: a tensor built in ``__init__`` made such a buffer (by either style)
    would come back as garbage, where the plain attribute it was keeps its values."""
    modeling = sys.modules.get("transformers.modeling_utils")
    base = getattr(modeling, "PreTrainedModel", None)
    return isinstance(base, type) and isinstance(model, base)


# The methods that move a module's tensors: a class that overrides one moves what it keeps itself.
MOVES: Final = ("to", "_apply", "cuda", "cpu", "half", "float", "double", "bfloat16", "type")


def _moves_itself(cls: type) -> tuple[str, str] | None:
    """The first method of ``MOVES`` a class of ``cls`` defines in the user's own code
    (``own_method``), and where (``file.py:line``); None if none does."""
    defined = own_method(cls, MOVES)
    if defined is None:
        return None
    method, _, filename, line = defined
    return method, location(filename, line)


@functools.cache
def autoreg_keeps_complex() -> bool:
    """Whether an autoreg module keeps a complex tensor complex under ``.to(a real dtype)``, the
    one it registers while it is built and the one it carries: what the base style relies on.
    ``nn.Module`` casts a complex buffer to the real dtype and drops its imaginary part."""

    class Probe(AutoRegisterMixin, nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.built = torch.ones(1, dtype=torch.complex64)

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            probe = Probe()
            probe.stored = torch.ones(1, dtype=torch.complex64)
            probe.to(torch.float64)
            return all(getattr(probe, name).is_complex() for name in ("built", "stored"))
    except Exception:  # noqa: BLE001 - a core that refuses complex tensors does not keep them
        return False


def _wrappable(value: object) -> bool:
    """Whether ``value`` can become an ``nn.ModuleList`` / ``nn.ModuleDict`` as it is."""
    if type(value) is list:
        return all(isinstance(item, nn.Module) for item in value)
    if type(value) is dict:
        return all(
            isinstance(key, str) and key and "." not in key and isinstance(item, nn.Module)
            for key, item in value.items()
        )
    return False


def _classes(cls: type) -> tuple[ClassInfo, ...]:
    """``cls`` and its bases, torch's, autoreg's and ``object`` left out: ``nn.Module`` by
    identity (a framework sets functions of its own on it: transformers' ``smart_apply``), the
    others where all their code lives."""
    return tuple(
        _class_info(klass)
        for klass in cls.__mro__
        if klass is cls
        or not (klass is object or klass is nn.Module or _lives_in(klass, is_library))
    )


def _functions(cls: type) -> list[types.FunctionType]:
    """The functions ``cls`` defines (static and class methods included), unwrapped."""
    found = []
    for value in vars(cls).values():
        function = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
        if isinstance(function, types.FunctionType):
            found.append(inspect.unwrap(function))
    return found


def _lives_in(cls: type, where: Callable[[str], bool]) -> bool:
    """Whether ``cls`` defines functions and all of them live in files ``where`` accepts: where
    its code lives, whatever its ``__module__`` says (any class may set it)."""
    files = [function.__code__.co_filename for function in _functions(cls)]
    return bool(files) and all(where(filename) for filename in files)


def _class_info(cls: type) -> ClassInfo:
    bases = tuple(_base_kind(base) for base in cls.__bases__)
    module = issubclass(cls, nn.Module)
    shown = "" if cls.__name__ == cls.__qualname__.rpartition(".")[2] else cls.__name__
    located = _statement_of(cls)
    if located is None:
        try:
            filename = inspect.getsourcefile(cls)
            lines, lineno = inspect.getsourcelines(cls)
        except (OSError, TypeError):
            return ClassInfo(cls.__qualname__, None, 0, 0, bases, module=module, shown=shown)
        if filename is None:
            return ClassInfo(cls.__qualname__, None, 0, 0, bases, module=module, shown=shown)
        located = (filename, lineno, lineno + len(lines) - 1)
    filename, lineno, end = located
    declared = () if issubclass(cls, AutoRegisterMixin) else buffer_declarations(cls)
    path = os.path.abspath(filename)
    return ClassInfo(
        cls.__qualname__, path, lineno, end, bases, declared, module=module, shown=shown
    )


def _statement_of(cls: type) -> tuple[str, int, int] | None:
    """``(file, first line, last line)`` of the class statement of ``cls``, found from the code of
    its methods: the innermost ``class`` statement of its name that holds one of them. Where the
    class's ``__module__`` names another module (a public path), ``inspect`` looks for it there
    and fails. None if no method of it is in a class statement of its name."""
    name = cls.__name__
    for function in _functions(cls):
        code = function.__code__
        statements = [
            (start, end)
            for start, end in _class_statements(code.co_filename).get(name, ())
            if start <= code.co_firstlineno <= end
        ]
        if statements:
            start, end = max(statements)
            return code.co_filename, start, end
    return None


@functools.lru_cache(maxsize=64)
def _class_statements(filename: str) -> dict[str, list[tuple[int, int]]]:
    """The lines of each ``class`` statement in ``filename``, by class name (decorators
    included, as ``inspect`` gives them); empty if the file cannot be read or parsed."""
    try:
        with open(filename, encoding="utf-8") as file:
            tree = ast.parse(file.read(), filename)
    except (OSError, SyntaxError, ValueError):
        return {}
    found: dict[str, list[tuple[int, int]]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            found.setdefault(node.name, []).append((start, node.end_lineno or node.lineno))
    return found


def _base_kind(base: type) -> str:
    if base is nn.Module:
        return "module"
    if issubclass(base, nn.Module) and _lives_in(base, lambda f: f.startswith(TORCH_DIR)):
        return "torch"
    return "other"
