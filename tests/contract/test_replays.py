"""The mixin's three replays under torch's utilities, compared with hand-written twins.

``AutoRegisterMixin.__setattr__`` takes three assignments without building their situation: a
buffer updated with a plain tensor (row 3), a module assigned under a new name (row 1, through
``execute``) and a class assigned to ``__class__`` (row 12: torch's parametrizations swap an
instance's class twice per round). Each test here puts those paths where torch's own code drives
them - a plain root over parametrized or pruned autoreg children, ``torch.func.functional_call``
and ``vmap``, ``torch.compile``, cloudpickle in another process, and a differential fuzzer - and
compares what a user can observe with the twin: an ``nn.Module`` that registers its constructor's
tensors with ``register_buffer(persistent=False)`` and keeps its runtime tensors as plain
attributes that its own ``_apply`` converts (what the contract says autoreg does). Observed:
values, dtypes and devices of every parameter, buffer and plain tensor attribute; which of them
``.to()`` hands to its conversion function; which are one tensor (identity); ``state_dict()`` keys
and ``named_buffers()``; the classes (names without ``Auto``/``Twin``); compile frame counts.
Never autoreg's bookkeeping.

The "move" is ``.double()`` / ``.float()`` on CPU: the same path as ``.cuda()``.
"""

from __future__ import annotations

import copy
import json
import os
import pickle
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from torch import nn
from torch._dynamo.testing import CompileCounterWithBackend
from torch.func import functional_call, vmap
from torch.nn.modules.module import register_module_module_registration_hook
from torch.nn.utils import parametrizations, parametrize, prune

import autoreg

# --- twins ------------------------------------------------------------------------------------


class ByHand(nn.Module):
    """The twin's runtime state: the plain attributes ``carried_names()`` lists, which its own
    ``_apply`` converts after nn.Module's, as the contract says autoreg's ``.to()`` does
    (docs/contract.md, "Identity is promised within one module"): a tensor held under two names
    is converted once and stays one tensor; one that is the module's own parameter or buffer
    stays that parameter or buffer."""

    CARRIED: ClassVar[tuple[str, ...]] = ()

    def carried_names(self) -> Iterable[str]:
        return self.CARRIED

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> Any:
        d = self.__dict__
        own: dict[int, tuple[dict[str, Any], str]] = {}
        for registry in (self._parameters, self._buffers):
            for key, tensor in registry.items():
                if tensor is not None:  # one held under two names: the first stands for it
                    own.setdefault(id(tensor), (registry, key))
        held = {
            name: d[name] for name in self.carried_names() if isinstance(d.get(name), torch.Tensor)
        }
        result = super()._apply(fn, recurse)
        done: dict[int, torch.Tensor] = {}
        for name, tensor in held.items():
            if id(tensor) in own:
                registry, key = own[id(tensor)]
                d[name] = registry[key]
            elif id(tensor) in done:
                d[name] = done[id(tensor)]
            else:
                d[name] = done[id(tensor)] = fn(tensor)
        return result


class ClassHistory(nn.Module):
    """A base with a ``__setattr__`` of its own, as users' logging or validation bases have: it
    keeps the names of the classes its instance is given (torch's parametrizations give two per
    round). autoreg must pass a ``__class__`` assignment to it, as nn.Module's path does."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "__class__":
            self.__dict__.setdefault("class_history", []).append(value.__name__)
        super().__setattr__(name, value)


def _child_forward(self: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Stores a runtime tensor ``h`` (carried; the twin's by hand), reads buffer ``mask``."""
    self.h = x.detach().sum(0)
    out: torch.Tensor = nn.functional.linear(x, self.weight, self.bias) * self.mask
    return out


class AutoChild(autoreg.AutoRegisterMixin, nn.Linear):
    forward = _child_forward

    def __init__(self) -> None:
        super().__init__(3, 3)
        self.mask = torch.linspace(0.5, 1.5, 3)  # built: a non-persistent buffer (row 10)


class TwinChild(ByHand, nn.Linear):
    CARRIED = ("h",)
    forward = _child_forward

    def __init__(self) -> None:
        super().__init__(3, 3)
        self.register_buffer("mask", torch.linspace(0.5, 1.5, 3), persistent=False)


class AutoHistoryChild(autoreg.AutoRegisterMixin, ClassHistory, nn.Linear):
    forward = _child_forward

    def __init__(self) -> None:
        super().__init__(3, 3)
        self.mask = torch.linspace(0.5, 1.5, 3)


class TwinHistoryChild(ByHand, ClassHistory, nn.Linear):
    CARRIED = ("h",)
    forward = _child_forward

    def __init__(self) -> None:
        super().__init__(3, 3)
        self.register_buffer("mask", torch.linspace(0.5, 1.5, 3), persistent=False)


CHILDREN = {"direct": (AutoChild, TwinChild), "setattr base": (AutoHistoryChild, TwinHistoryChild)}


class Wrapper(nn.Module):
    """A plain root that runs its two children in turn."""

    def __init__(self, first: nn.Module, second: nn.Module) -> None:
        super().__init__()
        self.first = first
        self.second = second

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.second(self.first(x))
        return out


ROOTS: dict[str, Callable[[nn.Module, nn.Module], nn.Module]] = {
    "Sequential": nn.Sequential,
    "wrapper": Wrapper,
}


def _root(root: str, child: Callable[[], nn.Module]) -> nn.Module:
    torch.manual_seed(0)
    return ROOTS[root](child(), child())


def _pair(root: str, children: str) -> tuple[nn.Module, nn.Module]:
    """A plain root over two autoreg children, and the same root over two twins (same seed)."""
    auto, twin = CHILDREN[children]
    return _root(root, auto), _root(root, twin)


# --- parametrizations -------------------------------------------------------------------------


class Double(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2

    def right_inverse(self, x: torch.Tensor) -> torch.Tensor:
        return x / 2


def _double_weight(module: nn.Module) -> None:
    parametrize.register_parametrization(module, "weight", Double())


def _double_mask(module: nn.Module) -> None:
    """The constructor-built buffer itself parametrized: torch deletes it, then registers its
    ``original`` under ``parametrizations.mask``."""
    parametrize.register_parametrization(module, "mask", Double())


def _orthogonal(module: nn.Module) -> None:
    parametrizations.orthogonal(module, "weight")


def _weight_norm(module: nn.Module) -> None:
    parametrizations.weight_norm(module, "weight")


def _prune(module: nn.Module) -> None:
    prune.l1_unstructured(module, "weight", amount=0.5)


def _prune_without_grad(module: nn.Module) -> None:
    """The derived weight a leaf that requires no grad (which deepcopy accepts): a plain
    attribute all the same (row 6), known by prune's hook, never carried."""
    with torch.no_grad():
        _prune(module)


UTILITIES: dict[str, tuple[Callable[[nn.Module], None], str]] = {
    "register_parametrization": (_double_weight, "weight"),
    "register_parametrization of the buffer": (_double_mask, "mask"),
    "orthogonal": (_orthogonal, "weight"),
    "weight_norm": (_weight_norm, "weight"),
    "prune": (_prune, "weight"),
    "prune without grad": (_prune_without_grad, "weight"),
}
PARAMETRIZATIONS = [name for name in UTILITIES if not name.startswith("prune")]


def _children(root: nn.Module) -> list[nn.Module]:
    return [module for module in root.modules() if isinstance(module, nn.Linear)]


def _apply_utility(root: nn.Module, utility: str) -> None:
    torch.manual_seed(1)
    for child in _children(root):
        UTILITIES[utility][0](child)


def _remove_utility(root: nn.Module, utility: str, leave_parametrized: bool) -> None:
    name = UTILITIES[utility][1]
    for child in _children(root):
        if utility.startswith("prune"):
            prune.remove(child, name)
        else:
            parametrize.remove_parametrizations(child, name, leave_parametrized=leave_parametrized)


# --- what is observed -------------------------------------------------------------------------


def _class_name(cls: type) -> str:
    return _class_name_of(cls.__name__)


def _class_name_of(name: str) -> str:
    """A class's name as both sides share it: ``ParametrizedAutoChild`` and
    ``ParametrizedTwinChild`` are ``ParametrizedChild``."""
    return name.replace("Auto", "").replace("Twin", "")


def _tensors(root: nn.Module) -> list[tuple[str, torch.Tensor | None]]:
    """Every parameter, buffer and plain tensor attribute of every module, under a key."""
    found: list[tuple[str, torch.Tensor | None]] = []
    for path, module in root.named_modules():
        found += [(f"{path}:parameter:{n}", p) for n, p in module._parameters.items()]
        found += [(f"{path}:buffer:{n}", b) for n, b in module._buffers.items()]
        found += [
            (f"{path}:plain:{n}", v) for n, v in vars(module).items() if isinstance(v, torch.Tensor)
        ]
    return found


def _describe(tensor: torch.Tensor | None) -> object:
    if tensor is None:
        return None
    try:
        values: object = tensor.detach().tolist()
    except RuntimeError:  # a tensor that escaped vmap: torch cannot read it, on both alike
        values = "escaped"
    return (str(tensor.dtype), str(tensor.device), tuple(tensor.shape), values)


def converted(root: nn.Module) -> list[str]:
    """The keys of the tensors ``.to()`` hands to its conversion function: ``_apply`` (what
    ``.to()`` runs) given a function that records its argument and returns it unchanged."""
    seen: set[int] = set()

    def record(tensor: torch.Tensor) -> torch.Tensor:
        seen.add(id(tensor))
        return tensor

    root._apply(record)
    return [key for key, tensor in _tensors(root) if tensor is not None and id(tensor) in seen]


def observe(root: nn.Module) -> dict[str, Any]:
    """What a user can see of ``root``: each tensor's dtype, device, shape and values; which are
    one tensor (each key mapped to the first key holding the same object); what ``.to()``
    converts; ``state_dict()`` keys and ``named_buffers()`` in order; the classes (a
    parametrization's swap is seen here) and what a ``ClassHistory`` base recorded."""
    tensors = _tensors(root)
    first: dict[int, str] = {}
    for key, tensor in tensors:
        if tensor is not None:
            first.setdefault(id(tensor), key)
    return {
        "tensors": {key: _describe(tensor) for key, tensor in tensors},
        "same tensor as": {
            key: first[id(tensor)]
            for key, tensor in tensors
            if tensor is not None and first[id(tensor)] != key
        },
        "converted": converted(root),
        "state_dict": list(root.state_dict()),
        "named_buffers": [name for name, _ in root.named_buffers()],
        "classes": [_class_name(type(module)) for module in root.modules()],
        "class histories": [
            [_class_name(type(m)), *map(_class_name_of, vars(m).get("class_history", []))]
            for m in root.modules()
        ],
    }


def outcome(action: Callable[..., object], *args: Any) -> tuple[str, object]:
    """("ok", what ``action(*args)`` returned) or ("raised", the exception's type name)."""
    try:
        return ("ok", action(*args))
    except Exception as error:  # noqa: BLE001 - each side's exception is compared with the other's
        return ("raised", type(error).__name__)


def _same(auto: torch.Tensor, twin: torch.Tensor) -> None:
    torch.testing.assert_close(auto, twin, rtol=0, atol=0)


# --- 1. plain roots over parametrized autoreg children ----------------------------------------

_ROOT_IDS = pytest.mark.parametrize("root", list(ROOTS))
_CHILD_IDS = pytest.mark.parametrize("children", list(CHILDREN))
_REMOVALS = [
    pytest.param(utility, leave, id=f"{utility}, leave_parametrized={leave}")
    for utility in PARAMETRIZATIONS
    for leave in (True, False)
    if (utility, leave) != ("weight_norm", False)  # torch: "a sequence of tensors" cannot be left
] + [
    pytest.param(name, True, id=f"{name}, prune.remove") for name in ("prune", "prune without grad")
]


@_ROOT_IDS
@_CHILD_IDS
@pytest.mark.parametrize(("utility", "leave_parametrized"), _REMOVALS)
def test_a_plain_root_over_parametrized_children_converts_and_saves_as_the_twin(
    root: str, children: str, utility: str, leave_parametrized: bool
) -> None:
    """A plain root (``nn.Sequential``, a wrapper) over autoreg children, each with a built buffer
    and a carried runtime tensor, parametrized (their class swapped: row 12's replay; the
    ``parametrizations`` ModuleDict assigned: row 1's) or pruned: ``.double()`` then ``.float()``
    of the root converts every tensor the twin's converts, outputs and ``state_dict`` keys equal
    the twin's; removing the parametrization leaves what it leaves on the twin."""
    auto, twin = _pair(root, children)
    x = torch.randn(2, 3)
    _same(auto(x), twin(x))  # each child now carries h
    for module in (auto, twin):
        _apply_utility(module, utility)
    assert observe(auto) == observe(twin)
    _same(auto(x), twin(x))
    for dtype in (torch.float64, torch.float32):
        auto.to(dtype)
        twin.to(dtype)
        assert observe(auto) == observe(twin)
        _same(auto(x.to(dtype)), twin(x.to(dtype)))
    auto.double()  # h converted as the twin's (a carried value left behind reads float32)
    twin.double()
    assert {c.h.dtype for c in _children(auto)} == {torch.float64}
    assert observe(auto) == observe(twin)
    for module in (auto, twin):
        _remove_utility(module, utility, leave_parametrized)
    assert observe(auto) == observe(twin)
    auto.float()
    twin.float()
    assert observe(auto) == observe(twin)
    _same(auto(x), twin(x))


_COPIES: dict[str, Callable[[nn.Module], nn.Module]] = {
    "deepcopy": copy.deepcopy,
    "pickle": lambda module: pickle.loads(pickle.dumps(module)),
}


@_ROOT_IDS
@_CHILD_IDS
@pytest.mark.parametrize("utility", list(UTILITIES))
@pytest.mark.parametrize("how", list(_COPIES))
def test_a_copy_of_a_parametrized_plain_root_is_the_twins_copy(
    root: str, children: str, utility: str, how: str
) -> None:
    """A deepcopy or pickle of the parametrized (or pruned) root: the copy holds, converts and
    computes what the twin's copy does and shares no tensor with its original; torch refuses to
    pickle a parametrized module, on both alike. ``.double()`` of the copy then converts what the
    twin's converts and leaves both originals as they were."""
    auto, twin = _pair(root, children)
    x = torch.randn(2, 3)
    for module in (auto, twin):
        module(x)
        _apply_utility(module, utility)
    made = outcome(_COPIES[how], auto)
    expected = outcome(_COPIES[how], twin)
    assert made[0] == expected[0]
    if made[0] == "raised":
        assert made == expected
        # only torch's refusals: a parametrized module's pickle, a non-leaf tensor's deepcopy
        assert (how, utility in PARAMETRIZATIONS) == ("pickle", True) or (how, utility) == (
            "deepcopy",
            "prune",
        )
        return
    auto_copy, twin_copy = made[1], expected[1]
    assert isinstance(auto_copy, nn.Module)
    assert isinstance(twin_copy, nn.Module)
    assert observe(auto_copy) == observe(twin_copy)
    originals = {id(t) for _, t in _tensors(auto)}
    assert not originals & {id(t) for _, t in _tensors(auto_copy) if t is not None}
    _same(auto_copy(x), twin_copy(x))
    auto_copy.double()
    twin_copy.double()
    assert observe(auto_copy) == observe(twin_copy)
    assert observe(auto) == observe(twin)
    _same(auto_copy(x.double()), twin_copy(x.double()))


# --- 2. torch.func over the replays -----------------------------------------------------------


def _stateful_forward(self: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Updates buffer ``running`` with a plain tensor (row 3's replay) and reads a parametrized
    weight of its own and of its autoreg child."""
    y = self.head(self.lin(x)) * self.gain
    self.running = 0.5 * self.running + y.detach().mean(0)
    out: torch.Tensor = y + self.running
    return out


class AutoStateful(autoreg.Module):
    forward = _stateful_forward

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)  # modules under new names: row 1's replay
        self.head = AutoChild()
        self.gain = nn.Parameter(torch.linspace(1.0, 2.0, 3))
        self.running = torch.zeros(3)


class TwinStateful(ByHand):
    forward = _stateful_forward

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.head = TwinChild()
        self.gain = nn.Parameter(torch.linspace(1.0, 2.0, 3))
        self.register_buffer("running", torch.zeros(3), persistent=False)


def _stateful(cls: Callable[[], nn.Module], parametrized: bool) -> nn.Module:
    torch.manual_seed(0)
    module = cls()
    if parametrized:  # row 12's replay on the root and on its child
        parametrize.register_parametrization(module, "gain", Double())
        parametrize.register_parametrization(module.head, "weight", Double())
    return module


_PARAMETRIZED = pytest.mark.parametrize(
    "parametrized", [False, True], ids=["plain", "parametrized"]
)
_EAGER_FIRST = pytest.mark.parametrize("eager_first", [False, True], ids=["first", "eager first"])


def _replacements(parametrized: bool) -> dict[str, torch.Tensor]:
    """New tensors for a parameter, the updated buffer, the child's built buffer, a
    parametrization's original (or the parameter itself) and a name the module lacks."""
    gain = "parametrizations.gain.original" if parametrized else "gain"
    return {
        "lin.weight": torch.eye(3),
        "running": torch.full((3,), 5.0),
        "head.mask": torch.full((3,), 3.0),
        gain: torch.full((3,), 0.25),
        "extra": torch.ones(1),  # torch's own store (row 4), deleted after the call
    }


@_PARAMETRIZED
@_EAGER_FIRST
def test_functional_call_over_the_replays_matches_the_twin_and_puts_back_the_module(
    parametrized: bool, eager_first: bool
) -> None:
    """``functional_call`` swaps in a parameter, buffers (one the forward then updates with a
    plain tensor), a parametrization's original and a name the module lacks: the output is the
    twin's; afterwards each original tensor is back (the same object, as on the twin), the
    swapped-in ones and the extra name are gone, and the runtime tensor the forward stored during
    the call (``head.h``, the model's, not torch's) is converted by ``.double()`` as on the
    twin."""
    auto, twin = _stateful(AutoStateful, parametrized), _stateful(TwinStateful, parametrized)
    x = torch.randn(2, 3)
    if eager_first:
        _same(auto(x), twin(x))
    before = dict(_tensors(auto))
    twin_before = dict(_tensors(twin))
    swapped = _replacements(parametrized)
    out = outcome(lambda: functional_call(auto, swapped, (x,), strict=False))
    expected = outcome(
        lambda: functional_call(twin, _replacements(parametrized), (x,), strict=False)
    )
    assert out[0] == expected[0] == "ok"
    assert isinstance(out[1], torch.Tensor)
    assert isinstance(expected[1], torch.Tensor)
    _same(out[1], expected[1])
    assert observe(auto) == observe(twin)
    kept = {key: tensor is before.get(key) for key, tensor in _tensors(auto)}
    assert kept == {key: tensor is twin_before.get(key) for key, tensor in _tensors(twin)}
    assert not {id(t) for t in swapped.values()} & {id(t) for _, t in _tensors(auto)}
    auto.double()
    twin.double()
    assert observe(auto) == observe(twin)
    _same(auto(x.double()), twin(x.double()))


@_PARAMETRIZED
def test_a_name_functional_call_adds_is_torchs_and_says_nothing_in_warn_mode(
    parametrized: bool,
) -> None:
    """A tensor ``functional_call`` stores under a name the module lacks is torch's own (row 4),
    not state the model carries: in warn mode, which reports every tensor autoreg carries, the
    call says nothing, as the twin says nothing (warnings are errors in this suite), and leaves
    what the twin's call leaves."""
    warned = type("AutoStateful", (AutoStateful,), {"__module__": __name__}, warn=True)
    with pytest.warns(autoreg.AutoRegisterWarning, match=r"AutoStateful\.running"):
        auto = _stateful(warned, parametrized)  # warn mode warns once per class and name
    twin = _stateful(TwinStateful, parametrized)
    x = torch.randn(2, 3)
    _same(auto(x), twin(x))  # h, the model's, carried (autoreg's child is not in warn mode)
    swapped = _replacements(parametrized)
    _same(
        functional_call(auto, swapped, (x,), strict=False),
        functional_call(twin, _replacements(parametrized), (x,), strict=False),
    )
    assert observe(auto) == observe(twin)


@_PARAMETRIZED
def test_vmap_of_functional_call_over_the_replays_matches_the_twin(parametrized: bool) -> None:
    """An ensemble of two (``vmap`` over ``functional_call``) whose stacked weights and buffer the
    forward updates with a batched tensor (row 3's replay under vmap): the outputs are the
    twin's, and the module afterwards holds, converts and computes what the twin's does."""
    auto, twin = _stateful(AutoStateful, parametrized), _stateful(TwinStateful, parametrized)
    x = torch.randn(2, 3)
    stacked = {
        "lin.weight": torch.stack([torch.eye(3), 2 * torch.eye(3)]),
        "running": torch.stack([torch.zeros(3), torch.ones(3)]),
    }

    def ensemble(module: nn.Module) -> torch.Tensor:
        def call(replacements: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
            result: torch.Tensor = functional_call(module, replacements, (x,))
            return result

        result: torch.Tensor = vmap(call, in_dims=(0, None))(stacked, x)
        return result

    _same(ensemble(auto), ensemble(twin))
    assert observe(auto) == observe(twin)
    _same(vmap(auto)(x.unsqueeze(1)), vmap(twin)(x.unsqueeze(1)))  # stores batched tensors
    auto.running = torch.zeros(3)  # the batched tensors escaped: reset (row 3's replay again)
    twin.running = torch.zeros(3)
    auto.head.h = torch.zeros(3)  # the carried value too
    twin.head.h = torch.zeros(3)
    auto.double()
    twin.double()
    assert observe(auto) == observe(twin)


@pytest.fixture
def module_registrations() -> Iterator[list[tuple[str, str]]]:
    """(class, name) of every module registration, through nn.Module's global hook."""
    calls: list[tuple[str, str]] = []

    def hook(module: nn.Module, name: str, submodule: nn.Module | None) -> None:
        calls.append((_class_name(type(module)), name))

    handle = register_module_module_registration_hook(hook)
    yield calls
    handle.remove()


@_PARAMETRIZED
def test_submodules_a_constructor_and_a_parametrization_assign_reach_global_hooks_as_the_twins(
    parametrized: bool, module_registrations: list[tuple[str, str]]
) -> None:
    """Row 1's replay (a module under a new name, in the constructor and the ``parametrizations``
    ModuleDict ``register_parametrization`` assigns) must go through nn.Module's registration
    while a global module registration hook is registered: the hook sees what it sees for the
    twin, and functional_call then runs as on the twin."""
    auto = _stateful(AutoStateful, parametrized)
    auto_calls = list(module_registrations)
    module_registrations.clear()
    twin = _stateful(TwinStateful, parametrized)
    assert auto_calls == module_registrations
    assert ("Stateful", "lin") in auto_calls
    assert (("ParametrizedStateful", "parametrizations") in auto_calls) is parametrized
    x = torch.randn(2, 3)
    bias = {"lin.bias": torch.ones(3)}
    _same(functional_call(auto, bias, (x,)), functional_call(twin, bias, (x,)))
    assert observe(auto) == observe(twin)


# --- 3. torch.compile of a parametrized child under a plain root ------------------------------


@pytest.fixture
def fresh_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _compiled_run(
    root: nn.Module,
    eager_first: bool,
    call: Callable[[nn.Module, torch.Tensor], torch.Tensor] | None = None,
) -> tuple[int, list[torch.Tensor]]:
    """Frames dynamo compiles (eager backend, ``fullgraph``, from a reset) for three compiled
    calls of ``root`` (or of ``call(root, x)``), then ``.double()`` of it and two more; with
    ``eager_first``, one eager call before them."""
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("eager")
    function = call if call is not None else lambda module, x: module(x)
    compiled = torch.compile(function, backend=counter, fullgraph=True)
    inputs = [torch.full((2, 3), float(i)) for i in range(3)]
    outputs = [function(root, inputs[0])] if eager_first else []
    outputs += [compiled(root, x) for x in inputs]
    root.double()
    outputs += [compiled(root, x.double()) for x in inputs[:2]]
    return int(counter.frame_count), outputs


@pytest.mark.usefixtures("fresh_dynamo")
@pytest.mark.parametrize(
    ("root", "children", "utility"),
    [
        ("Sequential", "direct", "register_parametrization"),
        ("wrapper", "direct", "register_parametrization"),
        ("Sequential", "setattr base", "register_parametrization"),
        ("Sequential", "direct", "weight_norm"),
    ],
)
@_EAGER_FIRST
def test_a_compiled_plain_root_over_parametrized_children_compiles_as_the_twin(
    root: str, children: str, utility: str, eager_first: bool
) -> None:
    """The forward of parametrized autoreg children (each stores its carried ``h``) under a plain
    root, compiled: as many frames as the twin's, the same outputs, and afterwards the same
    state, which ``.double()`` converts as on the twin."""
    auto, twin = _pair(root, children)
    for module in (auto, twin):
        _apply_utility(module, utility)
    twin_frames, twin_outputs = _compiled_run(twin, eager_first)
    auto_frames, auto_outputs = _compiled_run(auto, eager_first)
    assert auto_frames == twin_frames
    for a, t in zip(auto_outputs, twin_outputs, strict=True):
        _same(a, t)
    assert observe(auto) == observe(twin)  # float64, h included
    auto.float()
    twin.float()
    assert observe(auto) == observe(twin)


def _between_calls(root: nn.Module, step: int) -> None:
    """Step ``step`` of a round of class changes on the root's first child: parametrized, its
    class swapped for a plain subclass and back, the parametrization removed, its carried ``h``
    set to None, then deleted."""
    child = _children(root)[0]
    if step == 0:
        parametrize.register_parametrization(child, "weight", Double())
    elif step == 1:
        cls = type(child)
        child.__class__ = type(f"Swapped{cls.__name__}", (cls,), {"__module__": __name__})
    elif step == 2:
        child.__class__ = type(child).__bases__[0]
    elif step == 3:
        parametrize.remove_parametrizations(child, "weight")
    elif step == 4:
        child.h = None
    elif step == 5:
        del child.h


@pytest.mark.usefixtures("fresh_dynamo")
@_CHILD_IDS
def test_class_swaps_and_parametrizations_between_compiled_calls_recompile_as_the_twin(
    children: str,
) -> None:
    """Between compiled calls (``fullgraph``) of a plain root, its child is parametrized, given a
    plain subclass and its class back, unparametrized, its carried value set to None and deleted
    (each forward stores it again): as many frames as the twin's, the same outputs and state."""

    def run(root: nn.Module) -> tuple[int, list[torch.Tensor], dict[str, Any]]:
        torch._dynamo.reset()
        counter = CompileCounterWithBackend("eager")
        compiled = torch.compile(root, backend=counter, fullgraph=True)
        outputs = []
        for step in range(7):
            outputs.append(compiled(torch.full((2, 3), float(step))))
            _between_calls(root, step)
        return int(counter.frame_count), outputs, observe(root)

    auto, twin = _pair("Sequential", children)
    auto_frames, auto_outputs, auto_state = run(auto)
    twin_frames, twin_outputs, twin_state = run(twin)
    assert auto_frames == twin_frames
    for a, t in zip(auto_outputs, twin_outputs, strict=True):
        _same(a, t)
    assert auto_state == twin_state


def _functional(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The module called with its ``running`` buffer swapped by ``functional_call``."""
    running = torch.full((3,), 2.0, dtype=x.dtype)
    out: torch.Tensor = functional_call(module, {"running": running}, (x,))
    return out


@pytest.mark.usefixtures("fresh_dynamo")
@_PARAMETRIZED
@_EAGER_FIRST
@pytest.mark.parametrize("called", ["directly", "through functional_call"])
def test_a_compiled_forward_updating_a_buffer_of_a_parametrized_module_compiles_as_the_twin(
    parametrized: bool, eager_first: bool, called: str
) -> None:
    """The forward updates buffer ``running`` with a plain tensor (row 3's replay) in a module
    built with submodules (row 1's) and parametrized (row 12's), compiled with ``fullgraph``,
    directly or through ``functional_call``: as many frames as the twin's, the same outputs,
    before and after ``.double()``, and the same state afterwards."""
    auto, twin = _stateful(AutoStateful, parametrized), _stateful(TwinStateful, parametrized)
    call = _functional if called == "through functional_call" else None
    twin_frames, twin_outputs = _compiled_run(twin, eager_first, call)
    auto_frames, auto_outputs = _compiled_run(auto, eager_first, call)
    assert auto_frames == twin_frames
    for a, t in zip(auto_outputs, twin_outputs, strict=True):
        _same(a, t)
    assert observe(auto) == observe(twin)


# --- 4. cloudpickle, into a fresh process -----------------------------------------------------

_CLASSES = '''
import torch
from torch import nn
import autoreg


class Base(nn.Module):
    """A base with a __setattr__ of its own, which records class swaps."""

    def __setattr__(self, name, value):
        if name == "__class__":
            self.__dict__.setdefault("class_history", []).append(value.__name__)
        super().__setattr__(name, value)


def forward(self, x):
    self.h = x.detach().sum(0)
    return nn.functional.linear(x, self.weight, self.bias) * self.mask


class Auto(autoreg.AutoRegisterMixin, Base, nn.Linear):
    forward = forward

    def __init__(self):
        super().__init__(3, 3)
        self.mask = torch.linspace(0.5, 1.5, 3)


class Twin(Base, nn.Linear):
    forward = forward

    def __init__(self):
        super().__init__(3, 3)
        self.register_buffer("mask", torch.linspace(0.5, 1.5, 3), persistent=False)

    def _apply(self, fn, recurse=True):
        result = super()._apply(fn, recurse)
        if isinstance(self.__dict__.get("h"), torch.Tensor):
            self.__dict__["h"] = fn(self.__dict__["h"])
        return result
'''

_DUMP = """
import sys
import cloudpickle
import torch
from torch.nn.utils import parametrize, prune


class Double(torch.nn.Module):
    def forward(self, x):
        return x * 2


def dumped(cls, utility):
    torch.manual_seed(0)
    module = cls()
    module(torch.ones(2, 3))  # h: carried on Auto, the Twin's by hand
    if utility == "prune":
        prune.l1_unstructured(module, "weight", amount=0.5)
    else:  # torch refuses to pickle a parametrized module: the test expects its refusal
        parametrize.register_parametrization(module, "weight", Double())
    try:
        return cloudpickle.dumps(module)
    except Exception as error:
        return cloudpickle.dumps(type(error).__name__)


out, utility = sys.argv[1], sys.argv[2]
with open(out, "wb") as file:
    cloudpickle.dump((dumped(Auto, utility), dumped(Twin, utility)), file)
"""

_LOAD = """
import json, pickle, sys
import torch

with open(sys.argv[1], "rb") as file:
    pair = pickle.load(file)
seen = []
for dumped in pair:
    module = pickle.loads(dumped)
    if isinstance(module, str):
        seen.append(module)
        continue
    described = {}
    module.double()
    for key, registry in (("parameter", module._parameters), ("buffer", module._buffers)):
        for name, tensor in registry.items():
            described[key + ":" + name] = [str(tensor.dtype), tensor.tolist()]
    for name, value in vars(module).items():
        if isinstance(value, torch.Tensor):
            described["plain:" + name] = [str(value.dtype), value.tolist()]
    out = module(torch.ones(2, 3, dtype=torch.float64))
    seen.append({
        "tensors": described,
        "state_dict": list(module.state_dict()),
        "named_buffers": [name for name, _ in module.named_buffers()],
        "class_history": module.__dict__.get("class_history", []),
        "class": type(module).__name__.replace("Auto", "").replace("Twin", ""),
        "output": [str(out.dtype), out.tolist()],
    })
print(json.dumps(seen))
"""


def _environment() -> dict[str, str]:
    """The environment of a subprocess that imports this checkout's autoreg from anywhere."""
    root = str(Path(autoreg.__file__).resolve().parents[1])
    path = os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])])
    return {**os.environ, "PYTHONPATH": path, "AUTOREG_MODE": ""}


def _python(*args: str, cwd: Path) -> str:
    done = subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        env=_environment(),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.parametrize(
    ("defined", "utility"),
    [
        ("__main__", "prune"),
        ("register_pickle_by_value", "prune"),
        ("__main__", "register_parametrization"),  # refused by torch: once is enough
    ],
)
def test_a_script_class_pickled_by_cloudpickle_converts_in_a_fresh_process_as_the_twin(
    tmp_path: Path, defined: str, utility: str
) -> None:
    """A script's autoreg class (in its ``__main__``, or in a module of the script's registered
    with ``cloudpickle.register_pickle_by_value``), whose instance carries a runtime tensor and is
    pruned (its derived ``weight`` a plain attribute, row 6) or parametrized: dumped by a
    subprocess, loaded by a fresh one that has neither the script nor the module (the class comes
    by value), then ``.double()``: it holds, converts, saves and computes what the twin does; the
    parametrized instance is refused by torch on both alike. (tests/integrations/test_cloudpickle
    pickles classes made in a function, never pruned or parametrized.)"""
    pytest.importorskip("cloudpickle")
    script = tmp_path / "script.py"
    if defined == "__main__":
        script.write_text(_CLASSES + _DUMP)
    else:
        (tmp_path / "replay_models.py").write_text(_CLASSES)
        script.write_text(
            "import cloudpickle\nimport replay_models\n"
            "cloudpickle.register_pickle_by_value(replay_models)\n"
            "from replay_models import Auto, Twin\n" + _DUMP
        )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    pickled = tmp_path / "pair.pkl"
    _python(str(script), str(pickled), utility, cwd=tmp_path)
    auto, twin = json.loads(_python("-c", _LOAD, str(pickled), cwd=elsewhere).splitlines()[-1])
    assert auto == twin
    if utility == "prune":
        assert auto["tensors"]["plain:h"][0] == "torch.float64"
    else:
        assert auto == "RuntimeError"


# --- 5. a differential fuzzer -----------------------------------------------------------------

NAMES = ("a", "b", "weight")


def _build_subject(module: nn.Module, built: tuple[str, ...]) -> None:
    module.weight = nn.Parameter(torch.ones(2))
    for index, name in enumerate(built):
        setattr(module, name, torch.full((2,), float(index)))  # built: a buffer (row 10)


class AutoSubject(autoreg.Module):
    def __init__(self, built: tuple[str, ...]) -> None:
        super().__init__()
        _build_subject(self, built)


class AutoHistorySubject(autoreg.AutoRegisterMixin, ClassHistory):
    def __init__(self, built: tuple[str, ...]) -> None:
        super().__init__()
        _build_subject(self, built)


class TwinSubject(ByHand):
    """What the contract says ``AutoSubject`` is: constructor tensors non-persistent buffers,
    runtime tensors under a name no registry or class attribute holds plain attributes that
    ``_apply`` converts (``carried``, by hand)."""

    def __init__(self, built: tuple[str, ...]) -> None:
        super().__init__()
        self.carried: set[str] = set()
        self.weight = nn.Parameter(torch.ones(2))
        for index, name in enumerate(built):
            self.register_buffer(name, torch.full((2,), float(index)), persistent=False)

    def carried_names(self) -> Iterable[str]:
        return self.carried


class TwinHistorySubject(TwinSubject, ClassHistory):
    pass


SUBJECTS = {
    "direct": (AutoSubject, TwinSubject),
    "setattr base": (AutoHistorySubject, TwinHistorySubject),
}


def _derived(module: nn.Module, name: str) -> bool:
    """Whether prune's hook on ``module`` derives the weight ``name`` (row 6)."""
    return any(
        isinstance(hook, prune.BasePruningMethod) and hook._tensor_name == name
        for hook in module._forward_pre_hooks.values()
    )


def _twin_store(twin: TwinSubject, name: str, value: object) -> None:
    """A runtime store on the twin, as the contract says autoreg stores it."""
    registered = name in twin._parameters or name in twin._buffers or name in twin._modules
    setattr(twin, name, value)  # nn.Module's: rows 3, 6, 7 (a parametrization's property), 12
    if (
        not registered
        and not hasattr(type(twin), name)
        and not _derived(twin, name)
        and isinstance(vars(twin).get(name), torch.Tensor)  # not a parameter, stored plain
    ):
        twin.carried.add(name)  # row 11
    else:
        twin.carried.discard(name)  # a parameter, module or None now holds the name


def _twin_delete(twin: TwinSubject, name: str) -> None:
    delattr(twin, name)
    twin.carried.discard(name)


Op = tuple[Any, ...]


def _run(module: nn.Module, op: Op, twin: bool) -> nn.Module:
    """Carry out ``op`` on ``module`` (the twin's way where ``twin``); the module to go on with."""
    verb = op[0]
    if verb == "store":
        value = torch.full((2,), float(op[2]))
        if twin:
            _twin_store(module, op[1], value)  # type: ignore[arg-type]
        else:
            setattr(module, op[1], value)
    elif verb == "alias":  # the tensor held under one name stored under another
        value = getattr(module, op[1])
        if twin:
            _twin_store(module, op[2], value)  # type: ignore[arg-type]
        else:
            setattr(module, op[2], value)
    elif verb == "none":
        if twin:
            _twin_store(module, op[1], None)  # type: ignore[arg-type]
        else:
            setattr(module, op[1], None)
    elif verb == "delete":
        if twin:
            _twin_delete(module, op[1])  # type: ignore[arg-type]
        else:
            delattr(module, op[1])
    elif verb == "swap":  # a plain subclass, as torch's parametrizations make
        cls = type(module)
        module.__class__ = type(f"Swapped{cls.__name__}", (cls,), {"__module__": __name__})
    elif verb == "unswap":
        if type(module).__name__.startswith("Swapped"):
            module.__class__ = type(module).__bases__[0]
    elif verb == "parametrize":
        parametrize.register_parametrization(module, op[1], Double())
    elif verb == "unparametrize":  # the op[1]-th name parametrized now, if any
        names = sorted(getattr(module, "parametrizations", {}))
        name = names[op[1] % len(names)] if names else "weight"
        parametrize.remove_parametrizations(module, name, leave_parametrized=op[2])
    elif verb == "prune":  # a derived weight written by torch (row 6): a plain attribute
        prune.l1_unstructured(module, op[1], amount=0.5)
    elif verb == "unprune":
        prune.remove(module, op[1])
    elif verb == "move":
        module.to(op[1])
    elif verb == "deepcopy":
        return copy.deepcopy(module)
    return module


_OPS = st.one_of(
    st.tuples(st.just("store"), st.sampled_from(NAMES), st.integers(-3, 3)),
    st.tuples(st.just("alias"), st.sampled_from(NAMES), st.sampled_from(NAMES)),
    st.tuples(st.sampled_from(["none", "delete", "parametrize"]), st.sampled_from(NAMES)),
    st.tuples(st.just("unparametrize"), st.integers(0, 2), st.booleans()),
    st.tuples(st.sampled_from(["prune", "unprune"]), st.sampled_from(NAMES)),
    st.tuples(st.sampled_from(["swap", "unswap", "deepcopy"])),
    st.tuples(st.just("move"), st.sampled_from([torch.float64, torch.float32])),
)


@settings(
    max_examples=1000,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    subject=st.sampled_from(list(SUBJECTS)),
    built=st.lists(st.sampled_from(("a", "b")), unique=True).map(tuple),
    ops=st.lists(_OPS, max_size=20),
)
@example(  # one tensor carried under two names: converted once, one tensor (contract.md)
    subject="direct",
    built=(),
    ops=[("store", "a", 1), ("alias", "a", "b"), ("move", torch.float64)],
)
@example(  # a built buffer parametrized inside a swapped class, then left, moved and copied
    subject="setattr base",
    built=("a",),
    ops=[
        ("swap",),
        ("parametrize", "a"),
        ("store", "b", 2),
        ("unparametrize", 0, False),
        ("move", torch.float64),
        ("deepcopy",),
        ("unswap",),
        ("store", "a", 3),
        ("move", torch.float32),
    ],
)
def test_random_operations_with_parametrizations_and_class_swaps_match_the_twin(
    subject: str, built: tuple[str, ...], ops: list[Op]
) -> None:
    """Random sequences of runtime stores (over buffers, carried names, parameters, a
    parametrized name's property), aliases, ``None``, ``del``, class swaps to a plain subclass and
    back, parametrizations registered and removed (both ways), prune and ``prune.remove``,
    ``.double()``/``.float()`` and deepcopies, on an autoreg module built with some tensors (on
    ``autoreg.Module``, or past a base's ``__setattr__``) and on its twin: each step raises (the
    exception's type) or not as on the twin, and leaves what the twin's leaves.
    (test_model_based checks the contract's rows against a reference model, without
    parametrizations or class swaps.)"""
    auto_cls, twin_cls = SUBJECTS[subject]
    auto: nn.Module = auto_cls(built)
    twin: nn.Module = twin_cls(built)
    assert observe(auto) == observe(twin)
    for op in ops:
        auto_result = outcome(_run, auto, op, False)
        twin_result = outcome(_run, twin, op, True)
        assert auto_result[0] == twin_result[0], (op, auto_result, twin_result)
        if auto_result[0] == "ok":
            auto, twin = auto_result[1], twin_result[1]  # type: ignore[assignment]
        else:
            assert auto_result == twin_result, op
        assert observe(auto) == observe(twin), op
