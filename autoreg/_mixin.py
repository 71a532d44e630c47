"""``AutoRegisterMixin``: tensors assigned to a module move with it.

Design note
-----------
Everything autoreg decides about an assignment ``self.name = value`` is in
``AutoRegisterMixin.__setattr__`` and the two functions it hands plain values to,
``_assign_tensor`` and ``_assign_container``, in the order of the README's table:

1. Parameters, ``nn.Buffer``s, modules, and names that already hold one: nn.Module's own path.
2. A name autoreg registered or carried that now receives a non-tensor (not None): plain attribute.
3. A list, tuple or dict: carried; ``_apply`` converts the tensors nested in it.
4. ``autoreg.Plain`` names, and tensors that require grad: plain attributes, as in nn.Module.
5. Names that cannot hold a buffer (class attributes, nn.Module internals, '' or dotted): nn.Module.
6. Declared names, and tensors assigned during construction (except views of a parameter's
   memory): buffers, through ``register_buffer``.
7. Other tensors assigned after construction: carried - moved by ``_apply``, never module state.

Strict mode raises where 3, 6 or 7 would act on an undeclared name; warn mode warns once.

Decisions about a class (mode, default persistence, its declarations, whether the fast path for
non-tensors is provably nn.Module's own) are made once per class and kept in ``__autoreg__``.
Per instance, autoreg keeps one dict in ``__dict__``: the names it registered or carries.

Footguns this catches: a tensor left behind by ``.cuda()``; ``.half()`` leaving a constant in
float32; a checkpoint that changes when a model migrates (buffers are non-persistent by default);
per-rank runtime state overwritten by DDP's buffer broadcast (runtime tensors are not buffers);
derived weights of prune / weight_norm / spectral_norm turned into buffers (grad tensors are left
alone); ``nn.Buffer(persistent=False)`` silently made persistent (nn.Module handles ``nn.Buffer``);
a buffer hidden behind a class attribute (reported, never registered).

Nothing on the steady-state path (updating a carried tensor, reassigning a buffer, ``m.x = 1``)
calls ``warnings``, ``logging`` or a ``ContextVar``: they break torch.compile graphs on every call.
Warnings are emitted only the first time a (class, name) is seen.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar, Final

import torch
from torch import nn

from ._config import Mode, check_bool, environment_mode, keyword_mode
from ._declarations import Declaration, read_declarations
from ._errors import (
    GRAD_LEAF,
    MIXIN_AFTER_MODULE,
    MIXIN_WITHOUT_MODULE,
    NEW_NAME_DURING_EXPORT,
    NO_BUFFER_SLOT,
    STRICT_CONTAINER,
    STRICT_UNDECLARED,
    UNKNOWN_KEYWORD,
    WARN_CONTAINER,
    WARN_UNDECLARED,
    AutoRegisterWarning,
    ClassDefinitionError,
    ExportError,
    UnregisteredTensorError,
    describe,
)
from ._walk import CONTAINERS, iter_tensors, map_tensors

__all__ = ["AutoRegisterMixin", "Module"]

# Keys autoreg keeps in an instance's __dict__.
_OWNED: Final = "_autoreg_owned"  # {name: role}, created on first use
_CONSTRUCTING: Final = "_autoreg_constructing"  # present only while __init__ runs
_PENDING: Final = "_autoreg_pending"  # tensors assigned before nn.Module.__init__ ran

# Roles of the names autoreg owns.
_BUFFER: Final = "buffer"  # registered by autoreg (rule 8 applies to it)
_CARRIED: Final = "carried"  # a runtime tensor, converted by _apply
_CONTAINER: Final = "container"  # a list, tuple or dict whose tensors _apply converts

_TENSOR_OR_MODULE: Final = (torch.Tensor, nn.Module)
_MODULE_INTERNALS: Final = frozenset(vars(nn.Module())) | {"_is_replica"}
_MISSING: Final = object()


class _ClassRecord:
    """What autoreg decided about one class, when the class was created."""

    __slots__ = (
        "_declarations",
        "apply_owner",
        "cls",
        "direct",
        "keyword_mode",
        "mode",
        "persistent",
        "warned",
    )

    def __init__(self, cls: type, keyword_mode: Mode, persistent: bool) -> None:
        self.cls = cls
        self.keyword_mode = keyword_mode  # what the class statements ask for, inherited
        self.mode = environment_mode() or keyword_mode  # AUTOREG_MODE overrides every class
        self.persistent = persistent
        self.direct = _takes_modules_paths(cls)
        self.apply_owner: type[nn.Module] = _next_defining(cls, "_apply")
        self.warned: set[tuple[str, str]] = set()
        self._declarations: dict[str, Declaration] | None = None

    @property
    def declarations(self) -> dict[str, Declaration]:
        if self._declarations is None:
            self._declarations = read_declarations(self.cls, _declares)
        return self._declarations

    def persistence(self, declaration: Declaration | None) -> bool:
        if declaration is Declaration.PERSISTENT:
            return True
        if declaration is Declaration.NONPERSISTENT:
            return False
        return self.persistent

    def why_strict(self) -> str:
        if self.keyword_mode is Mode.STRICT:
            return f"class {self.cls.__name__}(..., strict=True)"
        return "AUTOREG_MODE=strict"

    def warn_once(self, kind: str, name: str, message: str) -> None:
        """Warn about (kind, name) the first time this class sees it, pointing at the assignment."""
        if (kind, name) not in self.warned:
            self.warned.add((kind, name))
            # __setattr__ -> _assign_tensor or _assign_container -> here: stacklevel 4 is the
            # user's assignment line.
            warnings.warn(message, AutoRegisterWarning, stacklevel=4)


if TYPE_CHECKING:
    # Type checkers see the mixin as the module it always ends up in; at run time it is a plain
    # class, so that it can stand before any nn.Module subclass in the bases.
    _MixinBase = nn.Module
else:
    _MixinBase = object


class AutoRegisterMixin(_MixinBase):
    """Mix into an ``nn.Module`` subclass, first in its bases: its assigned tensors move with it.

    Class keywords, inherited by subclasses and overridable by them:

    - ``persistent`` (default False): whether auto-registered buffers are saved in ``state_dict``.
    - ``strict`` (default False): raise ``UnregisteredTensorError`` on a tensor whose name is not
      declared by an annotation, instead of registering or carrying it.
    - ``warn`` (default False): register or carry it, and warn once per class and name.
    """

    __autoreg__: ClassVar[_ClassRecord]

    def __init_subclass__(
        cls,
        *,
        persistent: bool | None = None,
        strict: bool | None = None,
        warn: bool | None = None,
        **kwargs: Any,
    ) -> None:
        if kwargs:
            try:
                super().__init_subclass__(**kwargs)
            except TypeError as error:  # object.__init_subclass__ takes no keywords
                names = ", ".join(f"{key}=" for key in kwargs)
                raise ClassDefinitionError(
                    UNKNOWN_KEYWORD.format(cls=cls.__name__, names=names)
                ) from error
        else:
            super().__init_subclass__()
        _check_bases(cls)
        name = cls.__name__
        inherited: _ClassRecord | None = getattr(cls, "__autoreg__", None)
        persistent = check_bool(name, "persistent", persistent)
        mode = keyword_mode(
            name,
            inherited.keyword_mode if inherited else Mode.REGISTER,
            check_bool(name, "strict", strict),
            check_bool(name, "warn", warn),
        )
        if persistent is None:
            persistent = inherited.persistent if inherited else False
        cls.__autoreg__ = _ClassRecord(cls, mode, persistent)
        _mark_construction(cls)

    # --- the assignment contract -------------------------------------------------------------

    def __setattr__(self, name: str, value: Any) -> None:
        d = self.__dict__
        owned = d.get(_OWNED)
        role = owned.get(name) if owned else None
        params = d.get("_parameters")
        registered = params is not None and (
            name in params or name in d["_buffers"] or name in d["_modules"]
        )
        if not isinstance(value, _TENSOR_OR_MODULE):
            if isinstance(value, CONTAINERS) and not registered:
                _assign_container(self, name, value, role)
            elif role is not None and value is not None:
                # Rule 8: a name autoreg registered or carried receives a non-tensor: the code
                # meant a plain attribute, as it was before migrating.
                _forget(self, name)
                _next_setattr(self, name, value)
            elif not registered and type(self).__autoreg__.direct:
                # Exactly what nn.Module.__setattr__ does with a value that is neither a tensor
                # nor a module, for a name that holds no parameter, buffer or submodule.
                object.__setattr__(self, name, value)
            else:
                _reassign(self, name, value, role)
            return

        explicit = _is_explicit(value)
        if explicit:
            # Rule 1: an explicit Parameter, Buffer or module: nn.Module's own path, and the name
            # is no longer autoreg's.
            if role is None:
                _next_setattr(self, name, value)
            else:
                _explicitly(self, name, role, lambda: _next_setattr(self, name, value))
        elif registered:
            # Rule 1: a tensor assigned to a registered name keeps its role.
            if name in d["_buffers"] and type(self).__autoreg__.direct:
                # Exactly nn.Module's path for a tensor assigned to a buffer.
                persistent = name not in d["_non_persistent_buffers_set"]
                nn.Module.register_buffer(self, name, value, persistent)  # type: ignore[arg-type]
            else:
                _reassign(self, name, value, role)
        elif role == _CARRIED and not value.requires_grad:
            d[name] = value  # Rule 3, steady state: a runtime tensor updated in forward.
        else:
            _assign_tensor(self, name, value, role)  # type: ignore[arg-type]

    def register_buffer(
        self, name: str, tensor: torch.Tensor | None, persistent: bool = True
    ) -> None:
        """``nn.Module.register_buffer``; a name registered explicitly is no longer autoreg's."""
        owned = self.__dict__.get(_OWNED)
        role = owned.get(name) if owned else None
        register = super().register_buffer
        if role is None:
            register(name, tensor, persistent)
        else:
            _explicitly(self, name, role, lambda: register(name, tensor, persistent))

    def __delattr__(self, name: str) -> None:
        super().__delattr__(name)
        owned = self.__dict__.get(_OWNED)
        if owned:
            owned.pop(name, None)

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> Any:
        """Convert parameters and buffers as nn.Module does, then the carried runtime tensors."""
        # The next _apply in the MRO (nn.Module's, or e.g. RNNBase's), found when the class was
        # created and looked up by name, so that a patched nn.Module._apply is honoured: cheaper
        # than super() on a path every module takes on every .to(). recurse is passed on only
        # when set, as nn.Module does, so that overrides written before it existed keep working.
        apply_next: Any = type(self).__autoreg__.apply_owner._apply
        owned = self.__dict__.get(_OWNED)
        if not owned or (_CARRIED not in owned.values() and _CONTAINER not in owned.values()):
            return apply_next(self, fn) if recurse else apply_next(self, fn, recurse)
        return _apply_carrying(self, apply_next, fn, recurse, owned)


def _apply_carrying(
    module: AutoRegisterMixin,
    apply_next: Any,
    fn: Callable[[torch.Tensor], torch.Tensor],
    recurse: bool,
    owned: dict[str, str],
) -> Any:
    """``_apply`` for a module that carries tensors: convert them after its registered state.

    A carried tensor or a container may hold a parameter or a buffer of this module tree: it must
    end up holding the converted one, not a stale or a duplicated copy.
    """
    registered = _registered_tensors(module.modules() if recurse else [module])
    result = apply_next(module, fn) if recurse else apply_next(module, fn, recurse)
    converted: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # id -> (old, new)

    def convert(tensor: torch.Tensor) -> torch.Tensor:
        if id(tensor) not in converted:
            entry = registered.get(id(tensor))
            if entry is not None:
                _, registry, key = entry
                new = registry[key]
            elif tensor.requires_grad:
                new = tensor  # rule 6: not autoreg's to move
            else:
                new = fn(tensor)
            converted[id(tensor)] = (tensor, new)
        return converted[id(tensor)][1]

    d = module.__dict__
    for name, role in owned.items():
        value = d.get(name)
        if role == _CARRIED and isinstance(value, torch.Tensor):
            d[name] = convert(value)
        elif role == _CONTAINER and isinstance(value, CONTAINERS):
            d[name] = map_tensors(value, convert)
    return result


# --- the tensor path of the contract -------------------------------------------------------------


def _assign_tensor(
    module: AutoRegisterMixin, name: str, value: torch.Tensor, role: str | None
) -> None:
    """A plain tensor assigned to a name that holds no parameter, buffer or submodule."""
    record = type(module).__autoreg__
    d = module.__dict__
    cls = type(module).__name__
    declaration = record.declarations.get(name)

    if declaration is Declaration.PLAIN or value.requires_grad:
        # Rules 9 and 6: never registered or carried.
        if declaration is not Declaration.PLAIN and value.is_leaf:
            message = GRAD_LEAF.format(cls=cls, name=name, value=describe(value))
            if record.mode is Mode.STRICT:
                raise UnregisteredTensorError(message)
            record.warn_once("grad", name, message)
        if role is not None:
            _forget(module, name)
        _next_setattr(module, name, value)
        return

    where = _why_no_buffer_slot(type(module), name)
    if where is not None:
        # Rule 7: the name cannot hold a buffer; nn.Module's behaviour (property setters run).
        message = NO_BUFFER_SLOT.format(cls=cls, name=name, value=describe(value), where=where)
        if record.mode is Mode.STRICT:
            raise UnregisteredTensorError(message)
        if record.mode is Mode.WARN:
            record.warn_once("slot", name, message)
        _next_setattr(module, name, value)
        return

    constructing = _CONSTRUCTING in d
    # A tensor sharing memory with a parameter is a view of a weight (the old spectral_norm
    # writes `weight.data` in __init__), not a constant: carried, never a buffer.
    register = declaration is not None or (constructing and not _aliases_a_parameter(module, value))
    if declaration is None and record.mode is not Mode.REGISTER:
        # Rules 10 and 11: strict raises, warn says what was done and how to say it explicitly.
        kind = "persistent" if record.persistent else "non-persistent"
        if register:
            reason = "it was assigned during construction"
            action = f"register it as a {kind} buffer ({reason})"
            past = f"registered as a {kind} buffer because {reason}"
        else:
            action = "carry it along with .to() as runtime state, outside state_dict"
            past = "carried as runtime state: it moves with .to() but is not in state_dict"
        fields = {
            "cls": cls,
            "name": name,
            "value": describe(value),
            "default": f"a buffer ({kind}):",
        }
        if record.mode is Mode.STRICT:
            message = STRICT_UNDECLARED.format(action=action, why=record.why_strict(), **fields)
            raise UnregisteredTensorError(message)
        record.warn_once("undeclared", name, WARN_UNDECLARED.format(action_past=past, **fields))

    if not constructing and (register or name not in d):
        _refuse_while_exporting(module, name, value, "register" if register else "carry")

    if not register:
        # Rule 3: runtime state, moved by _apply, never module state.
        object.__setattr__(module, name, value)
        _owned(d)[name] = _CARRIED
    elif "_buffers" not in d:
        # Rule 2 before nn.Module.__init__ ran: registered when construction ends.
        object.__setattr__(module, name, value)
        d.setdefault(_PENDING, set()).add(name)
    else:
        # Rules 2 and 4: a buffer, through register_buffer so that global hooks see it.
        _register(module, name, value, record.persistence(declaration))


def _aliases_a_parameter(module: AutoRegisterMixin, value: torch.Tensor) -> bool:
    """Whether ``value`` shares memory with a parameter of ``module`` itself (``weight.data``)."""
    parameters = module.__dict__.get("_parameters")
    if not parameters:
        return False
    try:
        storage = value.untyped_storage()._cdata
        return any(
            p is not None and p.untyped_storage()._cdata == storage for p in parameters.values()
        )
    except (NotImplementedError, RuntimeError):  # a tensor subclass without storage
        return False


def _assign_container(
    module: AutoRegisterMixin, name: str, value: object, role: str | None
) -> None:
    """Rule 3 for containers: a list, tuple or dict attribute is carried, the tensors in it move."""
    record = type(module).__autoreg__
    d = module.__dict__
    if name not in d and _CONSTRUCTING not in d:
        _refuse_while_exporting(module, name, value, "carry")
    plain = record.declarations.get(name) is Declaration.PLAIN
    if not plain and record.mode is not Mode.REGISTER:
        loose = _loose_tensors(module, value)
        if loose:
            path, tensor = loose[0]
            fields = {
                "cls": type(module).__name__,
                "name": name,
                "kind": type(value).__name__,
                "count": len(loose),
                "example": f"{name}{path} = {describe(tensor)}",
            }
            if record.mode is Mode.STRICT:
                raise UnregisteredTensorError(
                    STRICT_CONTAINER.format(why=record.why_strict(), **fields)
                )
            record.warn_once("container", name, WARN_CONTAINER.format(**fields))
    # Only now that nothing can raise: what the name held before is no longer autoreg's.
    if role is not None:
        _forget(module, name)
    _next_setattr(module, name, value)
    if not plain:
        _owned(d)[name] = _CONTAINER


def _refuse_while_exporting(
    module: AutoRegisterMixin, name: str, value: object, action: str
) -> None:
    """Raise ExportError if non-strict torch.export traces the first assignment of ``name``.

    Non-strict export runs forward on fake tensors, then restores the attributes the module had
    before tracing: a new attribute, buffer or container would keep its fake tensors.
    """
    if not _exporting_non_strict():
        return
    if isinstance(value, torch.Tensor):
        what = describe(value)
    else:
        first = next(iter_tensors(value), None)
        if first is None:
            return  # a container without tensors: nothing fake stays behind
        path, tensor = first
        what = f"{type(value).__name__} holding {name}{path} = {describe(tensor)}"
    raise ExportError(
        NEW_NAME_DURING_EXPORT.format(
            action=action, cls=type(module).__name__, name=name, value=what
        )
    )


def _exporting_non_strict() -> bool:
    """Whether forward runs under non-strict ``torch.export`` (strict export traces with dynamo).

    torch < 2.6 has no ``torch.compiler.is_exporting``: there, nothing is detected.
    """
    is_exporting = getattr(torch.compiler, "is_exporting", None)
    return bool(is_exporting and is_exporting() and not torch.compiler.is_dynamo_compiling())


def _loose_tensors(module: AutoRegisterMixin, value: object) -> list[tuple[str, torch.Tensor]]:
    """The tensors in ``value`` that only autoreg would move: not registered, not requiring grad."""
    found = [(path, t) for path, t in iter_tensors(value) if not t.requires_grad]
    if found:
        registered = _registered_tensors(module.modules())
        found = [(path, t) for path, t in found if id(t) not in registered]
    return found


def _registered_tensors(
    modules: Iterable[nn.Module],
) -> dict[int, tuple[torch.Tensor, dict[str, Any], str]]:
    """``id(tensor) -> (tensor, registry, key)`` for the parameters and buffers of ``modules``."""
    found: dict[int, tuple[torch.Tensor, dict[str, Any], str]] = {}
    for module in modules:
        for registry in (module._parameters, module._buffers):
            for key, tensor in registry.items():
                if tensor is not None:
                    found[id(tensor)] = (tensor, registry, key)
    return found


def _forget(module: AutoRegisterMixin, name: str) -> None:
    """Drop autoreg's claim on ``name``; a buffer autoreg registered is unregistered."""
    d = module.__dict__
    if d[_OWNED].pop(name) == _BUFFER and name in d["_buffers"]:
        del d["_buffers"][name]
        d["_non_persistent_buffers_set"].discard(name)


def _register(module: AutoRegisterMixin, name: str, value: torch.Tensor, persistent: bool) -> None:
    d = module.__dict__
    previous = d.pop(name, _MISSING)  # a plain attribute of that name, e.g. `self.x = None`
    if previous is not _MISSING and _OWNED in d:
        d[_OWNED].pop(name, None)
    try:
        if type(module).__autoreg__.direct:
            # No base overrides register_buffer: nn.Module's, without the mixin's override,
            # which only takes names over from autoreg (this one is no longer autoreg's).
            nn.Module.register_buffer(module, name, value, persistent)
        else:
            module.register_buffer(name, value, persistent)
    except BaseException:
        if previous is not _MISSING:
            d[name] = previous
        raise
    _owned(d)[name] = _BUFFER


def _explicitly(
    module: AutoRegisterMixin, name: str, role: str, register: Callable[[], None]
) -> None:
    """Run an explicit registration of ``name``, which takes the name over from autoreg."""
    d = module.__dict__
    del d[_OWNED][name]
    # nn.Module refuses to register a buffer over a plain attribute, and a carried tensor is one.
    previous = d.pop(name, _MISSING) if role == _CARRIED else _MISSING
    try:
        register()
    except BaseException:
        d[_OWNED][name] = role
        if previous is not _MISSING:
            d[name] = previous
        raise


def _reassign(module: AutoRegisterMixin, name: str, value: Any, role: str | None) -> None:
    """nn.Module's path for a value autoreg leaves to it; keeps the role autoreg gave the name.

    nn.Module.__setattr__ calls ``register_buffer`` for a buffer, which would take the name over;
    an assignment keeps the role autoreg gave the name.
    """
    _next_setattr(module, name, value)
    if role is not None and name in module.__dict__["_buffers"]:
        module.__dict__[_OWNED][name] = role


def _is_explicit(value: object) -> bool:
    """``isinstance(value, (nn.Module, nn.Parameter, nn.Buffer))``, cheap for plain tensors.

    A tensor of exact type ``torch.Tensor`` is a Parameter or a Buffer only through the flags that
    their metaclasses' ``__instancecheck__`` read, and is never a module.
    """
    if type(value) is torch.Tensor:
        return bool(getattr(value, "_is_param", False) or getattr(value, "_is_buffer", False))
    return isinstance(value, (nn.Module, nn.Parameter, nn.Buffer))


def _next_setattr(module: AutoRegisterMixin, name: str, value: Any) -> None:
    """The ``__setattr__`` that comes after the mixin: nn.Module's, unless a base overrides it."""
    super(AutoRegisterMixin, module).__setattr__(name, value)


def _owned(d: dict[str, Any]) -> dict[str, str]:
    owned: dict[str, str] | None = d.get(_OWNED)
    if owned is None:
        owned = d[_OWNED] = {}
    return owned


def _why_no_buffer_slot(cls: type, name: str) -> str | None:
    """Why ``name`` cannot hold a buffer on instances of ``cls``; None when it can."""
    if not name or "." in name:
        return "is empty or dotted" if not name else "contains a '.'"
    if name in _MODULE_INTERNALS or name.startswith("_autoreg_"):
        return "is one of nn.Module's internal attributes"
    for klass in cls.__mro__:  # what instance lookup finds before nn.Module.__getattr__
        attribute = vars(klass).get(name, _MISSING)
        if attribute is not _MISSING:
            kind = type(attribute).__name__
            return (
                f"is defined on the class (a class-level {kind}) and hides any buffer of that name"
            )
    return None


# --- class creation --------------------------------------------------------------------------


def _declares(klass: type) -> bool:
    """Whether the annotations of ``klass`` declare: autoreg classes and plain mixins do."""
    return klass is not nn.Module and (
        issubclass(klass, AutoRegisterMixin) or not issubclass(klass, nn.Module)
    )


def _check_bases(cls: type) -> None:
    mro = cls.__mro__
    if nn.Module not in mro:
        raise ClassDefinitionError(MIXIN_WITHOUT_MODULE.format(cls=cls.__name__))
    if mro.index(nn.Module) < mro.index(AutoRegisterMixin):
        bases = ", ".join(
            f"{base.__module__}.{base.__qualname__}"
            for base in cls.__bases__
            if base is not AutoRegisterMixin
        )
        raise ClassDefinitionError(MIXIN_AFTER_MODULE.format(cls=cls.__name__, bases=bases))


def _takes_modules_paths(cls: type) -> bool:
    """Whether nn.Module's ``__setattr__`` and ``register_buffer`` are what the mixin defers to.

    When they are, the mixin may take nn.Module's own path for a non-tensor or for a tensor
    assigned to a buffer without the extra call; when a base overrides either, it always calls it.
    """
    mro = cls.__mro__
    after = mro[mro.index(AutoRegisterMixin) + 1 :]
    return all(
        "__setattr__" not in vars(klass) for klass in after if klass not in (nn.Module, object)
    ) and all(
        "register_buffer" not in vars(klass)
        for klass in mro
        if klass not in (nn.Module, AutoRegisterMixin)
    )


def _next_defining(cls: type, name: str) -> Any:
    """The first class after the mixin in ``cls.__mro__`` that defines ``name``."""
    mro = cls.__mro__
    return next(klass for klass in mro[mro.index(AutoRegisterMixin) + 1 :] if name in vars(klass))


def _mark_construction(cls: type) -> None:
    """Wrap ``cls.__init__`` so that an instance knows when it is being constructed."""
    init = cls.__dict__.get("__init__", cls.__init__)  # type: ignore[misc]
    if getattr(init, "__autoreg_marks_construction__", False):
        return  # inherited from an autoreg base that marks it already
    if cls.__module__ == __name__:
        # autoreg.Module itself: its __init__ is nn.Module's, which assigns nothing through
        # __setattr__. Each subclass wraps the __init__ it runs first; a wrapper here would only
        # nest inside theirs, on every construction.
        return

    @functools.wraps(init)
    def __init__(self: AutoRegisterMixin, *args: Any, **kwargs: Any) -> None:  # noqa: N807
        d = self.__dict__
        if _CONSTRUCTING in d:  # an __init__ further down the chain: the outermost one marks
            init(self, *args, **kwargs)
            return
        # Read the class's annotations now, outside any compiled region: a first read inside a
        # torch.compile'd forward would make dynamo trace eval().
        type(self).__autoreg__.declarations  # noqa: B018
        d[_CONSTRUCTING] = True
        try:
            init(self, *args, **kwargs)
        finally:
            self.__dict__.pop(_CONSTRUCTING, None)
        if _PENDING in self.__dict__:
            _register_pending(self)

    __init__.__autoreg_marks_construction__ = True  # type: ignore[attr-defined]
    cls.__init__ = __init__  # type: ignore[misc]


def _register_pending(module: AutoRegisterMixin) -> None:
    """Register the tensors assigned before nn.Module.__init__ ran, now that it has."""
    d = module.__dict__
    pending: set[str] = d.pop(_PENDING)
    if "_buffers" not in d:
        return  # nn.Module.__init__ never ran: they stay plain attributes, as in nn.Module
    record = type(module).__autoreg__
    for name in sorted(pending):
        value = d.get(name)
        if isinstance(value, torch.Tensor) and not value.requires_grad:
            _register(module, name, value, record.persistence(record.declarations.get(name)))


class Module(AutoRegisterMixin, nn.Module):
    """``nn.Module`` whose assigned tensors move with it. Subclass it instead of ``nn.Module``."""
