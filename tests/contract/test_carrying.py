""".to() of what autoreg carries: it costs its own tree, never fails where nn.Module completes.

Property 2: the work of one ``.to()`` follows the tree it converts, never the modules alive
elsewhere, and nothing that happened elsewhere in the process changes what it moves. Property 7:
what autoreg cannot convert it leaves as nn.Module would; a model is never left half-converted.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import signal
import warnings
import weakref
from collections.abc import Iterator
from pathlib import Path
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


def test_aliases_keep_their_identity_within_a_module_and_get_a_copy_across() -> None:
    """An alias of the module's own buffer stays that buffer; one of another module's buffer is
    converted by the module that carries it, as a buffer registered in two modules is."""
    parent = Layer()
    parent.child = Layer()
    parent.child.view = parent.table  # a carried alias of the parent's buffer
    parent.child.history = [parent.table, parent.child.table]
    parent.to(torch.float64)
    assert parent.child.history[1] is parent.child.table
    assert parent.child.view is parent.child.history[0]  # one tensor within the child
    assert parent.child.view is not parent.table
    assert parent.child.view.dtype == torch.float64
    assert torch.equal(parent.child.view, parent.table)


def test_each_carried_value_is_freed_once_it_is_converted() -> None:
    """One .to() holds no more old carried values than nn.Module holds old buffers: each is freed
    once converted. (Converting all first and writing them back at the end kept every old value
    alive until the end: for a carried cache, twice its memory on the device while .half() ran.)"""

    class Stack(autoreg.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.ModuleList(Layer() for _ in range(3))

    model = Stack()
    originals = []
    for layer in model.layers:
        layer.state = torch.zeros(4)
        originals.append(weakref.ref(layer.state))
    alive_at_each_state: list[int] = []

    def fn(tensor: torch.Tensor) -> torch.Tensor:
        if any(ref() is tensor for ref in originals):
            alive_at_each_state.append(sum(ref() is not None for ref in originals))
        return tensor.double()

    model._apply(fn)
    assert all(layer.state.dtype == torch.float64 for layer in model.layers)
    assert alive_at_each_state == [3, 2, 1]  # each freed once converted, before the next
    assert all(ref() is None for ref in originals)


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


class Frozen(dict):  # type: ignore[type-arg]
    """A dict that refuses to be changed once made (as torch.fx's ``immutable_dict``)."""

    def __setitem__(self, key: object, value: object) -> None:
        raise TypeError(f"{type(self).__name__} is immutable")


@pytest.mark.parametrize("cls", [Layer, WarnLayer], ids=["register", "warn"])
def test_property_7_a_container_that_refuses_a_write_is_left_whole(cls: type[Layer]) -> None:
    """A carried list holding a dict that takes the converted tensor and one that refuses it:
    the value is left as it was, whole, never half converted (the first dict's write was kept:
    one carried value in two dtypes)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", autoreg.AutoRegisterWarning)  # what warn mode carries
        layer = cls()
        layer.state = [{"a": torch.ones(2)}, Frozen(b=torch.ones(2))]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        layer.double()
    assert [layer.state[0]["a"].dtype, layer.state[1]["b"].dtype] == [torch.float32] * 2
    assert layer.table.dtype == torch.float64  # the rest of .to() was done
    said = [str(w.message) for w in caught if w.category is autoreg.AutoRegisterWarning]
    assert len(said) == (1 if cls is WarnLayer else 0)


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


# --- identity: promised within one module, under every root (issue 29 item 8) -------------------


class Table(autoreg.Module):
    """A buffer, and room for carried values."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.table = torch.ones(3)  # a buffer


class TwinTable(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.register_buffer("table", torch.ones(3), persistent=False)


class AutoPair(autoreg.Module):
    def __init__(self, first: nn.Module, second: nn.Module) -> None:
        super().__init__()
        self.first, self.second = first, second


class PlainPair(nn.Module):
    def __init__(self, first: nn.Module, second: nn.Module) -> None:
        super().__init__()
        self.first, self.second = first, second


ROOTS = {
    "alone": lambda m: m,
    "autoreg root": lambda m: AutoPair(m, nn.Identity()),
    "nn.Sequential": lambda m: nn.Sequential(m),
    "plain wrapper": lambda m: PlainPair(nn.Identity(), m),
}
IDENTITY_MOVES = {
    "double": lambda m: m.double(),
    "to(meta)": lambda m: m.to("meta"),
    "to_empty(meta)": lambda m: m.to_empty(device="meta"),
}


@pytest.mark.parametrize("move", IDENTITY_MOVES.values(), ids=IDENTITY_MOVES.keys())
@pytest.mark.parametrize("root", ROOTS.values(), ids=ROOTS.keys())
def test_an_alias_of_the_module_s_own_buffer_stays_that_buffer_under_every_root(
    root: Any, move: Any
) -> None:
    model = Table()
    model.view = model.table  # run time: carried
    model.rows = [model.table, (model.view,), {"again": model.table}]
    move(root(model))
    assert model.view is model.table
    assert model.rows[0] is model.rows[1][0] is model.rows[2]["again"] is model.table
    assert len(list(model.buffers())) == 1  # nothing registered twice


@pytest.mark.parametrize("move", IDENTITY_MOVES.values(), ids=IDENTITY_MOVES.keys())
@pytest.mark.parametrize("root", ROOTS.values(), ids=ROOTS.keys())
def test_a_tensor_carried_twice_by_a_module_stays_one_tensor_under_every_root(
    root: Any, move: Any
) -> None:
    model = Table()
    shared = torch.zeros(2)
    model.a, model.b = shared, shared
    model.lists = [shared, [shared]]
    model.other = model.lists  # the same list, carried under two names
    model.pair = (shared,)
    move(root(model))
    assert model.a is model.b is model.lists[0] is model.lists[1][0] is model.pair[0]
    assert model.other is model.lists


def test_a_tensor_carried_twice_by_a_module_is_converted_once() -> None:
    """Seen through a function that is not idempotent: one conversion per tensor, not per place
    (a list carried under two names used to be walked, and converted, twice)."""
    model = Table()
    shared = torch.zeros(2)
    model.a, model.b = shared, shared
    model.lists = [shared]
    model.other = model.lists
    model._apply(lambda t: t + 1)
    assert model.a.tolist() == [1.0, 1.0]
    assert model.a is model.b is model.lists[0]


class Encoder(autoreg.Module):
    def __init__(self) -> None:
        super().__init__()
        self.table = torch.zeros(3)  # a buffer


class TwinEncoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("table", torch.zeros(3), persistent=False)


class Decoder(autoreg.Module):
    pass


def _coupled(twin: bool) -> tuple[nn.Module, nn.Module]:
    """An encoder with a buffer, and a decoder that holds it: carried, or on the twin registered
    in both (nn.Module converts each registration on its own)."""
    encoder, decoder = (TwinEncoder(), nn.Module()) if twin else (Encoder(), Decoder())
    if twin:
        decoder.register_buffer("cache", encoder.table, persistent=False)
    else:
        decoder.cache = encoder.table  # run time: carried by the decoder
    return encoder, decoder


COUPLED_ROOTS = {
    "autoreg root": AutoPair,
    "nn.Sequential": nn.Sequential,
    "plain root": PlainPair,
    "decoder first": lambda e, d: AutoPair(d, e),
    "decoder below": lambda e, d: AutoPair(e, nn.Sequential(d)),
}


@pytest.mark.parametrize("root", COUPLED_ROOTS.values(), ids=COUPLED_ROOTS.keys())
def test_across_modules_each_converts_its_own_as_nn_module_does_under_every_root(root: Any) -> None:
    """What one .to() makes of a tensor two modules hold does not depend on the root: each
    module converts what it holds, as nn.Module converts a buffer registered in two modules
    (equal values, a tensor each). It used to stay one tensor under an autoreg root only."""
    encoder, decoder = _coupled(twin=False)
    twin_encoder, twin_decoder = _coupled(twin=True)
    root(encoder, decoder).double()
    root(twin_encoder, twin_decoder).double()
    assert decoder.cache.dtype == encoder.table.dtype == twin_decoder.cache.dtype == torch.float64
    assert torch.equal(decoder.cache, encoder.table)
    assert (decoder.cache is encoder.table) == (twin_decoder.cache is twin_encoder.table)


class Weights(autoreg.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = Table()
        self.inner.lin.weight.requires_grad_(False)  # a frozen weight: no row 6 on the way


@pytest.mark.parametrize("move", IDENTITY_MOVES.values(), ids=IDENTITY_MOVES.keys())
@pytest.mark.parametrize("root", ROOTS.values(), ids=ROOTS.keys())
def test_a_parameter_in_a_carried_value_is_the_parameter_nn_module_made(
    root: Any, move: Any
) -> None:
    """A parameter is never converted by autoreg: a carried value that holds one of the module's
    or of a module below it holds, after .to(), that parameter as nn.Module left it (the same
    object, or the new one nn.Module makes on .to("meta"))."""
    model = Weights()
    model.params = [model.inner.lin.weight, {"bias": model.inner.lin.bias}]
    move(root(model))
    assert model.params[0] is model.inner.lin.weight
    assert model.params[1]["bias"] is model.inner.lin.bias


def test_the_promises_do_not_read_reference_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 29 item 10: CPython does not promise what sys.getrefcount reads (3.14 borrows stack
    references and reads lower). A count that reads low once made an alias of a buffer look held
    by nothing else, and .to() converted it on its own."""
    from autoreg import _carry

    monkeypatch.setattr(_carry, "_refcount", lambda _: 1, raising=False)
    model = Table()
    model.view = model.table
    model.double()
    assert model.view is model.table


def test_no_part_of_autoreg_reads_reference_counts() -> None:
    source = [path.read_text() for path in sorted(Path(autoreg.__file__).parent.rglob("*.py"))]
    assert not [text for text in source if "getrefcount" in text or "_is_gil_enabled" in text]


# --- cycles and shared submodules: as nn.Module, never worse (issue 29 item 9) -----------------


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Fail the test, not the suite, when the code under test does not return (a SIGALRM)."""

    def stop(signum: int, frame: object) -> None:
        raise TimeoutError

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except TimeoutError:
        pytest.fail(f"still running after {seconds} s", pytrace=False)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class Node(autoreg.Module):
    def __init__(self) -> None:
        super().__init__()
        self.table = torch.ones(2)  # a buffer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.state = x * self.table  # carried
        return self.state


@pytest.mark.parametrize("cls", [Node, nn.Module], ids=["autoreg", "nn.Module"])
def test_to_on_a_module_cycle_raises_recursion_error_as_nn_module(cls: type[nn.Module]) -> None:
    """self.parent = parent makes a cycle through _modules: nn.Module's recursion raises
    RecursionError at once; autoreg's walk of the tree went round the cycle for ever, growing."""
    parent, child = cls(), cls()
    if cls is Node:
        parent(torch.ones(2))
        child(torch.ones(2))
    parent.child = child
    child.parent = parent
    with time_limit(3.0), pytest.raises(RecursionError):
        parent.double()
    fresh = Node()
    fresh(torch.ones(2))
    fresh.double()  # nothing of the failed call is left behind
    assert fresh.state.dtype == torch.float64


def _counted(model: nn.Module) -> int:
    calls = 0

    def fn(tensor: torch.Tensor) -> torch.Tensor:
        nonlocal calls
        calls += 1
        return tensor

    model._apply(fn)
    return calls


@pytest.mark.parametrize("cls", [Node, nn.Module], ids=["autoreg", "nn.Module"])
def test_a_submodule_under_two_names_at_each_level_costs_what_it_costs_nn_module(
    cls: type[nn.Module],
) -> None:
    """nn.Module visits a child held under two names once (named_children): 40 levels are 40
    visits. The walk followed both names at each level: 2**40 visits."""
    levels = [cls() for _ in range(40)]
    for level, below in itertools.pairwise(levels):
        level.a = below
        level.b = below
        if cls is Node:
            level(torch.ones(2))
    with time_limit(3.0):
        calls = _counted(levels[0])
    per_level = 2 if cls is Node else 0  # the buffer, and the carried state (the last has none)
    assert calls == per_level * 40 - (1 if cls is Node else 0)


def test_a_submodule_shared_by_two_parents_at_each_level_is_converted_as_by_nn_module() -> None:
    """Two parents at each level holding the same child: nn.Module converts the child once per
    parent, 2**levels times at the bottom; carried state follows, no more, no fewer times."""

    def diamond(cls: type[nn.Module], depth: int) -> nn.Module:
        bottom = cls()
        if cls is Node:
            bottom(torch.ones(2))
        for _ in range(depth):
            left, right, top = cls(), cls(), cls()
            left.child, right.child = bottom, bottom
            top.left, top.right = left, right
            bottom = top
        return bottom

    class TwinNode(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("table", torch.ones(2), persistent=False)

    auto, twin = diamond(Node, 6), diamond(TwinNode, 6)
    twin_bottom = twin
    while "left" in twin_bottom._modules:
        twin_bottom = twin_bottom.left.child
    twin_bottom.register_buffer("state", torch.ones(2), persistent=False)
    assert _counted(auto) == _counted(twin)


def test_nothing_keeps_a_converted_model_alive() -> None:
    model = Node()
    model(torch.ones(2))
    model.view = model.table
    model.double()
    ref = weakref.ref(model)
    del model
    gc.collect()
    assert ref() is None


def test_property_7_a_container_nested_thousands_deep_is_converted_as_any_other() -> None:
    """nn.Module never looks at a plain list, however deep; the walkers recursed, and .to()
    raised RecursionError before converting anything."""
    model = Layer()
    deep: list[Any] = [torch.zeros(1)]
    for _ in range(5000):
        deep = [deep, (torch.zeros(1),)]
    model.deep = deep
    model.to(torch.float64)
    assert model.lin.weight.dtype == torch.float64
    level, count = model.deep, 0
    while len(level) == 2:
        assert level[1][0].dtype == torch.float64
        level, count = level[0], count + 1
    assert count == 5000
    assert level[0].dtype == torch.float64
