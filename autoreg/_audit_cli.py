"""``autoreg audit TARGET [--forward | --step FUNCTION] [--train] [--eval] [--low-precision DTYPE]
[--json]``: the audits.

The command builds the model TARGET names, runs ``autoreg.find_unregistered`` on it and prints
its findings, each class with its fix (``--json`` prints them for machines). With ``--forward`` the
factory returns ``(model, args)`` or ``(model, args, kwargs)``, and the command also runs
``autoreg.audit_forward(model, *args, **kwargs)``: one forward pass on the CPU, in the mode the
model is in, or in the one ``--train`` / ``--eval`` choose (both: each in turn). ``--step
package.module:function`` audits ``function(model, *args, **kwargs)`` instead of the forward (a
loss, a training step). Where the forward cannot be audited, the attribute audit is printed all
the same, with one line saying what was not audited and why.

Exit status, one rule for ``audit``, ``fix`` and ``fix --write`` (``exit_status``): 0 when
everything asked for was audited and nothing was found; 1 when something was found, or something
could not be audited; 2 for a usage error or a target that cannot be built.
"""

from __future__ import annotations

import argparse
import json

import torch

from ._audit import Finding, find_unregistered
from ._cli import EXIT_CLEAN, EXIT_FINDINGS, UsageError, emit, users_code
from ._errors import ForwardAuditError
from ._forward_audit import (
    LOW_PRECISION,
    ModeChoice,
    Step,
    audit_forward,
    audited_modes,
    not_audited,
    stopped_in,
    what_runs,
)
from ._messages.cli import (
    A_MODULE_INSTANCE,
    CALLED,
    LOW_PRECISION_WITHOUT_FORWARD,
    MODE_WITHOUT_FORWARD,
    NOT_A_FORWARD,
    NOT_CALLED,
    SKIP_LOW_PRECISION,
)
from ._messages.describe import dtype_name
from ._report import Forward, audit_json, report_text
from ._target import Target, load, load_function

__all__ = ["exit_status", "forward_report", "low_precision", "run"]


def run(args: argparse.Namespace) -> int:
    """Audit the target ``args`` name; print the report; return the exit status."""
    forward_asked = args.forward or args.step is not None
    mode = _mode(args, forward_asked)
    if args.low_precision is not None and not forward_asked:
        raise UsageError(LOW_PRECISION_WITHOUT_FORWARD)
    low = low_precision(args.low_precision)
    with users_code():
        step = load_function(args.step) if args.step is not None else None
        target = load(args.target)
        forward = forward_report(target, mode, step, low) if forward_asked else None
        findings = find_unregistered(target.model)
    if args.json:
        emit(json.dumps(audit_json(args.target, target.model, findings, forward), indent=2))
    else:
        emit(report_text(target.model, findings, forward))
    return exit_status(findings, forward)


def exit_status(findings: list[Finding], forward: Forward | None) -> int:
    """0 when everything asked for was audited and nothing was found; 1 when something was
    found, or the forward could not be audited (usage errors exit 2, by ``UsageError``)."""
    if findings or (forward is not None and (forward.findings or forward.not_audited)):
        return EXIT_FINDINGS
    return EXIT_CLEAN


def forward_report(
    target: Target, mode: ModeChoice | None, step: Step | None, low: torch.dtype | None
) -> Forward:
    """The forward audit of ``target`` (its ``step``, if given), its second pass in ``low``
    (None: none): its findings, or, where it cannot run to its end, what was found before and one
    line saying why (and, when the pass in ``low`` stopped, how to skip it)."""
    if target.args is None:
        shown = A_MODULE_INSTANCE.format(cls=type(target.model).__name__)
        called = CALLED if target.called else NOT_CALLED
        raise UsageError(NOT_A_FORWARD.format(target=target.name, called=called, value=shown))
    modes = audited_modes(target.model, mode)
    what = what_runs(target.model, step)
    try:
        found = audit_forward(
            target.model, *target.args, step=step, mode=mode, low_precision=low, **target.kwargs
        )
    except ForwardAuditError as error:
        reason = not_audited(error)
        stopped = stopped_in(error)
        if stopped is not None:
            reason = SKIP_LOW_PRECISION.format(reason=reason, low=dtype_name(stopped))
        return Forward(error.findings, modes, what, reason, low, stopped_low=stopped is not None)
    return Forward(found, modes, what, low_precision=low)


def low_precision(choice: str | None) -> torch.dtype | None:
    """The dtype ``--low-precision`` names (``LOW_PRECISION`` when not given); None for none."""
    if choice is None:
        return LOW_PRECISION
    if choice == "none":
        return None
    dtype: torch.dtype = getattr(torch, choice)
    return dtype


def _mode(args: argparse.Namespace, forward: bool) -> ModeChoice | None:
    """The mode ``--train`` and ``--eval`` choose: one, both, or none (the model's own)."""
    if (args.train or args.eval) and not forward:
        raise UsageError(MODE_WITHOUT_FORWARD)
    if args.train and args.eval:
        return "both"
    if args.train or args.eval:
        return "train" if args.train else "eval"
    return None
