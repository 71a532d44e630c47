"""A subclass that declares nothing of its own starts from its base's record (what
``register_parametrization`` costs: torch makes such a class per instance). What depends on the
class itself stays its own: what it defines under a name, its mode and persistence, its warnings.
"""

from __future__ import annotations

import gc
import warnings
import weakref

import pytest
import torch
from torch import nn
from torch._dynamo.testing import CompileCounterWithBackend
from torch.nn.utils import parametrize, prune

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


class _EqualToNone:
    """A keyword value that says it equals anything, None included (as ``unittest.mock.ANY``)."""

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = object.__hash__


@pytest.mark.parametrize("keyword", ["persistent", "strict", "warn"])
def test_a_plain_subclass_with_a_keyword_equal_to_none_is_refused_as_any_non_boolean(
    keyword: str,
) -> None:
    """Only a keyword left out (None) makes a subclass plain: a value that merely compares equal
    to None is no boolean, and is refused as ``'yes'`` is, never taken for no keyword."""
    Base()  # the base's decisions are made
    with pytest.raises(
        autoreg.ClassDefinitionError,
        match=rf"class Odd: the class keyword {keyword}= must be True or False",
    ):
        type("Odd", (Base,), {"__module__": __name__}, **{keyword: _EqualToNone()})


def test_a_plain_subclass_with_a_mode_keyword_has_its_own_mode_and_its_subclasses_take_it() -> None:
    """``class Loud(Base, warn=True): pass`` declares nothing but its mode: it warns, and so does
    a plain subclass of it, where the base stays silent."""
    Base()  # the base's decisions are made
    loud = type("Loud", (Base,), {"__module__": __name__}, warn=True)
    quieter = type("Quieter", (loud,), {"__module__": __name__})
    for cls in (loud, quieter):
        with pytest.warns(autoreg.AutoRegisterWarning, match="mask"):
            cls()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Base()


class Framework(nn.Module):
    """A framework base that stores its own state at run time (row 4: the framework's)."""

    def step(self) -> None:
        self.statistic = torch.zeros(1)


class OnFramework(autoreg.AutoRegisterMixin, Framework):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.h = x * 2
        return x


def test_a_plain_subclass_overriding_setattr_keeps_row_4_past_its_override() -> None:
    """Its ``__setattr__`` override is one more frame between an assignment and the mixin: the
    framework's store stays the framework's (the twin's plain attribute), the model's is
    carried."""
    OnFramework()(torch.ones(1))  # the base's record has decided both kinds

    class Logged(OnFramework):
        seen: list[str] = []

        def __setattr__(self, name: str, value: object) -> None:
            self.seen.append(name)
            super().__setattr__(name, value)

    module = Logged()
    module.step()
    module(torch.ones(1))
    assert role(module, "statistic") == "plain"
    assert role(module, "h") == "carried"
    assert {"statistic", "h"} <= set(Logged.seen)


class MaskedLinear(autoreg.AutoRegisterMixin, nn.Linear):
    pass


def test_a_plain_subclass_overriding_setattr_keeps_prunes_first_write_its_own() -> None:
    """prune's first write of the derived weight, through the subclass's override, is told by
    prune's code past that override: a plain attribute (row 6), as on the twin, not carried."""
    MaskedLinear(2, 2)

    class Logged(MaskedLinear):
        def __setattr__(self, name: str, value: object) -> None:
            super().__setattr__(name, value)

    module = Logged(2, 2)
    prune.random_unstructured(module, "weight", amount=0.5)
    assert role(module, "weight") == "plain"
    assert "weight" not in vars(module).get("_autoreg_carrying", {})


def test_a_property_torch_adds_to_a_parametrized_class_after_its_statement_is_its_own() -> None:
    """torch adds the parametrized name's property to the class it made, after making it: the
    class's live namespace is read, so a tensor assigned under the name goes to the property's
    setter (the parametrization's ``right_inverse``), as on the twin, never into a buffer."""
    module = Base()
    module.weight = nn.Parameter(torch.ones(2))
    parametrize.register_parametrization(module, "weight", Double())
    module.weight = torch.full((2,), 4.0)  # the setter: right_inverse (x / 2) sets the original
    assert role(module, "weight") == "absent"
    assert "weight" not in vars(module).get("_autoreg_carrying", {})
    assert torch.equal(module.parametrizations.weight.original, torch.full((2,), 2.0))
    assert torch.equal(module.weight, torch.full((2,), 4.0))


def _setting(base: type[nn.Module], **keywords: bool) -> type[nn.Module]:
    class Setting(base, **keywords):  # type: ignore[valid-type, misc]
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.ones(3))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            with torch.no_grad():
                self.w = x * 4  # the parametrization's setter: right_inverse sets the original
            return x + 1

    return Setting


@pytest.mark.parametrize("keywords", [{}, {"strict": True}], ids=["register", "strict"])
def test_a_compiled_forward_sees_the_property_torch_adds_to_a_parametrized_class(
    keywords: dict[str, bool],
) -> None:
    """What the name is on the class is read as the class is when dynamo traces, not as it was
    made: the property torch adds after making the parametrized class runs its setter, as on the
    twin, without an eager call first: the same frames (the setter's ``set_`` breaks the graph on
    both), no error (strict mode raised, taking the assignment for an undeclared runtime tensor,
    and compiled another number of frames)."""

    def run(cls: type[nn.Module]) -> tuple[int, list[float], list[float]]:
        torch._dynamo.reset()
        cls()  # the class is final
        module = cls()
        parametrize.register_parametrization(module, "w", Double())
        counter = CompileCounterWithBackend("eager")
        compiled = torch.compile(module, backend=counter)
        for _ in range(3):
            compiled(torch.ones(3))
        assert "w" not in vars(module).get("_autoreg_carrying", {})
        return counter.frame_count, module.w.tolist(), module.parametrizations.w.original.tolist()

    expected = run(_setting(nn.Module))
    assert expected[1] == [4.0, 4.0, 4.0]  # the setter ran
    assert run(_setting(autoreg.Module, **keywords)) == expected


def _doubling_forward(self: nn.Module, x: torch.Tensor) -> torch.Tensor:
    self.h = x * 2
    return x + 1


@pytest.mark.parametrize("keywords", [{}, {"strict": True}], ids=["register", "strict"])
def test_a_property_a_class_gets_after_its_forward_was_compiled_is_read_as_on_the_twin(
    keywords: dict[str, bool],
) -> None:
    """What a name is on the class is a constant of the compiled code (``compiled_slot``): a
    property given to the class after its ``forward`` was compiled is not seen there. Nor is it on
    the twin: dynamo keeps storing into ``__dict__``, without a recompile (2.13, 2.15; on 2.5.1 it
    also calls the setter, on both). The same frames, setter calls and values."""

    def run(base: type[nn.Module]) -> tuple[int, int, list[float]]:
        torch._dynamo.reset()
        mode = keywords if base is autoreg.Module else {}
        annotations = {"h": autoreg.Carried} if mode else {}  # (strict: declared)
        namespace = {"forward": _doubling_forward, "__annotations__": annotations}
        cls = type("Doubling", (base,), namespace, **mode)
        module = cls()
        counter = CompileCounterWithBackend("eager")
        compiled = torch.compile(module, backend=counter)
        compiled(torch.ones(2))
        calls: list[object] = []
        cls.h = property(lambda self: calls[-1] if calls else None, lambda s, v: calls.append(v))
        compiled(torch.ones(2))
        compiled(torch.ones(2))
        held = vars(module)["h"]
        return counter.frame_count, len(calls), held.tolist()

    assert run(autoreg.Module) == run(nn.Module)


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
