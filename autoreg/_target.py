"""What every subcommand shares: a target ``package.module:factory`` built, exit codes, output.

A target names a module instance, a module class, or a zero-argument callable that returns a
module, ``(model, args)`` or ``(model, args, kwargs)`` (the inputs of one forward pass). Whatever
goes wrong while building it (a malformed target, a file path, a module that cannot be imported,
a missing name, a factory that raises or returns something else) is a ``UsageError``: one line,
exit status 2, located at the user's line, never a traceback. The commands build it inside
``_cli.users_code``: what the user's code prints goes to stderr, and stdout carries the report
only.

The user's project is imported first: the directory the command runs in goes to the front of
``sys.path``, before the entries of ``PYTHONPATH`` (a clone of autoreg there has an ``examples``
package of its own), and a top-level package that directory holds is imported from it even if a
package of the same name was imported from elsewhere before.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ._cli import UsageError, prog
from ._frames import error_line, location, short_path
from ._messages.audits import SCRIPTED_MODULE
from ._messages.cli import (
    FACTORY_NOT_A_MODULE,
    FACTORY_RAISED,
    FILE_TARGET,
    IMPORT_RAISED,
    MALFORMED,
    NO_MODULE,
    NO_NAME,
    NOT_A_FUNCTION,
    NOT_CALLABLE,
    RAISED_AT,
)
from ._messages.describe import describe_error, describe_object

__all__ = [
    "Target",
    "load",
    "load_function",
]


@dataclasses.dataclass(frozen=True)
class Target:
    """What a target built: the model, and the inputs of a forward pass when it returned them."""

    name: str
    model: nn.Module
    args: tuple[Any, ...] | None = None
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    called: bool = True  # the target is a factory (False: a module instance)


def load(target: str) -> Target:
    """Import and call what ``target`` names; raise ``UsageError`` with the reason if it does
    not give a module, ``(model, args)`` or ``(model, args, kwargs)``."""
    value, called = _resolve(target)
    built: Target | None = None
    if isinstance(value, nn.Module):
        built = Target(target, value, called=called)
    elif called and isinstance(value, tuple) and len(value) in (2, 3):
        model, args, kwargs = (*value, {}) if len(value) == 2 else value
        if (
            isinstance(model, nn.Module)
            and isinstance(args, (tuple, list))
            and isinstance(kwargs, dict)
        ):
            built = Target(target, model, tuple(args), kwargs)
    if built is None:
        raise UsageError(FACTORY_NOT_A_MODULE.format(target=target, value=describe_object(value)))
    if isinstance(built.model, torch.jit.ScriptModule):
        cls = type(built.model).__name__
        raise UsageError(SCRIPTED_MODULE.format(what=f"{target!r} gives", cls=cls))
    return built


def load_function(target: str) -> Callable[..., Any]:
    """The function ``target`` names (``package.module:function``), not called; raise
    ``UsageError`` if it cannot be had or is not callable."""
    value = _named(target)
    if not callable(value) or isinstance(value, type):
        raise UsageError(NOT_A_FUNCTION.format(target=target, value=describe_object(value)))
    return value


def _resolve(target: str) -> tuple[object, bool]:
    """What ``target`` names: a module instance as it is, or what its factory returns (and
    whether it was called); raise ``UsageError`` with the reason if it cannot be had."""
    namespace = _named(target)
    if isinstance(namespace, nn.Module):
        return namespace, False
    if not callable(namespace):
        raise UsageError(NOT_CALLABLE.format(target=target, value=describe_object(namespace)))
    try:
        return namespace(), True
    except Exception as error:  # noqa: BLE001 - any failure of the user's factory is reported
        raise UsageError(FACTORY_RAISED.format(target=target, error=_brief(error))) from None


def _project_first(module_name: str) -> None:
    """Import from the directory the command runs in first, as ``python -m`` does, and before
    ``PYTHONPATH``: put it at the front of ``sys.path``; forget a top-level package of
    ``module_name`` imported from elsewhere when that directory has one of its own."""
    cwd = os.getcwd()
    sys.path[:] = [cwd, *(entry for entry in sys.path if entry not in ("", cwd))]
    top = module_name.partition(".")[0]
    loaded = sys.modules.get(top)
    if loaded is None or not _in_project(top, cwd):
        return
    origin = getattr(loaded, "__file__", None) or next(iter(getattr(loaded, "__path__", [])), "")
    if origin and os.path.abspath(origin).startswith(os.path.join(cwd, top)):
        return
    for name in [name for name in sys.modules if name == top or name.startswith(top + ".")]:
        del sys.modules[name]


def _in_project(top: str, cwd: str) -> bool:
    """Whether ``cwd`` holds a package or module ``top``."""
    return os.path.isdir(os.path.join(cwd, top)) or os.path.isfile(os.path.join(cwd, top + ".py"))


def _named(target: str) -> object:
    """The object ``target`` names; raise ``UsageError`` with the reason if it cannot be had."""
    module_name, _, attribute = target.partition(":")
    names = attribute.split(".")
    if module_name.endswith(".py") or "/" in module_name or os.sep in module_name:
        raise UsageError(FILE_TARGET.format(target=target, dotted=_dotted(module_name, attribute)))
    if not module_name or not all(names) or ":" in attribute:
        raise UsageError(MALFORMED.format(target=target, prog=prog()))
    _project_first(module_name)
    try:
        namespace: object = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is not None and (module_name + ".").startswith(error.name + "."):
            raise UsageError(
                NO_MODULE.format(module=module_name, error=error, cwd=os.getcwd())
            ) from None
        raise UsageError(IMPORT_RAISED.format(module=module_name, error=_brief(error))) from None
    except Exception as error:  # noqa: BLE001 - any failure of the user's module is reported
        raise UsageError(IMPORT_RAISED.format(module=module_name, error=_brief(error))) from None
    for position, name in enumerate(names):
        try:
            namespace = getattr(namespace, name)
        except AttributeError:
            owner = f"module {module_name!r}"
            if position:
                owner = repr(":".join([module_name, ".".join(names[:position])]))
            raise UsageError(NO_NAME.format(owner=owner, name=name)) from None
    return namespace


def _dotted(path: str, attribute: str) -> str:
    """The target a file path meant: ``mylib/model.py`` -> ``mylib.model:attribute``."""
    if os.path.isabs(path):
        path = short_path(path)
    parts = [p for p in path.removesuffix(".py").replace(os.sep, "/").split("/") if p != "."]
    return f"{'.'.join(parts)}:{attribute}" if attribute else ".".join(parts)


def _brief(error: BaseException) -> str:
    """``TypeError: message (at path/to/file.py:12)``: the error and the user's line that raised
    it, the innermost outside torch and autoreg (none when the call itself failed)."""
    line = error_line(error)
    if line is None:
        return describe_error(error)
    return RAISED_AT.format(error=describe_error(error), where=location(*line))
