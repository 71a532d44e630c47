"""``autoreg.Carried``: the declaration of runtime state (row 9).

The role the contract recommends for state a module stores while it runs (a recurrent state, a
cache): carried, a plain attribute that ``.to()`` converts, never module state. A name annotated
``autoreg.Carried`` is carried wherever it is assigned (in ``__init__`` too), containers included,
and strict and warn mode accept it as declared.
"""

from __future__ import annotations

import copy
import pickle
import typing

import pytest
import torch
from torch import nn
from torch._dynamo.testing import CompileCounterWithBackend

import autoreg
from tests.support import role


class Recurrent(autoreg.Module, strict=True, persistent=True):
    h: autoreg.Carried
    history: autoreg.Carried
    start: autoreg.Carried

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.start = torch.zeros(2)  # in __init__: carried all the same, not a buffer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.h = self.lin(x).detach()
        self.history = [self.h, {"first": self.start}]
        return self.h


class Twin(nn.Module):
    """The hand-written module: its runtime state is a plain attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.start = torch.zeros(2)

    forward = Recurrent.forward


def test_a_carried_name_in_strict_mode_is_carried_wherever_it_is_assigned() -> None:
    module = Recurrent()
    module(torch.ones(1, 2))  # strict, declared: nothing raises
    assert role(module, "h") == role(module, "start") == role(module, "history") == "carried"
    assert list(module.state_dict()) == ["lin.weight", "lin.bias"]  # persistent=True: no matter
    assert not module._buffers
    module.double()
    assert module.h.dtype == module.start.dtype == torch.float64
    assert module.history[0].dtype == module.history[1]["first"].dtype == torch.float64


def test_warn_mode_says_nothing_about_a_carried_name() -> None:
    class Gradual(autoreg.Module, warn=True):
        h: autoreg.Carried

    module = Gradual()
    module.h = torch.zeros(1)  # warnings are errors in this suite
    module.h = [torch.zeros(1)]
    assert role(module, "h") == "carried"


def test_a_class_default_does_not_stop_a_carried_name() -> None:
    """``h: autoreg.Carried = None`` at class level, the usual way to give runtime state a
    default: the instance's value lives in its ``__dict__``, in front of the class attribute, and
    is carried."""

    class Defaulted(autoreg.Module, strict=True):
        h: autoreg.Carried | None = None

    module = Defaulted()
    assert module.h is None
    module.h = torch.zeros(1)
    assert role(module, "h") == "carried"
    assert module.double().h.dtype == torch.float64


@pytest.mark.parametrize(
    "clone",
    [copy.copy, copy.deepcopy, lambda m: pickle.loads(pickle.dumps(m))],
    ids=["copy", "deepcopy", "pickle"],
)
def test_a_copy_carries_a_carried_name(clone: typing.Callable[[nn.Module], nn.Module]) -> None:
    module = Recurrent()
    module(torch.ones(1, 2))
    copied = clone(module)
    copied(torch.ones(1, 2))
    assert role(copied, "h") == "carried"
    assert copied.double().h.dtype == torch.float64


def test_a_leaf_that_requires_grad_stays_row_6() -> None:
    """A weight nobody wrapped is still a weight: the declaration does not hide it from the
    warning (row 6 comes first, as for a declared buffer)."""

    class Declared(autoreg.Module):
        h: autoreg.Carried

        def __init__(self) -> None:
            super().__init__()
            self.h = torch.zeros(1, requires_grad=True)

    with pytest.warns(autoreg.AutoRegisterWarning, match=r"is a leaf tensor that requires grad"):
        module = Declared()
    assert role(module, "h") == "plain"


def test_carried_is_an_annotated_tensor_exported_by_autoreg() -> None:
    assert "Carried" in autoreg.__all__
    assert typing.get_origin(autoreg.Carried) is typing.Annotated
    assert typing.get_args(autoreg.Carried)[0] is torch.Tensor


def test_a_string_annotation_declares_it_too() -> None:
    namespace = {"__module__": __name__, "__annotations__": {"h": "autoreg.Carried"}}
    cls = type("Late", (autoreg.Module,), namespace, strict=True)
    module = cls()
    module.h = torch.zeros(1)
    assert role(module, "h") == "carried"


class CompiledRecurrent(autoreg.Module, strict=True):
    h: autoreg.Carried

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.h = self.lin(x).detach()
        return self.h


class CompiledTwin(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)

    forward = CompiledRecurrent.forward


def test_a_compiled_forward_storing_a_carried_name_compiles_as_the_twin() -> None:
    """Strict mode: declared, nothing raises in the compiled forward, and the compile count is
    the twin's. (One eager call first: in a process that imported lightning, a compiled forward
    that carries a name for the first time compiles twice, on main too, declared or not.)"""

    def frames(module: nn.Module) -> int:
        torch._dynamo.reset()
        counter = CompileCounterWithBackend("eager")
        compiled = torch.compile(module, backend=counter, fullgraph=True)
        module(torch.ones(1, 2))
        for _ in range(3):
            compiled(torch.ones(1, 2))
        return int(counter.frame_count)

    torch.manual_seed(0)
    auto = CompiledRecurrent()
    torch.manual_seed(0)
    twin = CompiledTwin()
    try:
        assert frames(auto) == frames(twin)
    finally:
        torch._dynamo.reset()
    assert role(auto, "h") == "carried"
    torch.testing.assert_close(auto.h, twin.h, rtol=0, atol=0)


# --- strict and warn mode offer it ----------------------------------------------------------


class Strict(autoreg.Module, strict=True):
    pass


def test_strict_modes_error_for_runtime_state_offers_carried_first() -> None:
    with pytest.raises(autoreg.UnregisteredTensorError) as caught:
        Strict().cache = torch.zeros(3, dtype=torch.int64)
    assert str(caught.value) == (
        "cannot assign Tensor(shape=(3,), dtype=torch.int64, device='cpu') to Strict.cache: "
        "Strict is strict (class Strict(..., strict=True)) and 'cache' is not declared.\n"
        "Without strict, autoreg would carry it along with .to() as runtime state, outside "
        "state_dict.\n"
        "Make it explicit, whichever fits (annotations go in the class body):\n"
        "    carried (runtime state):     cache: autoreg.Carried\n"
        "    a buffer (non-persistent):   cache: torch.Tensor\n"
        "    a buffer in state_dict:      cache: autoreg.Persistent\n"
        "    a buffer not in state_dict:  cache: autoreg.NonPersistent\n"
        "    registered by hand:          self.cache = nn.Buffer(value, persistent=False)\n"
        "    a weight to train:           self.cache = nn.Parameter(value)\n"
        "    never registered or moved:   cache: autoreg.Plain"
    )


def test_strict_modes_error_for_a_container_offers_carried() -> None:
    with pytest.raises(
        autoreg.UnregisteredTensorError,
        match=r"\n    cache: autoreg.Carried +# carried as it is: moves, not in state_dict\n",
    ):
        Strict().cache = [torch.zeros(1)]


def test_warn_modes_message_for_runtime_state_offers_carried() -> None:
    class Gradual(autoreg.Module, warn=True):
        pass

    with pytest.warns(
        autoreg.AutoRegisterWarning,
        match=r"\n    carried \(runtime state\):     state: autoreg.Carried\n",
    ):
        Gradual().state = torch.zeros(1)
