"""The command line, ``autoreg`` (or ``python -m autoreg``): ``audit package.module:factory``.

The factory is a class or a zero-argument callable that returns an ``nn.Module`` (or a module
instance itself). The command builds the model, runs ``autoreg.find_unregistered`` on it and prints
a table of findings, each with its fix (``--json`` prints them for machines).

With ``--forward`` the factory returns ``(model, args)`` or ``(model, args, kwargs)``, and the
command also runs ``autoreg.audit_forward(model, *args, **kwargs)``: one forward pass on the meta
device, which lists the tensors ``forward`` makes (or takes from outside the model) that stay on
the default device or dtype. Its table follows the first.

Exit status: 0 when nothing would be left behind, 1 when something would (for CI), 2 for a usage
error, explained on stderr in one message without a traceback: a malformed target, a module that
cannot be imported, a missing name, a factory that raises or returns something other than a module.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Final

from torch import nn

from ._audit import find_unregistered
from ._errors import ForwardAuditError
from ._fix import cli as fix_cli
from ._forward_audit import ForwardFinding, audit_forward
from ._messages import (
    FACTORY_NOT_A_MODULE,
    FACTORY_RAISED,
    FORWARD_FAILED,
    IMPORT_RAISED,
    MALFORMED,
    NO_MODULE,
    NO_NAME,
    NOT_A_FORWARD,
    NOT_CALLABLE,
)
from ._report import audit_json, report_text

__all__ = ["main"]

PROG: Final = "python -m autoreg"

EXIT_CLEAN: Final = 0
EXIT_FINDINGS: Final = 1
EXIT_USAGE: Final = 2


class _UsageError(Exception):
    """A command line that cannot be audited; its message is printed as is, exit status 2."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    parser = argparse.ArgumentParser(prog=_prog(), description="autoreg's migration tools.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    audit = commands.add_parser(
        "audit",
        help="list the tensors of a model that .to() would leave behind",
        description=(
            "Build the model that TARGET names and list every tensor reachable from it that "
            ".to() would leave behind, with a fix for each. Exit status: 0 clean, 1 findings, "
            "2 usage error."
        ),
    )
    audit.add_argument(
        "target",
        metavar="TARGET",
        help="package.module:factory - a module class or a zero-argument callable returning one",
    )
    audit.add_argument("--json", action="store_true", help="print the findings as JSON")
    audit.add_argument(
        "--forward",
        action="store_true",
        help="also run one forward pass on the meta device and list the tensors it makes that "
        "stay on the default device or dtype; TARGET then returns (model, args) or "
        "(model, args, kwargs)",
    )
    fix_cli.add_parser(commands)
    args = parser.parse_args(argv)
    if args.command == "fix":
        return fix_cli.run(args)

    forward: list[ForwardFinding] | None = None
    try:
        with contextlib.redirect_stdout(sys.stderr):  # stdout carries the report only
            if args.forward:
                model, forward = _audit_forward(args.target)
            else:
                model = _build(args.target)
    except _UsageError as error:
        print(f"{_prog()} audit: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    findings = find_unregistered(model)
    if args.json:
        report = audit_json(args.target, model, findings)
        if forward is not None:
            report["forward"] = [finding.as_dict() for finding in forward]
        print(json.dumps(report, indent=2))
    else:
        print(report_text(model, findings, forward))
    return EXIT_FINDINGS if findings or forward else EXIT_CLEAN


def _audit_forward(target: str) -> tuple[nn.Module, list[ForwardFinding]]:
    """Call the factory ``target`` names for ``(model, args[, kwargs])`` and audit the forward."""
    value, called = _resolve(target)
    if called and isinstance(value, tuple) and len(value) in (2, 3):
        model, args, kwargs = (*value, {}) if len(value) == 2 else value
        if (
            isinstance(model, nn.Module)
            and isinstance(args, (tuple, list))
            and isinstance(kwargs, dict)
        ):
            try:
                return model, audit_forward(model, *args, **kwargs)
            except ForwardAuditError as error:
                raise _UsageError(FORWARD_FAILED.format(target=target, error=error)) from None
    shown = f"the module {type(value).__name__}(...)" if isinstance(value, nn.Module) else None
    raise _UsageError(
        NOT_A_FORWARD.format(
            target=target,
            called="() returned" if called else " is",
            value=shown or _typename(value),
        )
    )


def _build(target: str) -> nn.Module:
    """Import and call the factory ``target`` names; raise _UsageError with the reason if not."""
    model, _ = _resolve(target)
    if not isinstance(model, nn.Module):
        raise _UsageError(FACTORY_NOT_A_MODULE.format(target=target, value=_typename(model)))
    return model


def _prog() -> str:
    """How the user ran it: the ``autoreg`` console script, or ``python -m autoreg``."""
    return "autoreg" if os.path.basename(sys.argv[0]) == "autoreg" else PROG


def _resolve(target: str) -> tuple[object, bool]:
    """What ``target`` names: a module instance as it is, or what its factory returns (and
    whether it was called); raise _UsageError with the reason if it cannot be had."""
    if "" not in sys.path and os.getcwd() not in sys.path:
        # The `autoreg` console script imports from where it is run, as `python -m autoreg` does.
        sys.path.insert(0, os.getcwd())
    module_name, _, attribute = target.partition(":")
    names = attribute.split(".")
    if not module_name or not all(names) or ":" in attribute:
        raise _UsageError(MALFORMED.format(target=target))
    try:
        namespace: object = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is not None and (module_name + ".").startswith(error.name + "."):
            raise _UsageError(
                NO_MODULE.format(module=module_name, error=error, cwd=os.getcwd())
            ) from None
        raise _UsageError(IMPORT_RAISED.format(module=module_name, error=_brief(error))) from None
    except Exception as error:  # noqa: BLE001 - any failure of the user's module is reported
        raise _UsageError(IMPORT_RAISED.format(module=module_name, error=_brief(error))) from None
    for position, name in enumerate(names):
        try:
            namespace = getattr(namespace, name)
        except AttributeError:
            owner = f"module {module_name!r}"
            if position:
                owner = repr(":".join([module_name, ".".join(names[:position])]))
            raise _UsageError(NO_NAME.format(owner=owner, name=name)) from None
    if isinstance(namespace, nn.Module):
        return namespace, False
    if not callable(namespace):
        raise _UsageError(NOT_CALLABLE.format(target=target, value=_typename(namespace)))
    try:
        return namespace(), True
    except Exception as error:  # noqa: BLE001 - any failure of the user's factory is reported
        raise _UsageError(FACTORY_RAISED.format(target=target, error=_brief(error))) from None


def _brief(error: BaseException) -> str:
    """``TypeError: message (at path/to/file.py:12)``: the error and the line that raised it."""
    text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    # The innermost frame outside this file: the user's line (none when the call itself failed).
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename != __file__]
    if not frames:
        return text
    where = frames[-1].filename
    if os.path.isabs(where) and not os.path.relpath(where).startswith(".."):
        where = os.path.relpath(where)  # a file under the working directory: short
    return f"{text} (at {where}:{frames[-1].lineno})"


def _typename(value: object) -> str:
    return f"the class '{value.__qualname__}'" if isinstance(value, type) else f"{value!r}"
