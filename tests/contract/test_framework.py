"""Row 4: a name first assigned by the code of a framework base keeps nn.Module's rules, for good.

Whose code it is, is judged by code identity: the nearest frame on the assignment's call stack that
runs a function of one of the instance's classes (property 4; the framework packages' functions
count too, tests/contract/test_framework_identity.py). A function of a base without autoreg (the
framework) makes the name the framework's; a function of the model's own classes, or none of the
instance's classes' functions at all (code outside the module), makes it the model's. The bases
below stand for LightningModule, torchmetrics' Metric and transformers' PreTrainedModel; the
integration tests run the real ones.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

import autoreg
from tests.support import role


def _framework_helper(module: nn.Module, name: str, value: object) -> None:
    """What a framework's utility module does (Lightning's ``save_hyperparameters`` helper)."""
    setattr(module, name, value)


class Framework(nn.Module):
    """A framework base: it keeps state of its own, created in __init__ and written later."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.state_total = torch.zeros(1)  # like Metric.add_state: the framework's state
        self.cache = None  # created empty, filled with a tensor by the framework later

    def add_state(self, name: str, default: torch.Tensor) -> None:
        setattr(self, name, default)

    @torch.no_grad()
    def fill_cache(self) -> None:  # a decorated method: its wrapper's code is shared
        self.cache = torch.ones(2)

    def save_hyperparameters(self, value: torch.Tensor) -> None:
        _framework_helper(self, "hparam", value)


@torch.no_grad()
def build_positions(module: nn.Module) -> None:
    """The model's helper outside its class, decorated: ``torch.no_grad()`` gives every function
    it wraps the same wrapper code, which the framework's decorated methods run too."""
    module.positions = torch.arange(3)


class Model(autoreg.AutoRegisterMixin, Framework):
    def __init__(self) -> None:
        super().__init__()
        self.add_state("metric_state", torch.zeros(3))
        self.save_hyperparameters(torch.ones(1))
        self.rotary()
        build_positions(self)
        self.mask = torch.ones(2)

    @torch.no_grad()
    def rotary(self) -> None:
        """The model's own helper, decorated as the framework's methods are."""
        self.inv_freq = torch.arange(4.0)


class Logged(Model):
    """A model class that overrides __setattr__ (logging, validation): the framework's
    assignments made through it stay the framework's."""

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)


@pytest.mark.parametrize("cls", [Model, Logged], ids=["model", "model with __setattr__"])
def test_property_4_whose_assignment_it_is_is_judged_by_the_code_that_makes_it(
    cls: Callable[[], Model],
) -> None:
    model = cls()
    # The framework's: nn.Module's rules (a plain attribute that .to() leaves, as in nn.Module).
    for name in ("state_total", "metric_state", "hparam"):
        assert role(model, name) == "plain", name
    # The model's own, in __init__: buffers, also from a decorated helper.
    assert role(model, "mask") == "non-persistent buffer"
    assert role(model, "inv_freq") == "non-persistent buffer"
    assert role(model, "positions") == "non-persistent buffer"
    model.double()
    assert model.inv_freq.dtype == torch.float64
    assert model.metric_state.dtype == torch.float32  # what the Metric's own _apply decides


@pytest.mark.parametrize("cls", [Model, Logged], ids=["model", "model with __setattr__"])
def test_a_name_the_framework_created_with_none_stays_the_frameworks(
    cls: Callable[[], Model],
) -> None:
    model = cls()
    model.cache = torch.zeros(2)  # code outside writes a tensor to the name created with None
    assert role(model, "cache") == "plain"
    model.fill_cache()  # and the framework's own code does
    assert role(model, "cache") == "plain"


def test_the_first_assignment_decides() -> None:
    model = Model()
    model.extra = torch.zeros(1)  # from outside the module: the model's (runtime, carried)
    model.add_state("extra", torch.ones(1))  # the framework writes it later: still the model's
    assert role(model, "extra") == "carried"


def _logged(method: Callable[..., Any]) -> Callable[..., Any]:
    """A ``functools.wraps`` decorator: one wrapper code object for every function it wraps."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return method(*args, **kwargs)

    return wrapper


@pytest.mark.parametrize(
    "decorate",
    [_logged, torch.no_grad(), torch.inference_mode(), torch.enable_grad()],
    ids=["functools.wraps", "torch.no_grad()", "torch.inference_mode()", "torch.enable_grad()"],
)
def test_a_decorator_with_a_shared_wrapper_does_not_confuse_whose_code_it_is(
    decorate: Callable[[Callable[..., Any]], Callable[..., Any]],
) -> None:
    """The framework's method and the model's, decorated alike: the wrapper's code runs for both,
    and tells nothing; the method it wraps does."""

    class Base(nn.Module):
        @decorate
        def setup_base(self) -> None:
            self.base_table = torch.zeros(2)

    class Own(autoreg.AutoRegisterMixin, Base):
        def __init__(self) -> None:
            super().__init__()
            self.setup_base()
            self.setup_own()

        @decorate
        def setup_own(self) -> None:
            self.own_table = torch.zeros(2)

    module = Own()
    assert role(module, "base_table") == "plain"
    assert role(module, "own_table") == "non-persistent buffer"
    module.double()
    assert module.own_table.dtype == torch.float64
    assert module.base_table.dtype == torch.float32  # nn.Module's rules: a plain attribute


def test_a_nested_function_and_a_lambda_in_a_method_are_that_methods() -> None:
    class Own(autoreg.AutoRegisterMixin, Framework):
        def __init__(self) -> None:
            super().__init__()

            def build() -> None:
                self.nested = torch.zeros(1)

            build()
            (lambda: setattr(self, "via_lambda", torch.zeros(1)))()

    module = Own()
    assert role(module, "nested") == "non-persistent buffer"
    assert role(module, "via_lambda") == "non-persistent buffer"


class Recording(nn.Module):
    """A base whose ``__setattr__`` sees every assignment (validation, logging), then stores."""

    def __setattr__(self, name: str, value: Any) -> None:
        self.__dict__.setdefault("seen", []).append(name)
        super().__setattr__(name, value)


def test_a_bases_setattr_sees_every_assignment_it_sees_on_the_twin() -> None:
    """autoreg decides, then hands every store to the base's ``__setattr__``: a buffer update, a
    runtime tensor (new and updated), plain values, a module, a parameter."""

    class Auto(autoreg.AutoRegisterMixin, Recording):
        def __init__(self) -> None:
            super().__init__()
            self.scale = torch.ones(2)

    class Twin(Recording):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("scale", torch.ones(2), persistent=False)

    names = ["scale", "state", "state", "x", "x", "lin", "w"]
    seen = {}
    for cls in (Auto, Twin):
        module = cls()
        module.__dict__["seen"] = []  # what construction assigned is not compared
        values = [torch.zeros(2), torch.zeros(2), torch.ones(2), 1, None, nn.Linear(2, 2)]
        for name, value in zip(names, [*values, nn.Parameter(torch.ones(1))], strict=True):
            setattr(module, name, value)
        seen[cls] = list(module.__dict__["seen"])
    assert seen[Auto] == seen[Twin] == names
