"""``autoreg audit TARGET [--forward [--train] [--eval]] [--json]``: the audits, from the shell.

The command builds the model TARGET names, runs ``autoreg.find_unregistered`` on it and prints a
table of findings, each with its fix (``--json`` prints them for machines). With ``--forward`` the
factory returns ``(model, args)`` or ``(model, args, kwargs)``, and the command also runs
``autoreg.audit_forward(model, *args, **kwargs)``: one forward pass on the meta device, in the mode
the model is in, or in the one ``--train`` / ``--eval`` choose (both: each in turn). Its table
follows the first. Exit status: 0 clean, 1 findings, 2 usage error.
"""

from __future__ import annotations

import argparse
import json

from ._audit import find_unregistered
from ._errors import ForwardAuditError
from ._forward_audit import ForwardFinding, ModeChoice, audit_forward, audited_modes
from ._messages.cli import (
    A_MODULE_INSTANCE,
    AUDIT_DESCRIPTION,
    AUDIT_FORWARD_HELP,
    AUDIT_HELP,
    AUDIT_JSON_HELP,
    AUDIT_MODE_HELP,
    AUDIT_TARGET_HELP,
    CALLED,
    FORWARD_FAILED,
    MODE_WITHOUT_FORWARD,
    NOT_A_FORWARD,
    NOT_CALLED,
)
from ._report import audit_json, report_text
from ._target import EXIT_CLEAN, EXIT_FINDINGS, Target, UsageError, emit, load

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``audit`` to the command line's subcommands."""
    parser = subparsers.add_parser("audit", help=AUDIT_HELP, description=AUDIT_DESCRIPTION)
    parser.add_argument("target", metavar="TARGET", help=AUDIT_TARGET_HELP)
    parser.add_argument("--json", action="store_true", help=AUDIT_JSON_HELP)
    parser.add_argument("--forward", action="store_true", help=AUDIT_FORWARD_HELP)
    for mode in ("train", "eval"):
        parser.add_argument(
            f"--{mode}", action="store_true", help=AUDIT_MODE_HELP.format(mode=mode)
        )


def run(args: argparse.Namespace) -> int:
    """Audit the target ``args`` name; print the report; return the exit status."""
    mode = _mode(args)
    target = load(args.target)
    forward = _audit_forward(target, mode) if args.forward else None
    findings = find_unregistered(target.model)
    modes = audited_modes(target.model, mode) if args.forward else ()
    if args.json:
        report = audit_json(args.target, target.model, findings, forward, modes)
        emit(json.dumps(report, indent=2))
    else:
        emit(report_text(target.model, findings, forward, modes))
    return EXIT_FINDINGS if findings or forward else EXIT_CLEAN


def _mode(args: argparse.Namespace) -> ModeChoice | None:
    """The mode ``--train`` and ``--eval`` choose: one, both, or none (the model's own)."""
    if (args.train or args.eval) and not args.forward:
        raise UsageError(MODE_WITHOUT_FORWARD)
    if args.train and args.eval:
        return "both"
    if args.train or args.eval:
        return "train" if args.train else "eval"
    return None


def _audit_forward(target: Target, mode: ModeChoice | None) -> list[ForwardFinding]:
    if target.args is None:
        shown = A_MODULE_INSTANCE.format(cls=type(target.model).__name__)
        called = CALLED if target.called else NOT_CALLED
        raise UsageError(NOT_A_FORWARD.format(target=target.name, called=called, value=shown))
    try:
        return audit_forward(target.model, *target.args, mode=mode, **target.kwargs)
    except ForwardAuditError as error:
        raise UsageError(FORWARD_FAILED.format(target=target.name, error=error)) from None
