"""A subclass that declares nothing of its own starts from its base's record (what
``register_parametrization`` costs: torch makes such a class per instance). What depends on the
class itself stays its own: what it defines under a name, its mode and persistence, its warnings.
"""

from __future__ import annotations

import gc
import weakref

import pytest
import torch
from torch import nn
from torch._dynamo.testing import CompileCounterWithBackend
from torch.nn.utils import parametrize

import autoreg
from tests.support import role


class Base(autoreg.Module):
    table: autoreg.Persistent

    def __init__(self) -> None:
        super().__init__()
        self.table = torch.ones(2)
        self.mask = torch.ones(2)


def test_what_a_plain_subclass_defines_under_a_name_is_its_own() -> None:
    """The base carries ``later``; the subclass defines a property under the name: row 7, its
    setter runs, nothing is registered or carried."""
    Base().later = torch.zeros(1)  # the base's record has seen a runtime tensor

    class WithProperty(Base):
        stored: list[torch.Tensor] = []

        @property
        def later(self) -> torch.Tensor:
            return self.stored[-1]

        @later.setter
        def later(self, value: torch.Tensor) -> None:
            self.stored.append(value)

    class Plain(WithProperty):  # declares nothing: starts from WithProperty's record
        pass

    module = Plain()
    module.later = torch.zeros(1)
    assert "later" not in vars(module)
    assert module.later is Plain.stored[-1]
    assert "later" not in vars(module).get("_autoreg_carrying", {})


@pytest.mark.parametrize("persistent", [True, False])
def test_a_subclass_with_keywords_keeps_its_own_persistence(persistent: bool) -> None:
    Base()  # the base's decisions are made

    cls = type("Keyworded", (Base,), {"__module__": __name__}, persistent=persistent)
    module = cls()
    assert role(module, "mask") == ("persistent buffer" if persistent else "non-persistent buffer")
    assert role(module, "table") == "persistent buffer"  # the base's declaration


def test_a_subclass_with_annotations_reads_its_own() -> None:
    class Redeclared(Base):
        mask: autoreg.Plain

    module = Redeclared()
    assert role(module, "mask") == "plain"
    assert role(Base(), "mask") == "non-persistent buffer"


def test_a_plain_subclass_made_before_the_bases_first_instance_reads_forward_references() -> None:
    namespace = {"__module__": __name__, "__annotations__": {"late": "LateDeclared"}}
    base = type("Early", (autoreg.Module,), namespace)
    plain = type("EarlyChild", (base,), {"__module__": __name__})
    globals()["LateDeclared"] = torch.Tensor  # resolves only now
    try:
        module = plain()
        module.late = torch.zeros(1)  # declared: a buffer, even at run time
        assert role(module, "late") == "non-persistent buffer"
    finally:
        del globals()["LateDeclared"]


def test_autoreg_mode_set_after_the_base_applies_to_a_plain_subclass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    Base()
    monkeypatch.setenv("AUTOREG_MODE", "strict")
    later = type("Later", (Base,), {"__module__": __name__})
    with pytest.raises(autoreg.UnregisteredTensorError, match=r"AUTOREG_MODE=strict"):
        later()


class Double(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2

    def right_inverse(self, x: torch.Tensor) -> torch.Tensor:
        return x / 2


class Layer(autoreg.AutoRegisterMixin, nn.Linear, strict=True):
    state: autoreg.Carried

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.state = super().forward(x).detach()
        return self.state


def test_a_parametrized_strict_module_keeps_its_declarations_and_compiles_as_the_twin() -> None:
    def frames(module: nn.Module) -> int:
        torch._dynamo.reset()
        counter = CompileCounterWithBackend("eager")
        compiled = torch.compile(module, backend=counter, fullgraph=True)
        module(torch.ones(1, 2))
        for _ in range(3):
            compiled(torch.ones(1, 2))
        return int(counter.frame_count)

    torch.manual_seed(0)
    auto = Layer(2, 2)
    torch.manual_seed(0)
    twin = nn.Linear(2, 2)
    for module in (auto, twin):
        parametrize.register_parametrization(module, "weight", Double())
    assert type(auto).__name__ == "ParametrizedLayer"
    try:
        assert frames(auto) == 1
    finally:
        torch._dynamo.reset()
    assert role(auto, "state") == "carried"
    torch.testing.assert_close(auto.state, twin(torch.ones(1, 2)), rtol=0, atol=0)
    auto.weight = torch.eye(2)  # the property's setter: row 7, strict refuses nothing
    torch.testing.assert_close(auto.weight, torch.eye(2))  # right_inverse, then forward


def test_thousands_of_parametrized_modules_and_their_classes_are_freed() -> None:
    modules = [Layer(2, 2) for _ in range(1000)]
    for module in modules:
        parametrize.register_parametrization(module, "weight", Double())
    refs = [weakref.ref(type(module)) for module in modules]
    del modules, module
    gc.collect()
    assert not any(ref() is not None for ref in refs)
