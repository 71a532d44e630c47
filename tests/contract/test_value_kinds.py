"""What a value is, for the contract, is read from its type: autoreg never runs a value's code to
classify it (no ``hasattr``, no ``isinstance`` that reads ``__class__`` through the value).

A configuration object whose ``__getattr__`` raises ``KeyError`` for a missing key (as dict-backed
configs do) is stored by nn.Module like any object; autoreg must store it too, without asking it
anything.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

import autoreg
from autoreg._carry import carried
from tests.support import role


class Config:
    """A dict-backed config: a missing key is a KeyError, also for ``__torch_function__``."""

    def __init__(self, **values: Any) -> None:
        self.__dict__["_values"] = values
        self.__dict__["asked"] = []

    def __getattr__(self, key: str) -> Any:
        self.__dict__["asked"].append(key)
        return self.__dict__["_values"][key]


class Auto(autoreg.Module):
    def __init__(self, config: Config | None = None) -> None:
        super().__init__()
        self.table = torch.zeros(2)  # an auto-registered buffer (row 10)
        if config is not None:
            self.config = config


class Twin(nn.Module):
    def __init__(self, config: Config | None = None) -> None:
        super().__init__()
        self.register_buffer("table", torch.zeros(2), persistent=False)
        if config is not None:
            self.config = config


class Strict(autoreg.Module, strict=True):
    def __init__(self, config: Config) -> None:
        super().__init__()
        self.config = config


class Linear(autoreg.AutoRegisterMixin, nn.Linear):
    """A class with a framework base: the first assignment of a name is attributed (row 4)."""


@pytest.mark.parametrize(
    "build",
    [
        lambda c: Auto(c),
        lambda c: Strict(c),
        lambda c: _after(Auto(), c),
        lambda c: _after(Linear(2, 2), c),
        lambda c: _after(autoreg.Module(), c),
    ],
    ids=["in-init", "strict", "at-run-time", "framework-base", "autoreg.Module"],
)
def test_an_object_whose_getattr_raises_key_error_is_stored_as_nn_module_stores_it(
    build: Any,
) -> None:
    """main: ``hasattr(value, "__torch_function__")`` let the KeyError out, and the assignment
    failed; nn.Module stores the object without asking it anything."""
    config = Config(width=3)
    module = build(config)
    assert vars(module)["config"] is config
    assert role(module, "config") == "plain"
    assert config.asked == []  # its code never ran
    twin = Twin(Config(width=3))
    assert vars(twin)["config"].asked == []  # nor does nn.Module run it


def _after(module: nn.Module, config: Config) -> nn.Module:
    module.config = config
    return module


def test_the_object_over_an_auto_registered_buffer_releases_it_without_being_asked() -> None:
    """Row 2 asks whether nn.Module would refuse the value for a buffer (no
    ``__torch_function__``) from the value's type: the buffer is released, the object stored."""
    config = Config()
    module = Auto()
    module.table = config
    assert "table" not in module._buffers
    assert vars(module)["table"] is config
    assert config.asked == []


class Traced:
    """Takes part in torch functions through its type, as a torch.fx Proxy does."""

    @classmethod
    def __torch_function__(cls, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


class TracedSubclass(Traced):
    pass


@pytest.mark.parametrize("cls", [Traced, TracedSubclass], ids=["own", "inherited"])
def test_a_type_with_torch_function_keeps_the_buffer_as_nn_module_does(cls: type) -> None:
    """A value whose type defines ``__torch_function__`` is one nn.Module (torch >= 2.6) takes for
    a buffer: not row 2, so autoreg leaves it to nn.Module (row 3) and the buffer stays."""
    module = Auto()
    value = cls()
    if "__torch_function__" in nn.Module.__setattr__.__code__.co_consts:
        module.table = value
        assert module._buffers["table"] is value
    else:
        with pytest.raises(TypeError, match=r"cannot assign '.*Traced.*' as buffer 'table'"):
            module.table = value
        assert "table" in module._buffers


class LyingList:
    """An object that claims to be a list and a tensor through ``__class__`` (as mocks with a spec
    do): its type says it is neither, and that is what counts."""

    asked: list[str] = []

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        LyingList.asked.append("__class__")
        return list

    def __iter__(self) -> Any:
        LyingList.asked.append("__iter__")
        return iter([torch.zeros(1)])


def test_an_object_claiming_to_be_a_container_is_not_walked() -> None:
    """main: ``isinstance(value, (list, tuple, dict))`` read ``__class__`` and judged the object a
    container (row 8, carried); its type says it is a plain object (row 12)."""
    LyingList.asked.clear()
    module = autoreg.Module()
    value = LyingList()
    module.items = value
    module.double()
    assert "__iter__" not in LyingList.asked
    assert vars(module)["items"] is value
    assert not carried(module, "items")  # row 12: a plain attribute
