"""One target built, run and audited: the strays ``plan`` works from, and what was not audited.

The target is built while ``sites`` records every store into a module. When the factory returns
inputs, the forward is audited (``audit_forward``: what forward makes on the default device or
dtype, which ``fix`` reports and never rewrites), then called for real, on the CPU, as the
factory built it (in its mode; under ``no_grad``, or with grad if it needs it), and once more
in the other mode, still recording: the state forward stores (a recurrent state, a cache, a
mask) is then in the model, at the line that stored it, whether or not the forward audit could
run, and what it writes in place has been written (``collect`` keeps apart tensors that share
values only when it ran in both modes and nothing wrote them). ``collect`` turns the attribute
audit of the model after those calls into ``Stray`` records.

What could not be audited is one line in ``Analysis.not_audited``, worded as ``autoreg audit``
words it (``_audit_cli.forward_report``: where it stopped, and whether the error is the model's
own or a limit of the audit); the attribute fixes are made all the same.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys

import torch

from .._audit_cli import forward_report
from .._forward_audit import ForwardFinding
from .._frames import error_line, location
from .._messages.describe import describe_error
from .._messages.fix import FIX_FORWARD_RAISED, FIX_NOT_AUDITED, FIX_NOT_AUDITED_FORWARD
from .._report import count_strays
from .._target import Target, load
from .collect import collect
from .sites import Stores, record_stores
from .strays import Stray

__all__ = ["Analysis", "analyse"]


@dataclasses.dataclass
class Analysis:
    """What ``fix`` knows about one target: its strays, the forward audit's findings (what it
    found before it stopped, if it did), and what could not be audited, one line each."""

    target: str
    strays: list[Stray]
    forward: list[ForwardFinding] = dataclasses.field(default_factory=list)
    not_audited: list[str] = dataclasses.field(default_factory=list)
    forward_audited: bool = False
    # Only the pass in low precision stopped: the pass in the model's own dtype ran to its end.
    default_audited: bool = False

    @property
    def left_by_forward(self) -> int:
        """The strays of the forward no edit of fix's is for, counted as ``autoreg audit``
        counts its rows: what the forward makes or takes (a global, a closure's), not the state
        it stores nor a plain attribute it reads (fixed or listed with the attributes)."""
        return count_strays([f for f in self.forward if f.kind != "stored" and not f.attribute])


def analyse(target: str, low: torch.dtype | None) -> Analysis:
    """Build ``target``, audit it (the forward's second pass in ``low``, None: none), run its
    forward once; raise ``UsageError`` if it cannot be built."""
    with record_stores() as stores:
        loaded = load(target)
    if loaded.args is None:
        return Analysis(target, collect(loaded.model, stores, exercised=False))
    forward = forward_report(loaded, None, None, low)
    audited = not forward.not_audited
    analysis = Analysis(
        target,
        [],
        forward.findings,
        forward_audited=audited,
        default_audited=audited or forward.stopped_low,
    )
    ran = _run(loaded, stores)
    exercised = ran is None and _run_in_the_other_mode(loaded, stores)
    if forward.not_audited:  # one line, as autoreg audit says it, whatever else it stops
        template = FIX_NOT_AUDITED if ran is not None else FIX_NOT_AUDITED_FORWARD
        analysis.not_audited.append(template.format(target=target, reason=forward.not_audited))
    elif ran is not None:
        analysis.not_audited.append(FIX_FORWARD_RAISED.format(target=target, error=ran))
    # The state forward stores: from the call itself; from the audit when the call raised.
    stored = forward.findings if ran is not None else ()
    analysis.strays = collect(loaded.model, stores, stored, exercised=exercised)
    return analysis


def _run(loaded: Target, stores: Stores) -> str | None:
    """Call the model once on its inputs, recording its stores; None, or why it raised.

    The call runs under ``torch.no_grad()``, as inference does (a kv-cache written in place
    under grad would hold an autograd result); a forward that raises there (it calls
    ``torch.autograd.grad`` itself) is called again with grad enabled."""
    assert loaded.args is not None
    for grad in (torch.no_grad, torch.enable_grad):
        try:
            with record_stores(stores), contextlib.redirect_stdout(sys.stderr), grad():
                loaded.model(*loaded.args, **loaded.kwargs)
        except Exception as error:  # noqa: BLE001 - any failure of the user's forward is reported
            line = error_line(error)
            text = describe_error(error).splitlines()[0]
            failed = f"{text} (at {location(*line)})" if line else text
        else:
            return None
    return failed


def _run_in_the_other_mode(loaded: Target, stores: Stores) -> bool:
    """Call the model once more with its mode flipped (``train()`` built, ``eval()`` now, or the
    reverse), recording its stores; each module's own mode is then put back. Whether it ran:
    what forward writes in place only in one mode (a statistic gathered at evaluation) is then
    known, and the state it stores only in that mode is in the model."""
    model = loaded.model
    modes = [(module, module.training) for module in model.modules()]
    model.train(not model.training)
    try:
        return _run(loaded, stores) is None
    finally:
        for module, training in modes:
            module.training = training
