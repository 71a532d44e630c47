"""Property 3: nothing autoreg keeps holds a module or a class alive.

torch's parametrizations (``weight_norm``, ``spectral_norm``, ``register_parametrization``) give
each instance a class of its own whose properties refer back to it; a cache keyed by class, outside
the class, kept every such instance alive, and every class defined in a function. What autoreg
knows about a class lives on the class.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable

import pytest
import torch
from torch import nn
from torch.nn.utils import parametrizations, parametrize

import autoreg


class Conv(autoreg.AutoRegisterMixin, nn.Conv1d):
    pass


class Doubled(nn.Module):
    def forward(self, weight: torch.Tensor) -> torch.Tensor:
        return weight * 2


def _local_class() -> nn.Module:
    class Local(autoreg.AutoRegisterMixin, nn.Linear):  # a class with a framework base
        def __init__(self) -> None:
            super().__init__(3, 3)
            self.table = torch.ones(2)
            self.history = [torch.zeros(1)]

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.state = super().forward(x)
            return self.state

    return Local()


BUILDS: dict[str, Callable[[], nn.Module]] = {
    "weight_norm": lambda: parametrizations.weight_norm(Conv(2, 2, 1)),
    "spectral_norm": lambda: parametrizations.spectral_norm(Conv(2, 2, 1)),
    "register_parametrization": lambda: parametrize.register_parametrization(
        Conv(2, 2, 1), "weight", Doubled()
    ),
    "local class": _local_class,
}


@pytest.mark.parametrize("build", list(BUILDS.values()), ids=list(BUILDS))
def test_property_3_no_instance_outlives_its_last_reference(build: Callable[[], nn.Module]) -> None:
    refs: list[weakref.ref[object]] = []
    for _ in range(100):
        module = build()
        module(torch.ones(1, 2, 3) if isinstance(module, nn.Conv1d) else torch.ones(1, 3))
        module.double()
        refs += [weakref.ref(module), weakref.ref(type(module))]
        del module
    gc.collect()
    assert sum(ref() is not None for ref in refs) == 0


class Growing(autoreg.Module):
    pass


def test_a_model_that_makes_up_names_does_not_grow_its_class_or_instance_without_end() -> None:
    """Names made up at run time (``cache_{step}``): the class's caches stop at CACHE_LIMIT, and
    a name deleted at each step leaves the instance's list of carried names and its role's key
    soon after; every assignment past the limit is still decided and carried out as the first
    ones were."""
    from autoreg._record import CACHE_LIMIT
    from autoreg._state import CARRYING

    model = Growing()
    names = [f"cache_{step}" for step in range(CACHE_LIMIT + 500)]
    for name in names:
        setattr(model, name, torch.zeros(1))
    record = type(model).__autoreg__
    assert max(len(record.decisions), len(record.slots), len(record.role_keys)) <= CACHE_LIMIT
    model.double()
    assert all(getattr(model, name).dtype == torch.float64 for name in names)  # all carried
    for name in names:
        delattr(model, name)
    model.last = torch.zeros(1)
    for step in range(CACHE_LIMIT):  # a name made up and deleted at each step
        setattr(model, f"step_{step}", torch.zeros(1))
        delattr(model, f"step_{step}")
    assert len(model.__dict__[CARRYING]) <= 32
    assert len([k for k in vars(model) if k.startswith("_autoreg_role")]) <= 32
    model.double()
    assert model.last.dtype == torch.float64


class GrowingLinear(autoreg.AutoRegisterMixin, nn.Linear):
    """A class with a framework base: autoreg keeps a role for each name it is assigned (row 4)."""


def _forget_by_del(module: nn.Module, name: str) -> None:
    delattr(module, name)


def _forget_by_pop(module: nn.Module, name: str) -> None:
    module.__dict__.pop(name)  # around __delattr__: a cache cleared in place


@pytest.mark.parametrize(
    ("cls", "twin_cls"),
    [(Growing, nn.Module), (GrowingLinear, nn.Linear)],
    ids=["module", "framework base"],
)
@pytest.mark.parametrize("forget", [_forget_by_del, _forget_by_pop], ids=["del", "dict pop"])
def test_thousands_of_live_modules_that_make_up_and_forget_names_stay_bounded(
    cls: type[nn.Module], twin_cls: type[nn.Module], forget: Callable[[nn.Module, str], None]
) -> None:
    """A thousand live modules, each storing a tensor under a new name at every step and
    forgetting it (``del``, or ``__dict__.pop`` around autoreg), and a number too when it is
    deleted: each keeps a bounded ``__dict__`` (within a constant of its twin's), ``.to()``
    converts exactly the tensors they carry at the end, and every tensor forgotten is freed. On a
    class with a framework base the deleted numbers' roles stayed, one key per name made up (1,000
    keys per module after a thousand steps); tensors forgotten with ``__dict__.pop`` stayed in
    the list of carried names, which ``.to()`` walks, their roles with them. (A number popped
    around autoreg on a class with a framework base keeps its role: design.md's limits.)"""
    size = (2, 2) if cls is GrowingLinear else ()
    modules = [cls(*size) for _ in range(1000)]
    twin = twin_cls(*size)
    freed: list[weakref.ref[torch.Tensor]] = []
    for step in range(60):
        for module in [*modules, twin]:
            tensor = torch.zeros(1)
            freed.append(weakref.ref(tensor))
            setattr(module, f"made_{step}", tensor)  # run time: carried
            forget(module, f"made_{step}")
            if forget is _forget_by_del:  # (see the docstring)
                setattr(module, f"count_{step}", step)
                delattr(module, f"count_{step}")
            del tensor
        for module in modules[::7]:
            module.state = torch.full((1,), float(step))  # updated now and then
    gc.collect()
    assert not [ref for ref in freed if ref() is not None]
    assert max(len(vars(module)) for module in modules) <= len(vars(twin)) + 40
    root = nn.ModuleList(modules)
    registered = {id(t) for t in [*root.parameters(), *root.buffers()]}
    carried = {id(module.state) for module in modules[::7]}
    seen: list[int] = []

    def record(tensor: torch.Tensor) -> torch.Tensor:
        seen.append(id(tensor))
        return tensor

    root._apply(record)
    assert sorted(seen) == sorted(registered | carried)


class _Refusing(autoreg.Module):
    def __init__(self, table: torch.Tensor, n: int) -> None:
        self.table = table  # before nn.Module.__init__: waits to be registered
        if n <= 0:
            raise ValueError("n must be positive")  # a check before super().__init__()
        super().__init__()


@pytest.mark.parametrize("n", [0, 1], ids=["raises", "built"])
def test_a_tensor_assigned_before_module_init_is_freed_with_its_module(n: int) -> None:
    """Without the cyclic garbage collector, as a plain attribute on the twin: what waits for
    ``nn.Module.__init__`` held its module (a cycle), so a construction that raised before it
    kept the tensor (device memory, on a GPU) until the collector ran."""
    gc.collect()
    gc.disable()
    try:
        table = torch.ones(8)
        alive = weakref.ref(table)
        try:
            module = _Refusing(table, n)
        except ValueError:
            pass
        else:
            assert "table" in dict(module.named_buffers())
            del module
        del table
        assert alive() is None
    finally:
        gc.enable()
