"""``python -m autoreg audit package.module:factory``: what would ``.to()`` leave behind?

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

from ._audit import Finding, find_unregistered
from ._forward import ForwardAuditError, ForwardFinding, audit_forward, format_forward

__all__ = ["main"]

PROG: Final = "python -m autoreg"

EXIT_CLEAN: Final = 0
EXIT_FINDINGS: Final = 1
EXIT_USAGE: Final = 2

MALFORMED: Final = """\
{target!r} is not a target: write package.module:factory, e.g. \
python -m autoreg audit my_project.model:build"""
NO_MODULE: Final = "cannot import {module!r}: {error} (is it importable from {cwd}?)"
IMPORT_RAISED: Final = "importing {module!r} raised {error}"
NO_NAME: Final = "{owner} has no attribute {name!r}"
NOT_CALLABLE: Final = (
    "{target} is {value}: expected a module class or a function returning a module"
)
FACTORY_RAISED: Final = "{target}() raised {error}"
NOT_A_MODULE: Final = "{target}() returned {value}, not an nn.Module"
NOT_A_FORWARD: Final = (
    "{target}{called} {value}: with --forward, expected (model, args) or (model, args, kwargs), "
    "e.g. return Net(), (torch.ones(2, 3),)"
)
FORWARD_FAILED: Final = "cannot audit the forward of {target}: {error}"

CLEAN: Final = "Nothing in {cls} would be left behind by .to()."
SUMMARY: Final = "{count} {tensors} in {cls} would be left behind by .to()."


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
    args = parser.parse_args(argv)

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
        report = _report(args.target, model, findings)
        if forward is not None:
            report["forward"] = [finding.as_dict() for finding in forward]
        print(json.dumps(report, indent=2))
    else:
        print(report_text(model, findings, forward))
    return EXIT_FINDINGS if findings or forward else EXIT_CLEAN


def report_text(
    model: nn.Module, findings: list[Finding], forward: list[ForwardFinding] | None = None
) -> str:
    """The tables the command prints: the tensors ``.to()`` would leave behind, then (when
    ``forward`` is given) the strays of the forward pass."""
    text = _table(model, findings)
    if forward is None:
        return text
    return f"{text}\n\n{format_forward(forward, type(model).__name__)}"


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
        raise _UsageError(NOT_A_MODULE.format(target=target, value=_typename(model)))
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


def _tensor(finding: Finding) -> str:
    """``float32[16, 16] cpu``, with ``, requires grad`` when it does."""
    dtype = str(finding.dtype).removeprefix("torch.")
    text = f"{dtype}{list(finding.shape)} {finding.device}"
    return text + ", requires grad" if finding.requires_grad else text


def _table(model: nn.Module, findings: list[Finding]) -> str:
    cls = type(model).__name__
    if not findings:
        return CLEAN.format(cls=cls)
    header = ("PATH", "CLASS", "TENSOR", "FIX")
    rows = [header] + [(f.path, f.class_name, _tensor(f), f.fix) for f in findings]
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True))
        + "  "
        + row[3]
        for row in rows
    ]
    return "\n".join(
        [
            *lines,
            "",
            SUMMARY.format(
                count=len(findings), tensors="tensor" if len(findings) == 1 else "tensors", cls=cls
            ),
        ]
    )


def _report(target: str, model: nn.Module, findings: list[Finding]) -> dict[str, object]:
    return {
        "target": target,
        "class": type(model).__name__,
        "findings": [finding.as_dict() for finding in findings],
    }


if __name__ == "__main__":
    sys.exit(main())
