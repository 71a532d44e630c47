"""One target built, run and audited: the strays ``plan`` works from, and what was not audited.

The target is built while ``sites`` records every store into a module. When the factory returns
inputs, the forward is audited (``audit_forward``: what forward makes on the default device or
dtype, which ``fix`` reports and never rewrites), then called once for real, on the CPU, as the
factory built it (in its mode; under ``no_grad``, or with grad if it needs it), still
recording: the state forward stores (a recurrent state, a cache, a mask) is then in the model,
at the line that stored it, whether or not the forward audit could run. ``collect`` turns the
attribute audit of the model after that call into ``Stray`` records.

What could not be audited (the forward audit stopped, the forward raised) is one line each in
``Analysis.not_audited``; the attribute fixes are made all the same.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys

import torch

from .._errors import ForwardAuditError
from .._forward_audit import ForwardFinding, audit_forward
from .._frames import error_line, location
from .._messages.describe import describe_error
from .._messages.fix import FIX_FORWARD_RAISED, FIX_NOT_AUDITED_FORWARD
from .._target import Target, load
from .collect import collect
from .sites import Stores, record_stores
from .strays import Stray

__all__ = ["Analysis", "analyse"]


@dataclasses.dataclass
class Analysis:
    """What ``fix`` knows about one target: its strays, how many tensors its forward makes where
    ``.to()`` cannot reach (never rewritten), and what could not be audited, one line each."""

    target: str
    strays: list[Stray]
    made_by_forward: int = 0
    not_audited: list[str] = dataclasses.field(default_factory=list)
    forward_audited: bool = False


def analyse(target: str) -> Analysis:
    """Build ``target``, audit it, run its forward once; raise ``UsageError`` if it cannot be
    built."""
    with record_stores() as stores:
        loaded = load(target)
    if loaded.args is None:
        return Analysis(target, collect(loaded.model, stores))
    analysis = Analysis(target, [])
    forward: list[ForwardFinding] = []
    try:
        forward = audit_forward(loaded.model, *loaded.args, **loaded.kwargs)
        analysis.forward_audited = True
    except Exception as error:  # noqa: BLE001 - ForwardAuditError, or the audit's copy failing
        text = str(error).strip()
        if not isinstance(error, ForwardAuditError):
            text = describe_error(error)
        reason = text.splitlines()[0] if text else type(error).__name__
        analysis.not_audited.append(FIX_NOT_AUDITED_FORWARD.format(target=target, reason=reason))
    # What forward makes itself (not an attribute it read): never an edit of fix's.
    analysis.made_by_forward = sum(f.kind != "stored" and not f.entered for f in forward)
    ran = _run(loaded, stores)
    if ran is not None:
        analysis.not_audited.append(FIX_FORWARD_RAISED.format(target=target, error=ran))
    # The state forward stores: from the call itself; from the audit when the call raised.
    stored = forward if ran is not None else ()
    analysis.strays = collect(loaded.model, stores, stored)
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
