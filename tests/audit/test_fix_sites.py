"""Where ``autoreg fix`` records each store (``_fix.sites``): the line of the code that made it,
past the ``__setattr__`` overrides of the module's classes, known by the identity of their code
(a decorated override's frame is its wrapper's), and never past another object's."""

from __future__ import annotations

import functools
import inspect
from typing import Any

import pytest
import torch
from torch import nn

from autoreg._fix.sites import record_stores

from .fix_support import Project, project

__all__ = ["project"]


def _logged(setattr_: Any) -> Any:
    """A decorator around ``__setattr__``, as logging and validation libraries write them."""

    @functools.wraps(setattr_)
    def wrapper(self: object, name: str, value: object) -> None:
        setattr_(self, name, value)

    return wrapper


def _line_of(function: Any, marker: str) -> int:
    """The line number of the line of ``function`` that holds ``marker``."""
    lines, first = inspect.getsourcelines(function)
    return first + next(i for i, line in enumerate(lines) if marker in line)


class Logged(nn.Module):
    @_logged
    def __setattr__(self, name: str, value: object) -> None:
        super().__setattr__(name, value)

    def __init__(self) -> None:
        super().__init__()
        self.mask = torch.ones(2)  # the store


class Proxy:
    """Not a module: its ``__setattr__`` stores into the module it wraps."""

    def __init__(self, module: nn.Module) -> None:
        object.__setattr__(self, "module", module)

    def __setattr__(self, name: str, value: object) -> None:
        setattr(self.module, name, value)  # the store


def test_a_store_past_a_decorated_setattr_override_is_the_users_line() -> None:
    with record_stores() as stores:
        module = Logged()
    (site,) = stores.of(module, "mask")
    assert (site.filename, site.lineno) == (__file__, _line_of(Logged.__init__, "# the store"))
    assert site.function == "Logged.__init__"
    assert site.construction


def test_a_store_made_by_another_objects_setattr_is_that_objects_line() -> None:
    module = nn.Linear(2, 2)
    with record_stores() as stores:
        proxy = Proxy(module)
        proxy.mask = torch.ones(2)  # not the store: the proxy's __setattr__ makes it
    (site,) = stores.of(module, "mask")
    assert (site.filename, site.lineno) == (__file__, _line_of(Proxy.__setattr__, "# the store"))
    assert site.function == "Proxy.__setattr__"
    assert not site.construction


DECORATED = """\
import functools

import torch
from torch import nn


def logged(setattr_):
    @functools.wraps(setattr_)
    def wrapper(self, name, value):
        setattr_(self, name, value)

    return wrapper


class Net(nn.Module):
    @logged
    def __setattr__(self, name, value):
        super().__setattr__(name, value)

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(2, 2)
        self.mask = torch.ones(2)

    def forward(self, x):
        return self.proj(x) * self.mask


def build():
    return Net(), (torch.ones(3, 2),)
"""


def test_fix_lists_the_line_past_a_decorated_setattr(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: the store was the decorator's, and ``--style buffer`` added a ``None`` buffer at
    the top of ``__init__`` instead of the line. The class's own ``__setattr__`` holds the name
    back (``register_buffer`` would skip it): it is listed at its line."""
    project.write("m", DECORATED)
    status, out, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer")
    assert status == 1
    line = DECORATED.splitlines().index("        self.mask = torch.ones(2)") + 1
    assert f"m.py:{line}: Net.mask: Net's own __setattr__" in err
    assert not [line for line in out.splitlines() if line.startswith("+")]
