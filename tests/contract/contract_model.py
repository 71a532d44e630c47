"""The README's contract table, restated as a reference model for ``tests/test_model_based.py``.

``Reference`` says what ``self.name = value``, ``del self.name``, ``register_buffer`` and ``.to()``
do to each name of one module; its assignment follows the table top to bottom, and its comments
cite the table's row numbers. A subject may have a framework base (row 4): then each name belongs
to the code that first assigned it a value nn.Module does not register - the framework's method,
or the model's code - until it is deleted. ``ClassModel`` holds what autoreg keeps per class
(mode, default persistence, whether there is a framework base, the warnings already given).
Values are described, not held: ``T(dtype, grad)`` for a tensor, ``Own("w")`` for the module's own
parameter (or ``Own("fixed")``, its buffer) inside a container, ``("list" | "tuple" | "dict",
items)`` for a container, ``MODULE``, ``None`` or ``3``.

Messages of autoreg's warnings and strict errors are described by their kind: ``("grad",)`` (a
leaf that requires grad), ``("slot",)`` (a name that cannot hold a buffer), ``("register",
"persistent" | "non-persistent")`` and ``("carry",)`` (an undeclared tensor), ``("container",
type, count)`` (a container holding unregistered tensors).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import torch

UNDECLARED = ("a", "b")
DECLARED = {"p": True, "n": False, "t": None}  # persistence; None follows the class keyword
PLAIN = "pl"  # annotated autoreg.Plain
# A property whose setter stores the value in __dict__["_prop"], around __setattr__: autoreg
# never sees that store, so what it holds stays where it is, as on nn.Module (row 7).
PROPERTY = "prop"
CLASS_ATTRIBUTES = (PROPERTY, "meth", "default")  # a property, a method, a class-level default
NO_SLOT = (*CLASS_ATTRIBUTES, "x.y")  # names that cannot hold a buffer
NAMES = (*UNDECLARED, *DECLARED, PLAIN, *NO_SLOT)
FIXED = ("w", "fixed")  # the module's own parameter and persistent buffer, never operated on

TENSORS = ("float", "long", "grad_leaf", "grad_result")
EXPLICIT = ("param", "buffer_persistent", "buffer_non_persistent", "module")
SCALARS = ("none", "int")
CONTAINERS = ("list", "tuple", "dict", "nested", "empty", "own", "grad_list")
KINDS = (*TENSORS, *EXPLICIT, *SCALARS, *CONTAINERS)

MODULE = ("module",)


@dataclass(frozen=True)
class T:
    """A tensor that is not the module's own; ``grad`` and ``leaf``: a weight (a leaf that
    requires grad) or an autograd result (a non-leaf that does)."""

    dtype: torch.dtype
    grad: bool = False
    leaf: bool = True

    @property
    def weight(self) -> bool:
        return self.grad and self.leaf


@dataclass(frozen=True)
class Own:
    """The module's own parameter ``w`` or buffer ``fixed``, held in a container."""

    name: str


F32, I64 = T(torch.float32), T(torch.int64)
DEEP = ("tuple", (F32, ("dict", (("deep", I64),))))  # inside "nested"
DESCRIPTIONS: dict[str, Any] = {
    "float": F32,
    "long": I64,
    "grad_leaf": T(torch.float32, grad=True),
    "grad_result": T(torch.float32, grad=True, leaf=False),
    "param": T(torch.float32, grad=True),
    "buffer_persistent": F32,
    "buffer_non_persistent": F32,
    "module": MODULE,
    "none": None,
    "int": 3,
    "list": ("list", (F32, I64)),
    "tuple": ("tuple", (F32, 3)),
    "dict": ("dict", (("k", F32),)),
    "nested": ("dict", (("k", ("list", (F32, DEEP))),)),
    "empty": ("list", ()),
    "own": ("list", (Own("w"), Own("fixed"))),
    "grad_list": ("list", (T(torch.float32, grad=True),)),
}


def is_container(value: Any) -> bool:
    return isinstance(value, tuple) and value[0] in ("list", "tuple", "dict")


def items(value: Any) -> Iterator[tuple[str, Any]]:
    """``(index as Python writes it, item)`` for a container description."""
    if value[0] == "dict":
        for key, item in value[1]:
            yield f"[{key!r}]", item
    else:
        for index, item in enumerate(value[1]):
            yield f"[{index}]", item


def tensors(value: Any, path: str = "") -> Iterator[tuple[str, T | Own]]:
    """``(path, tensor)`` for a tensor description or each one nested in a container."""
    if isinstance(value, (T, Own)):
        yield path, value
    elif is_container(value):
        for index, item in items(value):
            yield from tensors(item, path + index)


def rebuild(value: Any, convert: Any) -> Any:
    """``value`` with each tensor description replaced by ``convert(tensor)``."""
    if isinstance(value, (T, Own)):
        return convert(value)
    if not is_container(value):
        return value
    if value[0] == "dict":
        return ("dict", tuple((key, rebuild(item, convert)) for key, item in value[1]))
    return (value[0], tuple(rebuild(item, convert) for item in value[1]))


def loose(value: Any) -> int:
    """How many tensors of a container only autoreg would move: neither own nor weights."""
    return sum(isinstance(t, T) and not t.weight for _, t in tensors(value))


@dataclass(frozen=True)
class Entry:
    role: str  # "param" | "buffer" | "module" | "carried" | "plain"
    value: Any
    persistent: bool = False  # buffers
    auto: bool = False  # a buffer autoreg registered
    container: bool = False  # carried: autoreg carries a container, not a tensor

    def view(self) -> tuple[str, Any, bool]:
        """What can be observed: carried and plain attributes differ only in what .to() does."""
        role = "attribute" if self.role in ("carried", "plain") else self.role
        return role, self.value, self.persistent


@dataclass
class ClassModel:
    """What autoreg keeps per class: the mode, the default persistence, the warnings given."""

    mode: str  # "register" | "warn" | "strict"
    persistent: bool
    weight: bool  # whether the subject has its parameter ``w`` (else no parameter at all)
    framework: bool = False  # whether the subject has a framework base (row 4)
    warned: set[tuple[str, str]] = field(default_factory=set)


class RefusedError(Exception):
    """An assignment refused by strict mode; ``args[0]`` describes the message."""


Outcome = tuple[tuple[str, Any] | None, tuple[Any, ...]]  # (exception, message) | None, warnings


class Reference:
    """The README's contract table, row by row: what each operation does to each name."""

    def __init__(self, cls: ClassModel) -> None:
        self.cls = cls
        self.state: dict[str, Entry] = {"fixed": Entry("buffer", F32, persistent=True)}
        self.owners: dict[str, str] = {}  # row 4: "framework" | "model", on a framework subject
        if cls.weight:
            self.state["w"] = Entry("param", T(torch.float32, grad=True))
            self.own("w", by_framework=False)
        self.warnings: list[Any] = []

    # --- operations: each returns the outcome, and changes the state only if nothing raised --

    def own(self, name: str, by_framework: bool) -> None:
        """Row 4: the first assignment of a name that rows 1 to 3 do not decide (nn.Module does
        not register the name) decides whose it is."""
        if self.cls.framework and name not in self.owners:
            self.owners[name] = "framework" if by_framework else "model"

    def assign(
        self, name: str, kind: str, constructing: bool, by_framework: bool = False
    ) -> Outcome:
        self.warnings = []
        try:
            error = self._assign(name, kind, constructing, by_framework)
        except RefusedError as refused:
            return ("UnregisteredTensorError", refused.args[0]), tuple(self.warnings)
        return ((error, None) if error else None), tuple(self.warnings)

    def delete(self, name: str) -> Outcome:
        if name == PROPERTY or name not in self.state:  # the property has no deleter
            return ("AttributeError", None), ()
        del self.state[name]
        self.owners.pop(name, None)  # a name deleted is a new name
        return None, ()

    def register_buffer(self, name: str, kind: str, persistent: bool) -> Outcome:
        """``register_buffer`` is nn.Module's own: it raises over any plain attribute, carried
        ones included; over a buffer autoreg registered, autoreg still owns the name (row 2)."""
        current = self.state.get(name)
        if name in NO_SLOT or (current is not None and current.role != "buffer"):
            return ("KeyError", None), ()  # "attribute ... already exists", or dotted
        if kind == "int":
            return ("TypeError", None), ()
        auto = current is not None and current.auto
        self.state[name] = Entry("buffer", DESCRIPTIONS[kind], persistent, auto=auto)
        return None, ()

    def append(self, name: str) -> None:
        """``self.name.append(tensor)`` on a list attribute: a carried list moves as it is now."""
        entry = self.state.get(name)
        if entry is not None and is_container(entry.value) and entry.value[0] == "list":
            self.state[name] = replace(entry, value=("list", (*entry.value[1], F32)))

    def to(self, dtype: torch.dtype) -> None:
        """``.to(dtype)``: parameters, buffers and carried tensors convert; plain ones stay."""
        old = self.state["fixed"].value.dtype

        def parameter(t: T | Own) -> T | Own:  # nn.Module converts every floating tensor
            return replace(t, dtype=dtype) if isinstance(t, T) and t.dtype.is_floating_point else t

        def registered(t: T | Own) -> T | Own:  # ... a buffer's with autograd on: a copy of a
            new = parameter(t)  # tensor that requires grad is an autograd result
            return replace(new, leaf=False) if isinstance(t, T) and t.grad and new != t else new

        def carried(t: T | Own) -> T | Own:  # ... and autoreg all but weights (row 6)
            return t if isinstance(t, T) and t.weight else registered(t)

        def plain(t: T | Own) -> T | Own:  # a plain container keeps the buffer it was given
            return T(old) if t == Own("fixed") and old != dtype else t

        convert = {"param": parameter, "buffer": registered, "carried": carried}
        for name, entry in self.state.items():
            rule = convert.get(entry.role, plain if entry.role == "plain" else None)
            if rule is not None:
                self.state[name] = replace(entry, value=rebuild(entry.value, rule))

    def pickled(self) -> None:
        """A pickle round trip: torch restores an autograd result as a leaf (it keeps
        requires_grad): from then on it is a weight, which ``.to()`` leaves (row 6), though the
        name stays autoreg's (an ``nn.Buffer`` assigned there takes it over)."""

        def leaf(t: T | Own) -> T | Own:
            return replace(t, leaf=True) if isinstance(t, T) else t

        for name, entry in self.state.items():
            self.state[name] = replace(entry, value=rebuild(entry.value, leaf))

    # --- observables ----------------------------------------------------------------------------

    def view(self) -> dict[str, tuple[str, Any, bool]]:
        return {name: entry.view() for name, entry in self.state.items()}

    def moved(self) -> set[tuple[str, str]]:
        """``(name, path)`` of each tensor that ``.to()`` hands to its conversion function."""
        found = set()
        for name, entry in self.state.items():
            if entry.role in ("param", "buffer") and isinstance(entry.value, T):
                found.add((name, ""))
            elif entry.role == "carried":
                found |= {
                    (name, path)
                    for path, t in tensors(entry.value)
                    if isinstance(t, T) and not t.weight
                }
        return found

    def buffers(self) -> set[str]:
        return {n for n, e in self.state.items() if e.role == "buffer" and e.value is not None}

    def state_dict_keys(self) -> set[str]:
        return {
            name
            for name, entry in self.state.items()
            if entry.value is not None
            and (entry.role == "param" or (entry.role == "buffer" and entry.persistent))
        }

    # --- the table ------------------------------------------------------------------------------

    def _assign(self, name: str, kind: str, constructing: bool, by_framework: bool) -> str | None:
        current = self.state.get(name)
        held = current.role if current else None
        value = self.describe(kind)
        if kind in EXPLICIT or held in ("param", "buffer", "module"):
            return self._explicit(name, kind, current)  # rows 1 to 3
        if kind == "none" and held == "carried":
            # Row 12, but None keeps the mark: the name stays carried, holding nothing to convert
            # (an nn.Buffer may then take it over, as it takes over any carried name).
            self.state[name] = replace(current, value=value)
            return None
        self.own(name, by_framework)
        if self.owners.get(name) == "framework":
            self.state[name] = Entry("plain", value)  # row 4: nn.Module's behaviour, for good
            return None
        if kind in CONTAINERS:
            self._container(name, value)  # rows 5, 7 and 8
        elif kind in TENSORS:
            self._tensor(name, value, kind, current, constructing)  # rows 5 to 7, 9 to 11
        else:
            self.state[name] = Entry("plain", value)  # row 12: a name autoreg carried is forgotten
        return None

    def _explicit(self, name: str, kind: str, current: Entry | None) -> str | None:
        """Rows 1 to 3: an nn.Parameter, nn.Buffer or module, or a value for a name holding one."""
        held = current.role if current else None
        value = self.describe(kind)
        if kind == "param":
            self.state[name] = Entry("param", value)
            return None
        if kind == "module":
            if held == "param":  # a parameter takes only a Parameter or None
                return "TypeError"
            self.state[name] = Entry("module", value)
            return None
        if kind.startswith("buffer"):
            if held in ("param", "module"):
                return "TypeError"
            if held == "plain" or name in NO_SLOT:
                return "KeyError"  # "attribute ... already exists", or dotted
            # Over a carried name or any buffer it takes the name over, with its persistence.
            self.state[name] = Entry("buffer", value, persistent=kind == "buffer_persistent")
            return None
        assert current is not None
        if kind == "none":
            self.state[name] = replace(current, value=None)
            return None
        if held in ("param", "module"):
            return "TypeError"  # only their own kind or None
        # held == "buffer": a tensor keeps the buffer and its persistence.
        if kind in TENSORS:
            self.state[name] = replace(current, value=value)
            return None
        if not current.auto:
            return "TypeError"  # nn.Module: "cannot assign 'int' as buffer"
        # Row 2: a non-tensor (a container too) for a buffer autoreg registered under an
        # undeclared name: the buffer is unregistered, and the value assigned afresh.
        del self.state[name]
        if kind in CONTAINERS:
            self._container(name, value)
        else:
            self.state[name] = Entry("plain", value)  # row 12
        return None

    def _container(self, name: str, value: Any) -> None:
        """Row 8: a list, tuple or dict is carried; strict refuses one holding tensors that
        nothing registers (rows 5 and 7 first: ``Plain``, and a property's setter)."""
        if name == PLAIN:
            self.state[name] = Entry("plain", value)  # row 5
            return
        if name == PROPERTY:  # row 7: the property's setter runs, and stores it in _prop
            self.state[name] = Entry("plain", value, container=True)
            return
        count = loose(value)
        if count and self.cls.mode != "register":
            self._enforce("container", name, ("container", value[0], count))
        self.state[name] = Entry("carried", value, container=True)

    def _tensor(
        self, name: str, value: T, kind: str, current: Entry | None, constructing: bool
    ) -> None:
        """A plain tensor for a name that holds no parameter, buffer or submodule."""
        if name == PLAIN or value.weight:
            # Rows 5 and 6: a plain attribute; a leaf built in __init__ is probably meant as a
            # Parameter.
            if name != PLAIN and constructing:
                self._enforce("grad", name, ("grad",), warn_always=True)
            self.state[name] = Entry("plain", value)
            return
        if name in NO_SLOT:
            # Row 7: a name that cannot hold a buffer: nn.Module's behaviour. Strict and warn
            # modes leave a property alone: its setter decides.
            if name != PROPERTY:
                self._enforce("slot", name, ("slot",))
                self.state[name] = Entry("plain", value)
            else:  # its setter stores it in _prop, around __setattr__
                self.state[name] = Entry("plain", value)
            return
        # Rows 9 and 10 register, row 11 carries; an autograd result built in __init__ too.
        register = name in DECLARED or (constructing and not value.grad)
        persistent = self._persistence(name)
        if name not in DECLARED:
            how = "persistent" if persistent else "non-persistent"
            self._enforce("undeclared", name, ("register", how) if register else ("carry",))
        if register:
            self.state[name] = Entry("buffer", value, persistent, auto=name not in DECLARED)
        else:
            self.state[name] = Entry("carried", value)

    def describe(self, kind: str) -> Any:
        if kind == "own" and not self.cls.weight:
            return ("list", (Own("fixed"),))
        return DESCRIPTIONS[kind]

    def _persistence(self, name: str) -> bool:
        declared = DECLARED.get(name)
        return self.cls.persistent if declared is None else declared

    def _enforce(self, kind: str, name: str, message: Any, warn_always: bool = False) -> None:
        """Strict mode refuses; warn mode (or, for ``warn_always``, any mode) warns once."""
        if self.cls.mode == "strict":
            raise RefusedError(message)
        if (self.cls.mode == "warn" or warn_always) and (kind, name) not in self.cls.warned:
            self.cls.warned.add((kind, name))
            self.warnings.append(message)
