"""A base class whose ``__setattr__`` keeps a value elsewhere: autoreg carries only what lands in
the instance's ``__dict__``.

pyro's ``PyroModule.__setattr__`` stores a ``PyroParam`` (a named tuple: a container to autoreg)
in a registry of its own and an unconstrained ``nn.Parameter`` beside it, never the tuple under
its name. Whether the value landed in ``__dict__`` is observable after the base's ``__setattr__``
ran; what it did not store there is not autoreg's to carry, nor for strict and warn mode to
refuse or report. ``Keeper`` behaves the same way, without pyro.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import pytest
import torch
from torch import nn
from torch.nn.utils import parametrize

import autoreg
from autoreg._carry import carried
from tests.support import role


class Param(NamedTuple):
    """A declaration of a constrained parameter, as pyro's ``PyroParam``."""

    init: torch.Tensor
    constraint: str


class Keeper(nn.Module):
    """Keeps a ``Param`` outside ``__dict__``: its spec in ``_specs``, its tensor as a parameter
    under ``name + "_unconstrained"``; any other value is stored as nn.Module stores it."""

    def __init__(self) -> None:
        super().__init__()
        self._specs: dict[str, str] = {}

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, Param):
            self.__dict__.pop(name, None)
            self._specs[name] = value.constraint
            super().__setattr__(name + "_unconstrained", nn.Parameter(value.init.clone()))
            return
        super().__setattr__(name, value)

    def __getattr__(self, name: str) -> Any:
        specs = self.__dict__.get("_specs", {})
        if name in specs:
            return getattr(self, name + "_unconstrained").exp()
        return super().__getattr__(name)


def _model(**mode: bool) -> type[nn.Module]:
    class Model(autoreg.AutoRegisterMixin, Keeper, **mode):
        def __init__(self) -> None:
            super().__init__()
            self.loc = Param(torch.zeros(2), "positive")

        def forward(self) -> torch.Tensor:
            self.scale = Param(torch.ones(2), "positive")  # at run time too
            return self.loc * self.scale

    return Model


MODES = pytest.mark.parametrize(
    "mode", [{}, {"strict": True}, {"warn": True}], ids=["register", "strict", "warn"]
)


@MODES
def test_a_value_the_base_keeps_elsewhere_is_not_carried_nor_refused(mode: dict[str, bool]) -> None:
    """main: judged a container autoreg carries - strict mode refused the standard way to
    declare the parameter, warn mode said "autoreg carries it" (false), and the name was marked
    carried with nothing under it."""
    model = _model(**mode)()  # warnings are errors in this suite
    model()
    for name in ("loc", "scale"):
        assert name not in vars(model)
        assert not carried(model, name)
        assert name not in vars(model).get("_autoreg_carrying", {})
    assert [n for n, _ in model.named_parameters()] == ["loc_unconstrained", "scale_unconstrained"]
    model.double()
    assert model.loc.dtype == model.scale.dtype == torch.float64  # nn.Module's parameters


@MODES
def test_a_value_the_base_stores_under_its_name_is_decided_as_before(mode: dict[str, bool]) -> None:
    """A list of tensors, which the base stores as nn.Module does: carried (row 8), refused by
    strict mode (the name left as it was), reported by warn mode."""
    model = _model()()
    model.history = []
    if mode.get("strict"):
        model = _model(strict=True)()
        model.history = []  # nothing in it to refuse
        before = dict(vars(model))
        with pytest.raises(autoreg.UnregisteredTensorError, match=r"Model\.history"):
            model.history = [torch.zeros(1)]
        assert model.history == []
        assert vars(model) == before  # roles and the list of carried names as they were
        return
    model = _model(**mode)()
    if mode.get("warn"):
        with pytest.warns(autoreg.AutoRegisterWarning, match=r"autoreg carries it"):
            model.history = [torch.zeros(1)]
    else:
        model.history = [torch.zeros(1)]
    assert role(model, "history") == "carried"
    assert model.double().history[0].dtype == torch.float64


def test_a_carried_name_the_base_then_keeps_elsewhere_is_no_longer_carried() -> None:
    model = _model()()
    model.extra = torch.zeros(2)  # run time: carried
    model.extra = Param(torch.ones(2), "positive")  # the base takes the name over
    assert "extra" not in vars(model)
    assert not carried(model, "extra")
    model.double()


def test_a_tensor_the_base_stores_is_carried_at_run_time_and_refused_in_strict_mode() -> None:
    model = _model()()
    model.h = torch.zeros(2)
    assert role(model, "h") == "carried"
    strict = _model(strict=True)()
    strict.h = None
    strict.history = []  # carried: the instance has a list of carried names
    before = {k: dict(v) if type(v) is dict else v for k, v in vars(strict).items()}
    with pytest.raises(autoreg.UnregisteredTensorError, match=r"Model\.h"):
        strict.h = torch.zeros(2)
    assert vars(strict)["h"] is None  # as it was
    assert vars(strict) == before  # its role, and the list of carried names without it


# --- pyro itself ---------------------------------------------------------------------------------


def test_pyros_own_parameter_declaration() -> None:
    pyro_nn = pytest.importorskip("pyro.nn")
    constraints = pytest.importorskip("torch.distributions.constraints")

    class Model(autoreg.AutoRegisterMixin, pyro_nn.PyroModule, strict=True):
        def __init__(self) -> None:
            super().__init__()
            self.loc = pyro_nn.PyroParam(torch.zeros(2))
            self.scale = pyro_nn.PyroParam(torch.ones(2), constraint=constraints.positive)

    class Warned(Model, strict=False, warn=True):
        pass

    for cls in (Model, Warned):  # strict: no refusal; warn: no warning (errors in this suite)
        model = cls()
        assert not carried(model, "loc")
        assert not carried(model, "scale")
        assert "scale" not in vars(model)
        model.double()
        assert model.scale.dtype == torch.float64
        torch.testing.assert_close(model.scale, torch.ones(2, dtype=torch.float64))


def test_every_buffer_update_reaches_the_base_as_on_the_twin() -> None:
    """A buffer updated at run time (a plain tensor, None, an ``nn.Buffer``, a tensor subclass)
    goes through the base's ``__setattr__`` and ends where it ends on the hand-written module."""

    class Recording(nn.Module):
        def __setattr__(self, name: str, value: Any) -> None:
            self.__dict__.setdefault("seen", []).append((name, type(value).__name__))
            super().__setattr__(name, value)

    class Twin(Recording):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("scale", torch.ones(2), persistent=False)

    class Auto(autoreg.AutoRegisterMixin, Recording):
        def __init__(self) -> None:
            super().__init__()
            self.scale = torch.ones(2)

    subclass = type("Sub", (torch.Tensor,), {})
    values = [
        torch.zeros(2),
        None,
        nn.Buffer(torch.full((2,), 2.0)),
        torch.ones(2).as_subclass(subclass),
    ]
    twin, auto = Twin(), Auto()
    twin.__dict__.pop("seen", None)
    auto.__dict__.pop("seen", None)  # the updates only
    for value in values:
        twin.scale = value
        auto.scale = value
        assert auto._buffers.keys() == twin._buffers.keys()
        assert auto._buffers["scale"] is twin._buffers["scale"]
        assert auto._non_persistent_buffers_set == twin._non_persistent_buffers_set
    assert (
        auto.__dict__["seen"]
        == twin.__dict__["seen"]
        == [("scale", "Tensor"), ("scale", "NoneType"), ("scale", "Tensor"), ("scale", "Sub")]
    )


class Resetting(nn.Module):
    """``del self.h`` resets ``h`` to its default: the base deletes it, then stores the default
    again (through the instance's ``__setattr__``)."""

    defaults: dict[str, Any] = {"h": lambda: torch.zeros(2)}

    def __delattr__(self, name: str) -> None:
        super().__delattr__(name)
        if name in self.defaults:
            setattr(self, name, self.defaults[name]())


class Refusing(nn.Module):
    """Refuses to delete ``h``."""

    def __delattr__(self, name: str) -> None:
        if name == "h":
            raise AttributeError(f"{type(self).__name__}.h cannot be deleted")
        super().__delattr__(name)


class AutoResetting(autoreg.AutoRegisterMixin, Resetting):
    def remember(self, x: torch.Tensor) -> None:
        self.h = x  # the model's own store: carried


class AutoRefusing(autoreg.AutoRegisterMixin, Refusing):
    remember = AutoResetting.remember


@pytest.mark.parametrize("cls", [AutoResetting, AutoRefusing])
def test_what_a_bases_delattr_leaves_under_the_name_has_the_role_of_whose_store_it_is(
    cls: type[AutoResetting],
) -> None:
    """A base's ``__delattr__`` that refuses: the name still holds the model's tensor, which
    ``.to()`` converts. One that stores a default again (a reset): the name is new when the
    base's code stores it, so the default is the framework's (row 4), a plain attribute as on
    nn.Module, for good. autoreg forgot the name's role after the base had run, whatever the
    base had stored there meanwhile, which it had taken for an update of the model's value."""
    model = cls()
    model.remember(torch.ones(2))
    assert role(model, "h") == "carried"
    if cls is AutoRefusing:
        with pytest.raises(AttributeError, match="cannot be deleted"):
            del model.h
        assert role(model, "h") == "carried"
        assert model.double().h.dtype == torch.float64
        return
    del model.h
    assert role(model, "h") == "plain"
    assert model.double().h.dtype == torch.float32  # as nn.Module leaves the base's attribute
    model.remember(torch.ones(2))  # the framework's name, for good
    assert role(model, "h") == "plain"


class _MovesH(nn.Module):
    """The twin: its runtime state ``h`` is a plain attribute that its own ``.to()`` moves."""

    def _apply(self, fn: Any, recurse: bool = True) -> Any:
        result = super()._apply(fn, recurse)
        if isinstance(self.__dict__.get("h"), torch.Tensor):
            self.__dict__["h"] = fn(self.__dict__["h"])
        return result


def _resetting_delattr(self: nn.Module, name: str) -> None:
    super(type(self), self).__delattr__(name)  # then the default stored again
    if name == "h":
        self.h = torch.zeros(2)


def _object_delattr(self: nn.Module, name: str) -> None:
    object.__delattr__(self, name)  # past nn.Module's and autoreg's


def _popping_delattr(self: nn.Module, name: str) -> None:
    self.__dict__.pop(name)


@pytest.mark.parametrize(
    "delete",
    [_resetting_delattr, _object_delattr, _popping_delattr],
    ids=["super then a default", "object.__delattr__", "__dict__.pop"],
)
def test_a_subclass_delattr_over_the_mixin_leaves_what_the_twins_to_converts(
    delete: Callable[[nn.Module, str], None],
) -> None:
    """A subclass of an autoreg class whose ``__delattr__`` calls the mixin's and stores a default
    again, or bypasses it: after ``del model.h``, after a value put back into ``__dict__`` around
    ``__setattr__`` (``vars(model).update``), and after the model stores ``h`` again, ``.double()``
    converts what the twin's ``.to()`` converts. (The mixin's ``__delattr__`` below a base of the
    framework's is tested above; a subclass's over it was not.)"""
    seen: list[tuple[str, torch.dtype | None]] = []
    for base in (autoreg.Module, _MovesH):
        cls = type("Deleting", (base,), {"__delattr__": delete, "__module__": __name__})
        model = cls()
        model.h = torch.ones(2)  # run time: the model's state
        del model.h
        model.double()
        seen.append(("after del", getattr(model, "h", torch.ones(0, dtype=torch.int8)).dtype))
        if "h" not in vars(model):
            vars(model).update(h=torch.ones(2))  # put back around __setattr__
            model.double()
            seen.append(("put back", model.h.dtype))
        model.h = torch.ones(2)
        seen.append(("stored again", model.double().h.dtype))
    assert seen[: len(seen) // 2] == seen[len(seen) // 2 :]


class Logging(nn.Module):
    """A framework base whose ``__setattr__`` sees every assignment, as a logging or validating
    base does."""

    def __setattr__(self, name: str, value: Any) -> None:
        self.__dict__.setdefault("_seen", []).append(name)
        super().__setattr__(name, value)


class LoggingLinear(Logging):
    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(2))
        self.child = nn.Identity()


class AutoLoggingLinear(autoreg.AutoRegisterMixin, LoggingLinear):
    pass


class _Double(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


def test_a_bases_setattr_sees_new_submodules_and_class_swaps_as_on_the_twin() -> None:
    """The replays of a new submodule (row 1) and of a class assigned to ``__class__`` (row 12,
    twice per parametrization round) still run the base's ``__setattr__``, in the twin's order."""

    def seen(cls: type[nn.Module]) -> tuple[list[str], nn.Module]:
        cls()  # the class is final
        module = cls()
        module.extra = nn.Linear(1, 1)
        parametrize.register_parametrization(module, "weight", _Double())
        parametrize.remove_parametrizations(module, "weight", leave_parametrized=False)
        return module.__dict__["_seen"], module

    expected, twin = seen(LoggingLinear)
    assert expected.count("__class__") == 2  # the check is not vacuous
    names, module = seen(AutoLoggingLinear)
    assert names == expected
    assert type(module) is AutoLoggingLinear
    assert set(module._modules) == set(twin._modules)
