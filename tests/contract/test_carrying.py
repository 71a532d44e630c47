""".to() of what autoreg carries: it costs its own tree, never fails where nn.Module completes.

Property 2: the work of one ``.to()`` follows the tree it converts, never the modules alive
elsewhere, and nothing that happened elsewhere in the process changes what it moves. Property 7:
what autoreg cannot convert it leaves as nn.Module would; a model is never left half-converted.
"""

from __future__ import annotations

import warnings
import weakref
from typing import Any

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence

import autoreg
from tests.support import role


class Probe(list):  # type: ignore[type-arg]
    """A list that counts how often anything iterates over it."""

    reads = 0

    def __iter__(self) -> Any:
        Probe.reads += 1
        return super().__iter__()


class Layer(autoreg.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.table = torch.ones(2)  # a buffer
        self.history: list[torch.Tensor] = []  # a carried list


def test_property_2_a_to_never_looks_at_modules_outside_its_tree() -> None:
    """Moving one layer while many others carry values: none of theirs is looked at (each once
    made every .to() gather the carried values of every live carrier in the process)."""
    others = [Layer() for _ in range(50)]
    for other in others:
        other.history = Probe([torch.zeros(1)])
    layer = Layer()
    layer.history.append(torch.zeros(1))
    Probe.reads = 0
    layer.to(torch.float64)
    assert Probe.reads == 0
    assert layer.history[0].dtype == torch.float64
    assert all(other.history[0].dtype == torch.float32 for other in others)


class Keeper(nn.Module):
    """Keeps an EMA copy of a layer outside its children, converted by its own _apply."""

    def __init__(self) -> None:
        super().__init__()
        self.__dict__["ema"] = Layer()  # not a submodule: .to() does not recurse into it

    def _apply(self, fn: Any, recurse: bool = True) -> Any:
        self.ema._apply(fn)
        return super()._apply(fn, recurse)


class Shadowed(autoreg.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.keeper = Keeper()


def test_property_2_what_a_to_moves_does_not_depend_on_what_happened_elsewhere() -> None:
    """A compiled forward that stored runtime state elsewhere in the process once switched every
    later .to() to a mode that skipped the carried values of a module reached by an _apply
    override (an EMA shadow)."""

    class Elsewhere(autoreg.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.cache = x * 2
            return self.cache

    torch._dynamo.reset()
    torch.compile(Elsewhere(), backend="eager", fullgraph=True)(torch.ones(2))
    torch._dynamo.reset()

    model = Shadowed()
    ema = model.keeper.ema
    ema.state = torch.zeros(2)  # runtime state of the shadow
    model.to(torch.float64)
    assert ema.state.dtype == torch.float64
    assert ema.table.dtype == torch.float64


def test_aliases_keep_their_identity_within_one_to() -> None:
    parent = Layer()
    parent.child = Layer()
    parent.child.view = parent.table  # a carried alias of the parent's buffer
    parent.child.history = [parent.table, parent.child.table]
    parent.to(torch.float64)
    assert parent.child.view is parent.table
    assert parent.child.history[0] is parent.table
    assert parent.child.history[1] is parent.child.table


def test_each_carried_value_is_freed_once_it_is_converted() -> None:
    """One .to() holds no more old carried values than nn.Module holds old buffers: one at a
    time. (Converting all first and writing them back at the end kept every old value alive until
    the end: for a carried cache, twice its memory on the device while .half() ran.)"""

    class Stack(autoreg.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.ModuleList(Layer() for _ in range(3))

    model = Stack()
    originals = []
    for layer in model.layers:
        layer.state = torch.zeros(4)
        originals.append(weakref.ref(layer.state))
    alive_at_each_call: list[int] = []

    def fn(tensor: torch.Tensor) -> torch.Tensor:
        alive_at_each_call.append(sum(ref() is not None for ref in originals))
        return tensor.double()

    model._apply(fn)
    assert all(layer.state.dtype == torch.float64 for layer in model.layers)
    assert max(alive_at_each_call) == 3  # all three, while nn.Module converts the parameters
    assert alive_at_each_call[-3:] == [3, 2, 1]  # then each is freed once it is converted


class Pair(tuple):  # type: ignore[type-arg]
    """A tuple subclass whose constructor takes its items as separate arguments."""

    def __new__(cls, first: torch.Tensor, second: torch.Tensor) -> Pair:
        return super().__new__(cls, (first, second))


class WarnLayer(Layer, warn=True):
    pass


@pytest.mark.parametrize("cls", [Layer, WarnLayer], ids=["register", "warn"])
def test_property_7_a_value_that_cannot_be_rebuilt_is_left_and_the_rest_converted(
    cls: type[Layer],
) -> None:
    """nn.Module completes this .to(); so must autoreg. The pair stays as it was, whole."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", autoreg.AutoRegisterWarning)  # what warn mode carries
        layer = cls()
        layer.pair = Pair(torch.zeros(1), torch.zeros(1))
        layer.state = torch.zeros(1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        layer.to(torch.float64)
    assert layer.lin.weight.dtype == layer.table.dtype == layer.state.dtype == torch.float64
    assert type(layer.pair) is Pair
    assert [t.dtype for t in layer.pair] == [torch.float32, torch.float32]
    said = [str(w.message) for w in caught if w.category is autoreg.AutoRegisterWarning]
    if cls is WarnLayer:
        assert len(said) == 1
        assert said[0].startswith("WarnLayer.pair = 'tests.contract.test_carrying.Pair' could not")
    else:
        assert said == []


@pytest.mark.parametrize("warn", [False, True], ids=["register", "warn"])
def test_property_7_a_tensor_that_escaped_vmap_does_not_stop_to(warn: bool) -> None:
    """A forward run under torch.func.vmap stores a BatchedTensor, dead once vmap returns: .to()
    leaves it as nn.Module does (it raised "escaped from vmap", parameters already converted),
    and warn mode says so."""

    class Stateful(autoreg.Module, warn=warn):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.last = self.lin(x)
            return self.last

    model = Stateful()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", autoreg.AutoRegisterWarning)  # what warn mode carries
        torch.func.vmap(model)(torch.ones(3, 2))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.to(torch.float64)
    assert model.lin.weight.dtype == torch.float64
    said = [str(w.message) for w in caught if w.category is autoreg.AutoRegisterWarning]
    if warn:
        assert len(said) == 1
        assert said[0].startswith("Stateful.last = ")
        assert "could not be converted by .to()" in said[0]
    else:
        assert said == []


@pytest.mark.parametrize("detach", [True, False], ids=["detached", "with-history"])
def test_property_7_per_sample_gradients_leave_nothing_that_stops_to(detach: bool) -> None:
    """The per-sample-gradients pattern, vmap(grad(functional_call)), over a forward that stores
    state: what escaped the transforms is left, and the rest of the model converts (a detached
    state raised "escaped from vmap" after the parameters were converted)."""

    class Stateful(autoreg.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(2, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out = self.lin(x)
            self.last = out.detach() if detach else out
            return out

    model = Stateful()
    params = {name: p.detach() for name, p in model.named_parameters()}

    def loss(params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        return torch.func.functional_call(model, params, (x,)).sum()

    grads = torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0))(params, torch.ones(3, 2))
    assert grads["lin.weight"].shape == (3, 1, 2)
    model.to(torch.float64)
    assert model.lin.weight.dtype == model.lin.bias.dtype == torch.float64
    assert model(torch.ones(2, dtype=torch.float64)).dtype == torch.float64


def test_property_7_a_packed_sequence_is_moved_by_its_own_to() -> None:
    """PackedSequence.to() keeps batch_sizes on the CPU, as its RNN requires; rebuilt as a named
    tuple, everything moved and the next .to(device) raised, the model half-moved."""
    model = Layer()
    padded = torch.zeros(2, 3, 2)
    model.packed = pack_padded_sequence(padded, torch.tensor([3, 1]), batch_first=True)
    model.to(torch.float64)
    assert type(model.packed) is PackedSequence
    assert model.packed.data.dtype == torch.float64
    assert model.packed.batch_sizes.dtype == torch.int64
    model.to("meta")
    assert model.packed.data.is_meta
    assert model.packed.batch_sizes.device.type == "cpu"
    assert role(model, "packed") == "carried"


class Plus(nn.Module):
    """Hands its children a function of its own: fn, then + 1 (an _apply override that wraps)."""

    def __init__(self, child: nn.Module) -> None:
        super().__init__()
        self.child = child

    def _apply(self, fn: Any, recurse: bool = True) -> Any:
        return super()._apply(lambda t: fn(t) + 1, recurse)


class HandState(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("state", torch.zeros(2), persistent=False)


def test_a_carried_value_gets_the_function_its_parent_hands_down_once_as_the_twins_buffer() -> None:
    """Below an _apply override that wraps fn, what the child carries is converted by the wrapped
    function, once, as the twin's buffer is (it used to be converted by the root's function)."""

    class Root(autoreg.Module):
        def __init__(self, child: nn.Module) -> None:
            super().__init__()
            self.plus = Plus(child)

    child = Layer()
    child.state = torch.zeros(2)  # carried
    twin = Root(HandState())
    Root(child).double()
    twin.double()
    assert torch.equal(child.state, twin.plus.child.state)
    assert child.state.tolist() == [1.0, 1.0]
    assert child.state.dtype == torch.float64


class SharedState(autoreg.Module):
    """A submodule that carries state, to be shared (``HandState`` is its twin)."""


@pytest.mark.parametrize("owners", ["one parent, two names", "two parents"])
def test_a_shared_submodule_s_state_is_converted_as_often_as_the_twins_buffer(owners: str) -> None:
    """nn.Module converts a shared submodule's buffers once per parent that holds it (children()
    yields it once per parent): carried state follows, seen through a function that is not
    idempotent (a submodule shared by two parents used to be converted once)."""

    def tree(child: nn.Module) -> nn.Module:
        root = SharedState()  # an autoreg root: the child joins its conversion
        if owners == "two parents":
            root.p1, root.p2 = nn.Sequential(child), nn.Sequential(child)
        else:
            root.a, root.b = child, child
        return root

    child = SharedState()
    child.state = torch.zeros(2)  # carried
    twin = HandState()
    for model in (tree(child), tree(twin)):
        model._apply(lambda t: t + 1)
        model.double()
    assert torch.equal(child.state, twin.state)
    assert child.state.dtype == twin.state.dtype == torch.float64
    assert role(child, "state") == "carried"
