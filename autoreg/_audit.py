"""Audit any module for tensors that ``.to()`` would leave behind: ``find_unregistered``.

Design note
-----------
``find_unregistered`` answers one question about a built model, autoreg or not: which tensors
reachable from its module tree stay where they are when ``.to()`` / ``.cuda()`` / ``.half()`` run?
Those are the tensors in a module's ``__dict__``: plain tensor attributes, and tensors nested in
list, tuple and dict attributes (walked by ``_walk.iter_tensors``, so the audit and autoreg's
``_apply`` agree on what a container is). ``.to()`` leaves a reference, not a tensor: each
attribute that holds one is reported (the tensor at the first path in it that reaches it), in
``named_modules()`` order, so that a tensor two modules share is reported at both, and the fix
of each is written. Not findings (``_audit_scope`` decides all but the first):

- parameters of the tree wherever else they are referenced: ``.to()`` converts a parameter in
  place (``param.data``), so every reference follows (unless torch is set to overwrite
  parameters, ``torch.__future__``). A reference to a *buffer* is a finding: ``.to()`` gives the
  buffer a new tensor in its module's ``_buffers`` and leaves every other reference behind;
- what an autoreg module carries (``carried_by_autoreg``, which asks the core): its ``.to()``
  converts those tensors - except leaves that require grad, which it leaves, so those are
  findings. Only an instance of an autoreg class carries: one unpickled after its class went back
  to ``nn.Module`` keeps autoreg's keys, but no ``.to()`` acts on them any more;
- what the class's own ``_apply`` (outside torch and autoreg) moves, as torchmetrics' ``Metric``
  moves its states, or an ancestor's moves (a wrapper that converts its child's constants):
  read from a deep copy of the outermost such module converted to the meta device, by identity
  (``_OwnApplies``: is the copy of the tensor still off the meta device where the copy of its
  holder holds it; a module too large to copy, or whose copy fails, keeps every finding, and
  the fix says that its class's ``_apply`` may move it). That covers a per-device cache (a dict
  whose keys are all device names, ``str(tensor.device)``) that the class's ``_apply`` empties, as
  timm's levit and efficientformerv2 attention blocks do: the model fills it in an eval forward and
  looks entries up by the device it runs on. Where nothing empties it, a dtype move would leave the
  cached entries in their old dtype, and the model would read them: a finding, whose fix says to
  empty the cache in ``_apply``;
- names an autoreg class declares ``autoreg.Plain``: kept in place on purpose;
- nn.Module's internal attributes and autoreg's own ``_autoreg_*`` keys;
- the tensor a forward pre-hook of ``torch.nn.utils.prune``, ``weight_norm`` or ``spectral_norm``
  recomputes from the module's parameters at every call: the next forward replaces it.

Tensors that require grad are findings: ``.to()`` leaves them too. A leaf is usually a weight
that was meant to be an ``nn.Parameter`` (the fix says so); a non-leaf is an autograd result, such
as an activation kept from a forward pass (the fix says that it is replaced or should be stored
detached). A module held in a container (a plain list where ``nn.ModuleList`` was meant) is
never reached by ``.to()``: its parameters, buffers and plain tensors are all findings (walked with
``_walk.iter_modules``). Tensors inside plain objects held in public attributes (a config
dataclass, a ``SimpleNamespace``, a distribution) are findings too, and so are those of the
plain objects in its public fields, three objects deep (``_audit_scope.entries``), and numpy
arrays: no ``.to()`` moves them.

Footguns this catches: a ``list`` of tensors where ``autoreg.BufferList`` was meant, a ``list``
of modules where ``nn.ModuleList`` was meant (invisible to the optimizer too), a weight
created with ``requires_grad=True`` but never wrapped in ``nn.Parameter`` (the optimizer never sees
it either), a buffer name hidden by a class attribute, a third-party submodule that keeps its
constants in plain attributes, class weights kept in a config object that the loss reads.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Final

import torch
from torch import nn
from torch.nn.parameter import UninitializedTensorMixin  # type: ignore[attr-defined]

from ._audit_scope import (
    OBJECT_DEPTH,
    array_dtype,
    carried_by_autoreg,
    class_entries,
    entries,
    history_free_memo,
    is_device_cache,
    is_holder,
    is_public,
    is_read_field,
    iter_arrays,
    object_fields,
    overrides_apply,
    own_method,
)
from ._copies import isolated_copy
from ._errors import NotAModuleError
from ._facts import recomputed_names, why_no_buffer_slot
from ._frames import location
from ._messages.audits import (
    FIX_ALIAS,
    FIX_AROUND_SETATTR,
    FIX_AUTOGRAD_RESULT,
    FIX_BUFFER,
    FIX_CLASS_ATTRIBUTE,
    FIX_CLASS_CONTAINER,
    FIX_COMPLEX,
    FIX_CONTAINER,
    FIX_CONTAINER_OR_CARRY,
    FIX_CONTAINER_PARAMETERS,
    FIX_DEVICE_CACHE,
    FIX_FRAMEWORK,
    FIX_IN_OBJECT,
    FIX_MODULE_IN_CONTAINER,
    FIX_NAMED_TUPLE,
    FIX_NAMED_TUPLE_AUTOREG,
    FIX_NESTED,
    FIX_NO_SLOT,
    FIX_NUMPY,
    FIX_OWN_APPLY_UNREAD,
    FIX_OWN_TO,
    FIX_PARAMETER,
    FIX_PARAMETER_VIEW,
    FIX_SHARED,
    FIX_STRAY_PARAMETER,
    NOT_A_MODULE,
    NOT_A_MODULE_CLASS_HINT,
    OWN_APPLY_FAILED,
    OWN_APPLY_TOO_LARGE,
    SCRIPTED_MODULE,
)
from ._messages.describe import A_CLASS, describe, dtype_name
from ._mixin import AutoRegisterMixin
from ._state import FRAMEWORK, MODULE_INTERNALS, role_key
from ._walk import CONTAINERS, iter_items, iter_modules, iter_tensors

__all__ = [
    "Finding",
    "Located",
    "check_module",
    "find_unregistered",
    "join",
    "locate_unregistered",
    "viewed_parameter",
]


@dataclasses.dataclass(frozen=True, eq=False)
class Finding:
    """A tensor that ``.to()`` would leave behind, where it is, and how to make it move.

    ``path`` is dotted from the audited module, with Python's indexing for containers:
    ``blocks.0.attn.mask``, ``head.anchors[2]``, ``cache['k']``, ``cfg.weights`` (a field of a
    plain object). ``class_name`` is the class of the module whose ``attribute`` holds it
    (directly, nested in a container, or in an object). ``kind`` is ``"tensor"``, ``"object"``
    (a tensor inside a plain object) or ``"numpy"`` (a numpy array: ``tensor`` then has its
    shape and dtype, and holds none of its values). Findings hold tensors, so they compare by
    identity.
    """

    path: str
    tensor: torch.Tensor
    class_name: str
    attribute: str
    fix: str
    kind: str = "tensor"

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.tensor.shape)

    @property
    def dtype(self) -> torch.dtype:
        return self.tensor.dtype

    @property
    def device(self) -> torch.device:
        return self.tensor.device

    @property
    def requires_grad(self) -> bool:
        return self.tensor.requires_grad

    def as_dict(self) -> dict[str, Any]:
        """The finding as JSON-ready values (what ``python -m autoreg audit --json`` prints)."""
        return {
            "path": self.path,
            "kind": self.kind,
            "class": self.class_name,
            "attribute": self.attribute,
            "shape": list(self.shape),
            "dtype": dtype_name(self.dtype),
            "device": str(self.device),
            "requires_grad": self.requires_grad,
            "fix": self.fix,
        }

    def __repr__(self) -> str:
        return (
            f"Finding(path={self.path!r}, class_name={self.class_name!r}, "
            f"tensor={describe(self.tensor)}, fix={self.fix!r})"
        )


def find_unregistered(module: nn.Module) -> list[Finding]:
    """Every tensor reachable from ``module``'s tree that ``.to()`` would leave behind.

    Works on any ``nn.Module``, autoreg or not; changes nothing. Reports plain tensor attributes
    and tensors nested in list, tuple and dict attributes, in ``named_modules()`` order: each
    attribute that holds a tensor ``.to()`` leaves behind, so a tensor two modules share is
    reported at both. A parameter of the tree is never a finding, wherever it is referenced
    (``.to()`` converts it in place); a buffer held under another name is (``.to()`` replaces the
    buffer and leaves the reference). Neither is what an autoreg module carries (it moves), nor a
    name declared ``autoreg.Plain``. Tensors that require grad are findings: ``.to()`` leaves them
    too. So is every tensor of a module held in a container (``blocks[0].weight``): ``.to()`` never
    reaches it.
    """
    check_module(module, "find_unregistered")
    return [located.finding for located in locate_unregistered(module)]


@dataclasses.dataclass(frozen=True, eq=False)
class Located:
    """A finding with the module whose attribute holds it, and that module's dotted path; for a
    tensor that shares its values with another tensor of the tree (a buffer under another name,
    a view of another plain tensor, one tensor two modules hold), that one's path
    (``follows``, ``_alias_of``)."""

    finding: Finding
    holder: nn.Module
    holder_path: str
    follows: str | None = None


def locate_unregistered(module: nn.Module) -> list[Located]:
    """``find_unregistered(module)``, each finding with the module that holds it."""
    located: list[Located] = []
    in_place = _follow_in_place(module)
    shared = _by_storage(module)
    _audit(module, "", in_place, set(module.modules()), located, set(), {}, shared, reached=True)
    return located


def _follow_in_place(module: nn.Module) -> set[int]:
    """The ids of the tensors of ``module``'s tree that ``.to()`` converts in place, so that every
    reference to one follows it: its parameters (nn.Module sets ``param.data``, or swaps the
    tensors), unless torch is set to overwrite parameters without swapping them
    (``torch.__future__``). Its buffers are replaced: a reference elsewhere stays behind."""
    future = torch.__future__
    if (
        future.get_overwrite_module_params_on_conversion()
        and not future.get_swap_module_params_on_conversion()
    ):
        return set()
    return {id(parameter) for parameter in module.parameters()}


def _audit(
    root: nn.Module,
    base: str,
    in_place: set[int],
    audited: set[nn.Module],
    located: list[Located],
    walked: set[int],
    classes: dict[type, list[tuple[str, object, type]]],
    shared: _ByStorage,
    *,
    reached: bool,
) -> None:
    """Add to ``located`` what ``.to()`` leaves behind in the tree of ``root``, at ``base``.

    ``in_place``: the ids of the tensors ``.to()`` converts in place (``_follow_in_place``).
    ``reached``: whether ``.to()`` reaches that tree at all; a module held in a plain container is
    not reached, and then nothing in it moves, not even what autoreg carries. ``walked``: the
    ids of the plain objects, numpy arrays and tensors defined on a class already read;
    ``classes``: ``_audit_scope.class_entries`` of each class met; ``shared``: the tree's tensors
    by storage (``_by_storage``).
    """
    owners: list[tuple[str, nn.Module]] = []  # the modules of the tree with an own _apply
    copies: dict[int, dict[int, Any] | str] = {}  # theirs converted, by id (_OwnApplies)
    for prefix, sub in root.named_modules(prefix=base):
        _class_tensors(sub, prefix, in_place, walked, classes, located)
        if reached and overrides_apply(type(sub)):
            owners.append((prefix, sub))
        # Whose own _apply may move what sub holds: its own, its ancestors' (named_modules comes
        # to a module after its ancestors), the outermost first.
        judge = _OwnApplies([owner for at, owner in owners if _within(prefix, at, base)], copies)
        # The weights sub's prune / weight_norm / spectral_norm hooks recompute before every
        # forward, wherever else sub holds them (an RNN's _flat_weights): the next forward
        # replaces them there too.
        recomputed = {id(vars(sub).get(name)) for name in recomputed_names(sub._forward_pre_hooks)}
        for name, value, kind in entries(sub):
            if kind != "value":
                _held(sub, prefix, name, value, in_place, walked, located, judge=judge)
                continue
            # autoreg's _apply converts what it carries, except leaves that require grad.
            moves = reached and carried_by_autoreg(sub, name, value)
            reported: set[int] = set()  # in this attribute: each tensor at its first path
            for path, tensor in iter_tensors(value, join(prefix, name)):
                if id(tensor) in in_place or id(tensor) in reported or id(tensor) in recomputed:
                    continue
                if moves and not (tensor.requires_grad and tensor.is_leaf):
                    continue
                unread = judge.moves(sub, name, tensor)
                if unread is True:
                    continue  # an own _apply moves it (torchmetrics' states)
                reported.add(id(tensor))
                alias = _alias_of(shared, path, tensor)
                if alias is not None:
                    relation, kind, follows = alias
                    message = FIX_SHARED if kind == "attribute" else FIX_ALIAS
                    fix = message.format(relation=relation, kind=kind, name=follows)
                else:
                    follows = None
                    fix = _fix(sub, name, value, tensor)
                if unread is not False:  # whether an own _apply moves it is unknown
                    fix = FIX_OWN_APPLY_UNREAD.format(fix=fix, cls=unread[0], why=unread[1])
                if reached:
                    fix = _with_own_to(type(sub), fix)
                finding = Finding(path, tensor, type(sub).__name__, name, fix)
                located.append(Located(finding, sub, prefix, follows))
            if isinstance(value, torch.Tensor):
                continue
            for path, array in iter_arrays(value, join(prefix, name)):
                _array(sub, prefix, name, path, array, walked, located)
            # The plain objects in it, under a public name (a framework's are its own: FSDP2's
            # state, under __composable_api_state_key_...)
            for path, item in iter_items(value if is_public(name) else (), join(prefix, name)):
                if is_holder(None, item):
                    _held(sub, prefix, name, item, in_place, walked, located, path, judge=judge)
            # Modules in a plain container: nothing of theirs moves (autoreg does not carry them).
            for path, held in iter_modules(value, join(prefix, name)):
                if held in audited:
                    continue  # also a submodule of the tree: it moves
                audited.update(held.modules())
                kind = "dict" if isinstance(value, dict) else "list"
                fix = FIX_MODULE_IN_CONTAINER.format(
                    container=f"Module{kind.title()}", kind=type(value).__name__
                )
                # Its parameters and buffers: nothing converts them, unless a parameter is one of
                # the tree's too (converted in place); a buffer of the tree's is replaced there.
                for key, tensor in (
                    *held.named_parameters(prefix=path, remove_duplicate=False),
                    *held.named_buffers(prefix=path, remove_duplicate=False),
                ):
                    if id(tensor) not in in_place and id(tensor) not in reported:
                        reported.add(id(tensor))
                        finding = Finding(key, tensor, type(sub).__name__, name, fix)
                        located.append(Located(finding, sub, prefix))
                _audit(
                    held, path, in_place, audited, located, walked, classes, shared, reached=False
                )


def _class_tensors(
    module: nn.Module,
    prefix: str,
    in_place: set[int],
    walked: set[int],
    classes: dict[type, list[tuple[str, object, type]]],
    located: list[Located],
) -> None:
    """Add to ``located`` the tensors, numpy arrays and plain objects defined on the classes of
    ``module`` that it reads through its class (no attribute of its own hides them), each once,
    at the first module that reads it: ``.to()`` converts what an instance holds, never what its
    class does."""
    cls = type(module)
    found = classes.get(cls)
    if found is None:
        found = classes[cls] = class_entries(cls)
    d = module.__dict__
    for name, value, owner in found:
        if name in d:
            continue
        if not issubclass(type(value), (torch.Tensor, *CONTAINERS)):  # an array, an object
            _held(module, prefix, name, value, in_place, walked, located, judge=_NO_OWN_APPLY)
            continue
        message = FIX_CLASS_ATTRIBUTE if isinstance(value, torch.Tensor) else FIX_CLASS_CONTAINER
        fix = message.format(owner=owner.__name__, name=name, kind=type(value).__name__)
        for path, tensor in iter_tensors(value, join(prefix, name)):
            if id(tensor) in in_place or id(tensor) in walked:
                continue
            walked.add(id(tensor))
            located.append(Located(Finding(path, tensor, cls.__name__, name, fix), module, prefix))


# The most elements a module whose class has its own _apply may hold for the audit to copy it:
# larger, its findings stand as read (a copy of a large model costs its memory).
_OWN_APPLY_COPY_LIMIT = 1 << 22


def _converted_copy(module: nn.Module) -> dict[int, Any] | str:
    """A deep copy of ``module``, whose class has an ``_apply`` of its own outside torch and
    autoreg (torchmetrics' ``Metric`` converts its states there, a wrapper may convert its
    children's), moved to the meta device: the copy's memo, each object copied by the id of its
    original (what is still off the meta device in the copy stays behind). Why it cannot be told,
    when the module is too large to copy or the copy or its conversion fails: every tensor found
    is then reported, and its fix says that the class's ``_apply`` may move it."""
    size = sum(
        tensor.numel()
        for sub in module.modules()
        for name, value in vars(sub).items()
        if name in ("_parameters", "_buffers")
        or issubclass(type(value), (torch.Tensor, *CONTAINERS))
        for _, tensor in iter_tensors(value)
    )  # what the copy would hold: parameters, buffers and plain tensors, of every module in it
    if size > _OWN_APPLY_COPY_LIMIT:
        return OWN_APPLY_TOO_LARGE.format(limit=_OWN_APPLY_COPY_LIMIT)
    memo = history_free_memo(module)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            isolated_copy(module, memo).to("meta")
    except Exception as error:  # noqa: BLE001 - any failure: the findings stand as read
        return OWN_APPLY_FAILED.format(error=f"{type(error).__name__}: {error}")
    return memo


def _within(prefix: str, at: str, base: str) -> bool:
    """Whether the module at ``prefix`` is the one at ``at`` or in its tree (``base``: the root's
    prefix)."""
    return at == base or prefix == at or prefix.startswith(f"{at}.")


class _OwnApplies:
    """Whether the own ``_apply`` of a module or of one of its ancestors (``owners``, the outermost
    first: its copy holds the others, converted as ``.to()`` converts them) moves what the module,
    or a plain object it holds, holds. ``copies``: each owner's converted copy
    (``_converted_copy``), made when first asked, once per audit."""

    def __init__(self, owners: list[nn.Module], copies: dict[int, dict[int, Any] | str]) -> None:
        self.owners = owners
        self.copies = copies

    def moves(self, holder: object, field: str, tensor: torch.Tensor) -> bool | tuple[str, str]:
        """True when an owner's ``_apply`` moves ``tensor``, held under ``field`` of ``holder``
        (a module, or a plain object one holds); False when none does, or none has its own;
        ``(class name, why)`` of the first owner that could not be copied, when none of those
        inside it tells that it moves it."""
        unread: tuple[str, str] | None = None
        for owner in self.owners:
            memo = self.copies.get(id(owner))
            if memo is None:
                memo = self.copies[id(owner)] = _converted_copy(owner)
            if isinstance(memo, str):
                unread = unread or (type(owner).__name__, memo)
                continue
            copied, moved = memo.get(id(holder)), memo.get(id(tensor))
            if copied is not None and moved is not None:
                value = dict(object_fields(copied)).get(field)
                if not any(t is moved and not t.is_meta for _, t in iter_tensors(value)):
                    return True  # its copy no longer holds it there, off the meta device
            return unread or False  # the outermost copy made saw every conversion inside it
        return unread or False


_NO_OWN_APPLY: Final = _OwnApplies([], {})  # what a class holds: no _apply converts it


def _held(
    module: nn.Module,
    prefix: str,
    name: str,
    value: object,
    in_place: set[int],
    walked: set[int],
    located: list[Located],
    where: str | None = None,
    *,
    judge: _OwnApplies,
) -> None:
    """Add to ``located`` a numpy array ``module.name``, or what the plain object there holds
    (at ``where``, an item of a container ``module.name`` holds): its tensors and arrays (its
    fields, and the containers they hold), and those of the plain objects in its public fields
    and in the containers there, ``OBJECT_DEPTH`` objects deep (a distribution that wraps
    another, a flow's list of transforms), but for the tensors an own ``_apply`` moves
    (``judge``). An object is read once, at the first module that holds it: its fix is in the
    object, which all its holders share."""
    where = join(prefix, name) if where is None else where
    if array_dtype(value) is not None:
        _array(module, prefix, name, where, value, walked, located)
        return
    if id(value) in walked:
        return
    walked.add(id(value))
    fix = FIX_IN_OBJECT.format(holder=type(value).__name__)
    reported: set[int] = set()
    level = [(where, value)]
    for _ in range(OBJECT_DEPTH):
        inner = []
        for at, holder in level:
            for field, item in object_fields(holder):
                for path, tensor in iter_tensors(item, f"{at}.{field}"):
                    if id(tensor) in in_place or id(tensor) in reported:
                        continue
                    unread = judge.moves(holder, field, tensor)
                    if unread is True:
                        continue  # an own _apply moves it
                    reported.add(id(tensor))
                    told = fix
                    if unread is not False:
                        told = FIX_OWN_APPLY_UNREAD.format(fix=fix, cls=unread[0], why=unread[1])
                    finding = Finding(path, tensor, type(module).__name__, name, told, "object")
                    located.append(Located(finding, module, prefix))
                for path, array in iter_arrays(item, f"{at}.{field}"):
                    _array(module, prefix, name, path, array, walked, located)
                read = is_read_field(holder, field)
                if id(item) not in walked and read and is_holder(None, item):
                    walked.add(id(item))
                    inner.append((f"{at}.{field}", item))
                for path, held in iter_items(item if read else (), f"{at}.{field}"):
                    if id(held) not in walked and is_holder(None, held):
                        walked.add(id(held))
                        inner.append((path, held))
        level = inner


def _array(
    module: nn.Module,
    prefix: str,
    name: str,
    path: str,
    array: Any,
    walked: set[int],
    located: list[Located],
) -> None:
    """Add to ``located`` the numpy ``array`` at ``path``, once: described by a tensor of its
    shape and dtype that holds none of its values."""
    dtype = array_dtype(array)
    if dtype is None or id(array) in walked:
        return
    walked.add(id(array))
    described = torch.zeros((), dtype=dtype).expand(tuple(array.shape))
    finding = Finding(path, described, type(module).__name__, name, FIX_NUMPY, "numpy")
    located.append(Located(finding, module, prefix))


# --- helpers -------------------------------------------------------------------------------------


def check_module(module: object, function: str) -> None:
    if isinstance(module, torch.jit.ScriptModule):  # an nn.Module whose state autoreg cannot read
        cls = type(module).__name__
        raise NotAModuleError(SCRIPTED_MODULE.format(what=f"{function}() got", cls=cls))
    if isinstance(module, nn.Module):
        return
    hint = ""
    if isinstance(module, type) and issubclass(module, nn.Module):
        hint = NOT_A_MODULE_CLASS_HINT.format(function=function, cls=module.__name__)
        value = A_CLASS.format(name=module.__name__)
    else:
        value = describe(module)
    raise NotAModuleError(NOT_A_MODULE.format(function=function, value=value, hint=hint))


def _fix(module: nn.Module, name: str, value: object, tensor: torch.Tensor) -> str:
    """The one-line fix for ``tensor``, found in ``module.name`` (``value``)."""
    cls = type(module).__name__
    viewed = viewed_parameter(module, tensor)
    if viewed is not None:
        return FIX_PARAMETER_VIEW.format(parameter=viewed)
    if value is tensor:  # a plain tensor attribute
        if isinstance(tensor, nn.Parameter):
            return FIX_STRAY_PARAMETER.format(name=name)
        if tensor.requires_grad:
            return FIX_PARAMETER if tensor.is_leaf else FIX_AUTOGRAD_RESULT
        where = why_no_buffer_slot(type(module), name)
        if where is not None:
            return FIX_NO_SLOT.format(name=name, where=where)
        if isinstance(module, AutoRegisterMixin):
            if module.__dict__.get(role_key(name)) == FRAMEWORK:
                return FIX_FRAMEWORK.format(cls=cls)
            return FIX_AROUND_SETATTR.format(name=name)
        if tensor.is_complex():
            return FIX_COMPLEX
        return FIX_BUFFER.format(name=name)
    if isinstance(module, AutoRegisterMixin) and module.__dict__.get(role_key(name)) == FRAMEWORK:
        return FIX_FRAMEWORK.format(cls=cls)  # a container a framework base keeps (row 4)
    if is_device_cache(value):
        return FIX_DEVICE_CACHE.format(cls=cls)
    if tensor.is_complex() and not tensor.requires_grad:
        return FIX_COMPLEX
    kind = "dict" if isinstance(value, dict) else "list"
    if tensor.requires_grad:
        if not tensor.is_leaf:
            return FIX_AUTOGRAD_RESULT
        return FIX_CONTAINER_PARAMETERS.format(container=f"Parameter{kind.title()}")
    items = value.values() if isinstance(value, dict) else value
    if not any(item is tensor for item in items):  # type: ignore[attr-defined]
        return FIX_NESTED
    container = f"Buffer{kind.title()}"
    autoreg_module = isinstance(module, AutoRegisterMixin)
    if issubclass(type(value), tuple) and any("_fields" in vars(k) for k in type(value).__mro__):
        # a named tuple, read by field (stats.mean): a BufferList has no fields
        message = FIX_NAMED_TUPLE_AUTOREG if autoreg_module else FIX_NAMED_TUPLE
        return message.format(kind=type(value).__name__)
    if autoreg_module:
        return FIX_CONTAINER.format(container=container)
    return FIX_CONTAINER_OR_CARRY.format(container=container, kind=type(value).__name__)


# Each storage's tensors in a tree: (path, "parameter" / "buffer" / "attribute", tensor).
_ByStorage = dict[int, list[tuple[str, str, torch.Tensor]]]


def _by_storage(root: nn.Module) -> _ByStorage:
    """The tensors of ``root``'s tree by the storage they use: its parameters and buffers, and
    the tensors in its modules' plain attributes (containers included), each at every path."""
    found: _ByStorage = {}

    def add(path: str, kind: str, tensor: torch.Tensor) -> None:
        storage = _storage_of(tensor)
        if storage:
            found.setdefault(storage, []).append((path, kind, tensor))

    for path, parameter in root.named_parameters(remove_duplicate=False):
        add(path, "parameter", parameter)
    for path, buffer in root.named_buffers(remove_duplicate=False):
        add(path, "buffer", buffer)
    for prefix, module in root.named_modules():
        for name, value in vars(module).items():
            if name in MODULE_INTERNALS or not issubclass(type(value), (torch.Tensor, *CONTAINERS)):
                continue
            for path, tensor in iter_tensors(value, join(prefix, name)):
                add(path, "attribute", tensor)
    return found


def _storage_of(tensor: torch.Tensor) -> int:
    """Where the values of ``tensor`` are in memory, which another tensor may share; 0 where it
    has none to share: an empty tensor, a sparse or meta one, a lazy module's parameter before
    its first forward, a tensor subclass without storage of its own (an FSDP2 ``DTensor``)."""
    if (
        tensor.layout is not torch.strided
        or tensor.device.type == "meta"
        or isinstance(tensor, UninitializedTensorMixin)
    ):
        return 0
    try:
        return int(tensor.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError, TypeError, ValueError):
        return 0


def _alias_of(shared: _ByStorage, path: str, tensor: torch.Tensor) -> tuple[str, str, str] | None:
    """``(relation, kind, path)`` of another tensor of the tree that ``tensor`` (found at
    ``path``) is, or whose storage it shares: a buffer kept under another name (``self.alias =
    self.table``), a parameter's detached copy, a view of another plain tensor (``self.k =
    self.store[0]``), one tensor two modules hold. Registered or carried on their own, the two
    would be converted apart and no longer share their values. A buffer or parameter is named
    before a plain attribute, the same tensor before another one; a view of a parameter has its
    own fix (``viewed_parameter``)."""
    storage = _storage_of(tensor)
    if isinstance(tensor._base, nn.Parameter) or not storage:
        return None
    others = [entry for entry in shared.get(storage, ()) if entry[0] != path]
    if not others:
        return None
    # A buffer or parameter first, then the same tensor before another sharing its storage
    other, kind, held = min(others, key=lambda e: (e[1] == "attribute", e[2] is not tensor))
    return ("the same tensor as" if held is tensor else "shares its storage with"), kind, other


def viewed_parameter(module: nn.Module, tensor: torch.Tensor) -> str | None:
    """The name of the parameter of ``module``'s tree that ``tensor`` is a view of (a complex
    view of a real parameter, kept as a step's cache), None if it is no such view."""
    base = tensor._base
    if base is None or not isinstance(base, nn.Parameter):
        return None
    return next((name for name, p in module.named_parameters() if p is base), None)


def _with_own_to(cls: type, fix: str) -> str:
    """``fix``, and that a ``to()`` of the user's own in ``cls`` may move the tensor when the
    module itself is moved by ``.to()``: nothing else calls it."""
    defined = own_method(cls, ("to",))
    if defined is None:
        return fix
    _, owner, filename, line = defined
    return FIX_OWN_TO.format(fix=fix, cls=owner, where=location(filename, line))


def join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name
