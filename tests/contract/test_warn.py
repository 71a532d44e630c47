"""Warn mode (README, Options): registers or carries as usual and warns once per (class, name)."""

from __future__ import annotations

import functools
import warnings
from typing import Any

import pytest
import torch

import autoreg


class Gradual(autoreg.Module, warn=True):
    declared: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.declared = torch.zeros(1)

    def build_mask(self) -> None:
        self.mask = torch.ones(2)


def test_a_construction_time_tensor_warns_at_the_assignment_line() -> None:
    class Legacy(autoreg.Module, warn=True):
        def __init__(self) -> None:
            super().__init__()
            self.mask = torch.ones(2)  # the line the warning points at

    with pytest.warns(autoreg.AutoRegisterWarning) as record:
        module = Legacy()
    assert len(record) == 1
    warning = record[0]
    assert warning.filename == __file__
    with open(__file__) as source:
        assert "the line the warning points at" in source.readlines()[warning.lineno - 1]
    assert str(warning.message).startswith(
        "Legacy.mask = Tensor(shape=(2,), dtype=torch.float32, device='cpu') was registered as a "
        "non-persistent buffer because it was assigned during construction.\n"
        "Make it explicit, whichever fits (annotations go in the class body):\n"
        "    a buffer (non-persistent):   mask: torch.Tensor\n"
    )
    assert "mask" in module._buffers  # registered all the same


def test_a_runtime_tensor_warns_that_it_is_carried() -> None:
    module = Gradual()
    with pytest.warns(autoreg.AutoRegisterWarning, match=r"Gradual\.state = .* was carried as"):
        module.state = torch.zeros(1)
    assert module.double().state.dtype == torch.float64


def test_once_per_class_and_name() -> None:
    class Once(autoreg.Module, warn=True):
        def __init__(self) -> None:
            super().__init__()
            self.mask = torch.ones(2)

    with pytest.warns(autoreg.AutoRegisterWarning):
        Once()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Once()  # the same (class, name): silent
        module = Once()
    with pytest.warns(autoreg.AutoRegisterWarning, match=r"Once\.other"):
        module.other = torch.zeros(1)  # another name: warns


def test_subclasses_warn_for_themselves() -> None:
    class Sub(Gradual):
        pass

    for cls in (Gradual, Sub):
        with pytest.warns(autoreg.AutoRegisterWarning, match=rf"{cls.__name__}\.mask"):
            cls().build_mask()


def test_declared_names_do_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        module = Gradual()
        module.declared = torch.ones(1)
    assert "declared" in module._buffers


def test_the_warning_points_at_the_assignment_through_a_setattr_override() -> None:
    class Logged(autoreg.Module, warn=True):
        def __setattr__(self, name: str, value: object) -> None:
            super().__setattr__(name, value)

    module = Logged()
    with pytest.warns(autoreg.AutoRegisterWarning) as record:
        module.state = torch.zeros(2)  # the runtime line the warning points at
    assert record[0].filename == __file__
    with open(__file__) as source:
        line = source.readlines()[record[0].lineno - 1]
    assert "the runtime line the warning points at" in line


def _logged(setattr_: Any) -> Any:
    """A decorator around ``__setattr__``, as logging and validation libraries write them."""

    @functools.wraps(setattr_)
    def wrapper(self: object, name: str, value: object) -> None:
        setattr_(self, name, value)  # a frame named wrapper, not __setattr__

    return wrapper


class _FrameworkBase(torch.nn.Module):
    """A framework base whose ``__setattr__`` override is decorated."""

    @_logged
    def __setattr__(self, name: str, value: object) -> None:
        super().__setattr__(name, value)


class _Warned(autoreg.Module, warn=True):
    def step(self) -> None:
        self.state = torch.zeros(2)  # the decorated line the warning points at


@pytest.mark.parametrize("where", ["own class", "plain subclass", "framework base"])
def test_the_warning_points_at_the_assignment_through_a_decorated_setattr(where: str) -> None:
    if where == "plain subclass":  # no keywords or annotations: its record starts from its base's
        _Warned().x = 1  # the base has had an instance: the subclass's record is final at once

        class Sub(_Warned):
            @_logged
            def __setattr__(self, name: str, value: object) -> None:
                super().__setattr__(name, value)

        module: Any = Sub()
    elif where == "own class":

        class Logged(autoreg.Module, warn=True):
            @_logged
            def __setattr__(self, name: str, value: object) -> None:
                super().__setattr__(name, value)

            def step(self) -> None:
                self.state = torch.zeros(2)  # the decorated line the warning points at

        module = Logged()
    else:

        class OnFramework(autoreg.AutoRegisterMixin, _FrameworkBase, warn=True):
            def step(self) -> None:  # the model's code (row 4): its state is carried
                self.state = torch.zeros(2)  # the decorated line the warning points at

        module = OnFramework()
    with pytest.warns(autoreg.AutoRegisterWarning) as record:
        module.step()
    assert len(record) == 1
    assert record[0].filename == __file__
    with open(__file__) as source:
        line = source.readlines()[record[0].lineno - 1]
    assert "the decorated line the warning points at" in line
