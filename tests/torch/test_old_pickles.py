"""Old pickles: a whole model saved while its class subclassed nn.Module, loaded after it moved
to ``autoreg.Module``.

Many projects ship checkpoints as ``torch.save(model)``. Unpickling restores the instance's
``__dict__`` under the class of today, so the plain tensors the old code left in attributes come
back as plain attributes: on main they stayed behind on ``.to()``, also after ``deepcopy``. The
rule (README, contract): on unpickling state that has no autoreg record, plain tensors that do not
require grad, and list / tuple / dict attributes holding tensors, become carried - never buffers,
so ``state_dict()`` does not change.

The class change is simulated: the instance is pickled while this module's name ``Model`` is the
nn.Module class, and loaded after the name is rebound to the autoreg class of the same body.
"""

from __future__ import annotations

import copy
import io
import sys
from collections.abc import Callable

import pytest
import torch
from torch import nn

import autoreg
from tests.support import role


def _build(module: nn.Module) -> None:
    """The body both versions of the class share."""
    module.lin = nn.Linear(3, 3)
    module.register_buffer("stats", torch.arange(3.0))  # persistent: in the checkpoint
    module.mask = torch.tensor([1.0, 0.0, 1.0])  # what the old code left in an attribute
    module.anchors = [torch.zeros(2), torch.ones(2, dtype=torch.long)]
    module.table = {"scale": torch.full((1,), 2.0)}
    module.temperature = torch.ones((), requires_grad=True)  # a grad tensor: never moved
    module.steps = 3


class Model(nn.Module):
    """The class as it was when the model was saved."""

    def __init__(self) -> None:
        super().__init__()
        _build(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) * self.mask * self.table["scale"] + self.stats


class MigratedModel(autoreg.Module):
    """The same class after the migration (``nn.Module`` -> ``autoreg.Module``)."""

    forward = Model.forward

    def __init__(self) -> None:
        super().__init__()
        _build(self)


@pytest.fixture
def saved() -> tuple[Model, bytes]:
    """A trained-looking nn.Module model, and the bytes of ``torch.save(model)``."""
    torch.manual_seed(0)
    model = Model()
    with torch.no_grad():
        model.stats.add_(0.5)
    buffer = io.BytesIO()
    torch.save(model, buffer)
    return model, buffer.getvalue()


def _load_after_migration(data: bytes, monkeypatch: pytest.MonkeyPatch) -> nn.Module:
    monkeypatch.setattr(sys.modules[__name__], "Model", MigratedModel)
    loaded = torch.load(io.BytesIO(data), weights_only=False)
    assert type(loaded) is MigratedModel
    return loaded


COPIES: dict[str, Callable[[nn.Module], nn.Module]] = {
    "loaded": lambda module: module,
    "deepcopy": copy.deepcopy,
}


@pytest.mark.parametrize("copy_of", COPIES.values(), ids=COPIES.keys())
def test_an_old_pickles_plain_tensors_and_containers_move(
    saved: tuple[Model, bytes],
    monkeypatch: pytest.MonkeyPatch,
    copy_of: Callable[[nn.Module], nn.Module],
) -> None:
    original, data = saved
    model = copy_of(_load_after_migration(data, monkeypatch))

    model.to(torch.float64)

    assert model.mask.dtype == torch.float64  # main: float32, left behind
    assert model.anchors[0].dtype == torch.float64
    assert model.anchors[1].dtype == torch.long  # integer tensors keep their dtype, as buffers do
    assert model.table["scale"].dtype == torch.float64
    assert model.temperature.dtype == torch.float32  # requires grad: not autoreg's to move
    assert model.steps == 3
    x = torch.randn(2, 3, dtype=torch.float64)
    torch.testing.assert_close(model(x), original.double()(x), rtol=0, atol=0)


def test_an_old_pickles_state_dict_does_not_change(
    saved: tuple[Model, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    original, data = saved
    expected = original.state_dict()

    model = _load_after_migration(data, monkeypatch)

    state = model.state_dict()
    assert list(state) == list(expected)
    for key, value in expected.items():
        assert torch.equal(state[key], value), key
    assert [name for name, _ in model.named_buffers()] == ["stats"]  # adopted tensors: no buffers
    # main: mask, anchors[0], anchors[1] and table['scale'] are reported too
    assert [f.path for f in autoreg.find_unregistered(model)] == ["temperature"]


def test_the_twin_leaves_the_old_pickles_tensors_behind(saved: tuple[Model, bytes]) -> None:
    """The same bytes loaded under the nn.Module class: .to() leaves them, autoreg does better."""
    _, data = saved
    model = torch.load(io.BytesIO(data), weights_only=False)

    model.to(torch.float64)

    assert type(model) is Model
    assert model.mask.dtype == model.anchors[0].dtype == torch.float32
    assert [f.path for f in autoreg.find_unregistered(model)] == [
        "mask",
        "anchors[0]",
        "anchors[1]",
        "table['scale']",
        "temperature",
    ]


def test_an_adopted_model_keeps_autoregs_contract_for_new_assignments(
    saved: tuple[Model, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    model = _load_after_migration(saved[1], monkeypatch)

    model.cache = torch.zeros(2)  # runtime state: carried
    model.mask = 1  # a non-tensor for an adopted name: a plain attribute again
    model.to(torch.float64)

    assert model.cache.dtype == torch.float64
    assert model.mask == 1
    assert [name for name, _ in model.named_buffers()] == ["stats"]


def test_a_pickle_of_an_earlier_autoreg_moves_what_it_carries() -> None:
    """Earlier development versions of 0.1 kept the names an instance carried as a frozenset;
    such a pickle loads, and ``.to()`` converts what it carries."""
    model = Carrier()
    model.state = torch.zeros(2)  # carried
    state = model.__getstate__()
    state["_autoreg_carrying"] = frozenset(state["_autoreg_carrying"])  # as pickled then
    loaded = Carrier.__new__(Carrier)
    loaded.__setstate__(state)  # what unpickling does
    loaded.double()
    assert loaded.state.dtype == torch.float64
    loaded.later = torch.zeros(1)  # carried from now on too
    loaded.float()
    assert loaded.later.dtype == torch.float32
    assert loaded.state.dtype == torch.float32


class Carrier(autoreg.Module):
    pass


# --- the declarations the class has when a pickle is loaded win (issue 29, item 17) ------------


def _save_then_load(
    saved_as: type[nn.Module],
    loaded_as: type[nn.Module],
    monkeypatch: pytest.MonkeyPatch,
    run: bool = True,
) -> nn.Module:
    monkeypatch.setattr(sys.modules[__name__], "Versioned", saved_as)
    module = saved_as()
    if run:
        module()
    buffer = io.BytesIO()
    torch.save(module, buffer)
    monkeypatch.setattr(sys.modules[__name__], "Versioned", loaded_as)
    loaded: nn.Module = torch.load(io.BytesIO(buffer.getvalue()), weights_only=False)
    assert type(loaded) is loaded_as
    return loaded


def _version(base: type[nn.Module], annotations: dict[str, object]) -> type[nn.Module]:
    """The class ``Versioned``: a mask built in __init__, a state stored in forward, a buffer
    registered by hand; ``annotations`` are the declarations of this version."""

    def build(self: nn.Module) -> None:
        base.__init__(self)
        self.mask = torch.ones(2)
        self.register_buffer("by_hand", torch.zeros(2), persistent=False)

    def forward(self: nn.Module) -> None:
        self.state = torch.zeros(2)

    namespace = {
        "__module__": __name__,
        "__qualname__": "Versioned",
        "__annotations__": annotations,
        "__init__": build,
        "forward": forward,
    }
    return type("Versioned", (base,), namespace)


Versioned: type[nn.Module] = nn.Module  # rebound by _save_then_load


def _roles(module: nn.Module) -> dict[str, str]:
    return {name: role(module, name) for name in ("mask", "state", "by_hand")}


BUFFER_DECLARATIONS = pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        (torch.Tensor, "non-persistent buffer"),
        (autoreg.Persistent, "persistent buffer"),
        (autoreg.NonPersistent, "non-persistent buffer"),
    ],
    ids=["Tensor", "Persistent", "NonPersistent"],
)


@BUFFER_DECLARATIONS
def test_a_pickle_from_before_autoreg_loads_a_name_declared_since_as_a_buffer(
    annotation: object, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The migration guide's step 3 after step 1: main adopted an undeclared mask (carried),
    but left a declared one a plain attribute that .to() leaves behind."""
    declared = {"mask": annotation, "state": annotation}
    loaded = _save_then_load(
        _version(nn.Module, {}), _version(autoreg.Module, declared), monkeypatch
    )
    assert _roles(loaded) == {
        "mask": expected,
        "state": expected,
        "by_hand": "non-persistent buffer",
    }
    loaded.double()
    assert loaded.mask.dtype == loaded.state.dtype == torch.float64


@BUFFER_DECLARATIONS
def test_an_autoreg_pickle_loads_a_name_declared_since_as_the_declaration_says(
    annotation: object, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Saved undeclared: mask a non-persistent buffer autoreg registered, state carried. main
    kept both as they were; the declaration the class has now wins."""
    declared = {"mask": annotation, "state": annotation, "by_hand": autoreg.Persistent}
    saved_as = _version(autoreg.Module, {})
    loaded = _save_then_load(saved_as, _version(autoreg.Module, declared), monkeypatch)
    # by_hand was registered by hand: explicit, whatever the class declares now (row 3)
    assert _roles(loaded) == {
        "mask": expected,
        "state": expected,
        "by_hand": "non-persistent buffer",
    }
    loaded.double()
    assert loaded.mask.dtype == loaded.state.dtype == torch.float64
    with pytest.raises(TypeError, match=r"cannot assign 'str' as buffer 'mask'"):
        loaded.mask = "released"  # declared: a promise, row 2 no longer applies


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [(autoreg.Carried, "carried"), (autoreg.Plain, "plain")],
    ids=["Carried", "Plain"],
)
@pytest.mark.parametrize("saved_by", ["nn.Module", "autoreg"])
def test_a_name_declared_carried_or_plain_since_is_loaded_so(
    annotation: object, expected: str, saved_by: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = nn.Module if saved_by == "nn.Module" else autoreg.Module
    declared = {"mask": annotation, "state": annotation}
    loaded = _save_then_load(_version(base, {}), _version(autoreg.Module, declared), monkeypatch)
    assert _roles(loaded) == {
        "mask": expected,
        "state": expected,
        "by_hand": "non-persistent buffer",
    }
    assert list(loaded.state_dict()) == []


def test_a_model_saved_and_loaded_under_the_same_class_is_unchanged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cls = _version(autoreg.Module, {"state": autoreg.Persistent})
    loaded = _save_then_load(cls, cls, monkeypatch)
    assert _roles(loaded) == {
        "mask": "non-persistent buffer",
        "state": "persistent buffer",
        "by_hand": "non-persistent buffer",
    }
