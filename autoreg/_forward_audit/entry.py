"""``audit_forward``: the passes, each on a fresh copy of the model, and why a pass stops."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, Final, NoReturn

import torch
from torch import nn

from .._audit import check_module
from .._errors import ForwardAuditError
from .._frames import error_line, location
from .._messages.audits import (
    BAD_FORWARD_MODE,
    CANNOT_CONVERT,
    FORWARD_AUDIT_LIMIT,
    FORWARD_OWN_ERROR,
    FORWARD_RAISED_META,
    FORWARD_RAISED_META_GUESSED,
    LOW_PRECISION_LIMIT,
    LOW_PRECISION_RAISED,
    NO_STRAY_BEFORE,
    STEP_OF,
    STRAYS_BEFORE,
    THE_FORWARD_OF,
)
from .._messages.describe import describe_error, dtype_name
from .calls import Calls
from .copying import (
    CannotConvertError,
    copy_inputs,
    copy_model,
    default_device_cpu,
    devices_held,
    exchanged_tensors,
    follow,
    on_meta,
    rng_kept,
    state,
    strand,
)
from .dispatch import Audit
from .finding import ForwardFinding, ModeChoice, ModeName
from .fixes import Records, finish
from .rules import STAND_IN, tensors_in
from .sites import Lines, call
from .stores import StoreWatch, recomputed, stored_findings
from .tags import Tags
from .values import Values

__all__ = [
    "LOW_PRECISION",
    "ForwardStoppedError",
    "Step",
    "audit_forward",
    "audited_modes",
    "not_audited",
    "stopped_in",
    "what_runs",
]

LOW_PRECISION: Final = torch.bfloat16
_QUOTED: Final = 240  # the longest first line of an error said in one line

Step = Callable[..., Any]  # step(model, *args, **kwargs): a loss, a training step
Stored = dict[tuple[str | int, ...], ForwardFinding]


def audit_forward(
    model: nn.Module,
    /,
    *args: Any,
    step: Step | None = None,
    mode: ModeChoice | None = None,
    backward: bool = False,
    low_precision: torch.dtype | None = LOW_PRECISION,
    **kwargs: Any,
) -> list[ForwardFinding]:
    """Every stray tensor of one ``model(*args, **kwargs)`` pass, judged by CUDA's rules.

    Runs a copy of ``model`` and of the inputs on the CPU, with their values, in the model's
    dtype, then a second pass with the copy and the floating inputs converted to
    ``low_precision`` (``None`` skips it), in the grad mode of the caller. ``step``: audit
    ``step(model, *args, **kwargs)`` instead of the forward (a loss, a training step: it gets
    the copy, and makes its own optimizer). ``backward=True``: the backward of every output that
    requires grad is audited too. ``mode``: the copy runs in the mode the model is in
    (``None``), in ``"train"`` or ``"eval"`` mode, or in ``"both"``, one after the other (code
    that runs only in training, such as dropout's noise, or only in eval); each finding says
    its ``mode``. ``model``, its mode, the inputs and the random number generators are left as
    they were. Raises ``ForwardAuditError`` when the pass cannot run to its end, and says
    whether the forward raises by itself (it does without the audit too) or the audit cannot
    follow it.
    """
    check_module(model, "audit_forward")
    records: Records = {}
    stored: Stored = {}
    with rng_kept():
        for name in audited_modes(model, mode):
            training = None if mode is None else name == "train"
            for low in (None, low_precision) if low_precision is not None else (None,):
                _run(model, args, kwargs, step, low, training, backward, records, stored)
    return found_before(model, records, stored)


def found_before(model: nn.Module, records: Records, stored: Stored) -> list[ForwardFinding]:
    """What the passes run so far found: the strays of every pass, and the state forward
    stored (recorded by the pass in the model's own dtype, kept when a later pass stops)."""
    return [*finish(records, _device_of(model)), *stored.values()]


def audited_modes(model: nn.Module, mode: ModeChoice | None) -> tuple[ModeName, ...]:
    """The modes ``audit_forward(model, ..., mode=mode)`` runs the model in, in order."""
    if mode is None:
        return ("train",) if model.training else ("eval",)
    if mode == "both":
        return ("train", "eval")
    if mode in ("train", "eval"):
        return (mode,)
    raise ValueError(BAD_FORWARD_MODE.format(value=mode))


def what_runs(model: nn.Module, step: Step | None) -> str:
    """``the forward of Net`` or ``the step train_step of Net``: what the audit runs."""
    cls = type(model).__name__
    if step is None:
        return THE_FORWARD_OF.format(cls=cls)
    name = getattr(step, "__qualname__", None) or type(step).__name__
    return STEP_OF.format(step=name, cls=cls)


def _run(
    model: nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    step: Step | None,
    low: torch.dtype | None,
    training: bool | None,
    backward: bool,
    records: Records,
    stored: Stored,
) -> None:
    """One forward (or step, and backward) of a copy of ``model``, in ``low``, in training mode
    or not (``None``: each module in the mode it is in).

    The pass in the model's own dtype (``low=None``) records the device findings, the state
    forward stores, and the dtype findings against the model's floating dtype (a float64 numpy
    array in a float32 model).
    """
    meta = on_meta(model)
    try:
        twin = copy_model(model, low, meta)
    except CannotConvertError as error:
        _not_converted(error, model, step, low, records, stored)
    if training is not None:
        twin.train(training)
    mode: ModeName = "train" if twin.training else "eval"
    values = Values() if meta else None
    inputs = copy_inputs((args, kwargs), low, values.known if values else None)
    dtype = low or next((t.dtype for t in state(twin) if t.is_floating_point()), None)
    stranded = strand(twin)
    tags = Tags()
    follow(tags, twin, stranded, inputs)
    dims = {d for t in tensors_in((args, kwargs)) for d in t.shape if d > 1}
    lines = Lines(twin, mode)
    run_device = STAND_IN if meta else torch.device("cpu")
    calls = Calls(tags, lines, run_device, devices_held(twin))
    audit = Audit(lines, tags, calls, stranded, dtype, records, values, dims, devices=low is None)
    calls.on_numpy = audit.numpy
    calls.on_bias_mix = audit.bias_mix
    calls.on_noop_cast = audit.noop_cast
    stores = StoreWatch(twin) if low is None else None
    run: Step = twin if step is None else functools.partial(step, twin)
    try:
        with default_device_cpu(), calls, audit:
            output = call(run, *inputs)
            roots = [t for t in tensors_in(output) if t.requires_grad]
    except Exception as error:  # noqa: BLE001 - raised again, with the user's line
        audit.settle()
        _stopped(error, model, args, kwargs, step, low, training, values, records, stored)
    audit.returned(exchanged_tensors(output))
    if stores is not None:
        device = _device_of(model)
        kept = stored_findings(twin, mode, stranded, stores.lines, audit.made, device)
        if kept and not meta:  # what forward recomputes before every use is no stray
            again = _recomputed(model, args, kwargs, step, training)
            kept = [(k, f) for k, f in kept if (f.module_path, f.attribute) not in again]
        for key, found in kept:
            first = stored.setdefault(key, found)
            if mode not in first.modes:  # found by a pass in the other mode first
                stored[key] = dataclasses.replace(first, modes=(*first.modes, mode))
    audit.settle()  # the forward's held-back findings: its backward does not decide them
    if not (backward and roots):
        return
    try:
        with default_device_cpu(), calls, audit:
            torch.autograd.backward(roots, [torch.ones_like(t) for t in roots])
    except Exception as error:  # noqa: BLE001 - raised again unless the audit caused it
        audit.settle()
        if not audit.moved_grad or values is None:
            _stopped(error, model, args, kwargs, step, low, training, values, records, stored)
        # Else, on meta, autograd expects the gradient of a stray the audit moved on its old
        # device: the backward pass ends there, with its findings.
    audit.settle()


def _stopped(
    error: Exception,
    model: nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    step: Step | None,
    low: torch.dtype | None,
    training: bool | None,
    values: Values | None,
    records: Records,
    stored: Stored,
) -> NoReturn:
    """Raise ``ForwardAuditError`` for ``error``, which stopped a pass, saying truthfully whose
    it is: on the CPU, the model given is run again without the audit, and what it does then
    decides between an error of the forward itself and a limit of the audit. It carries what the
    passes before found (``found_before``)."""
    what = what_runs(model, step)
    filename, lineno = error_line(error) or ("<unknown>", 0)
    names = {
        "what": what,
        "cls": type(model).__name__,
        "where": location(filename, lineno),
        "error": describe_error(error),
        "low": dtype_name(low),
    }
    if values is not None:  # built on meta: nothing runs it with values
        guessed = values.guessed
        template = FORWARD_RAISED_META_GUESSED if guessed else FORWARD_RAISED_META
        names["guessed"] = str(guessed)
    elif _raises_alone(model, args, kwargs, step, low, training):
        template = LOW_PRECISION_RAISED if low is not None else FORWARD_OWN_ERROR
    else:
        template = LOW_PRECISION_LIMIT if low is not None else FORWARD_AUDIT_LIMIT
    found = found_before(model, records, stored)
    before = STRAYS_BEFORE.format(found="\n".join(map(str, found))) if found else NO_STRAY_BEFORE
    message = template.format(**names, found=before)
    raise ForwardStoppedError(message, found, _one_line(message), low) from error


def _not_converted(
    error: CannotConvertError,
    model: nn.Module,
    step: Step | None,
    low: torch.dtype | None,
    records: Records,
    stored: Stored,
) -> NoReturn:
    """Raise ``ForwardAuditError``: the copy's own ``.to()`` raised, with what was found before
    (the pass in the model's own dtype, when the one in ``low`` cannot be converted)."""
    cls, filename_line = type(model).__name__, error_line(error.error)
    where = f" (at {location(*filename_line)})" if filename_line else ""
    move = str(error.move) if isinstance(error.move, torch.dtype) else repr(str(error.move))
    found = found_before(model, records, stored)
    before = STRAYS_BEFORE.format(found="\n".join(map(str, found))) if found else NO_STRAY_BEFORE
    message = CANNOT_CONVERT.format(
        what=what_runs(model, step),
        low=dtype_name(low) if low is not None else "its own dtype",
        cls=cls,
        move=move,
        error=f"{describe_error(error.error).splitlines()[0]}{where}",
        found=before,
    )
    raise ForwardStoppedError(message, found, _one_line(message), low) from error.error


class ForwardStoppedError(ForwardAuditError):
    """The pass stopped; ``summary`` says where and whose the error is, in one line; ``low``: the
    dtype the pass ran in, when it was the second one (``low_precision``), else None."""

    def __init__(
        self, message: str, findings: list[ForwardFinding], summary: str, low: torch.dtype | None
    ) -> None:
        super().__init__(message, findings)
        self.summary = summary
        self.low = low


def not_audited(error: ForwardAuditError) -> str:
    """One line for a report: why the forward was not audited (where, whose error)."""
    return getattr(error, "summary", "") or _one_line(str(error))


def stopped_in(error: ForwardAuditError) -> torch.dtype | None:
    """The low precision the pass that stopped ran in; None when it was the model's own dtype."""
    return getattr(error, "low", None)


def _one_line(message: str) -> str:
    """The first two sentences of ``message`` (what raised where, and whose error it is), on one
    line, the error quoted at most ``_QUOTED`` characters long."""
    first, _, rest = message.partition("\n")
    first = " ".join(first.split())
    if len(first) > _QUOTED:
        first = first[: _QUOTED - 3].rstrip() + "..."
    verdict = " ".join(rest.split()).partition(". ")[0].partition(": ")[0]
    return f"{first}; {verdict[0].lower()}{verdict[1:]}" if verdict else first


def _raises_alone(
    model: nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    step: Step | None,
    low: torch.dtype | None,
    training: bool | None,
) -> bool:
    """Whether a copy of ``model`` (in ``low``) raises on the CPU without the audit."""
    try:
        twin = copy_model(model, low, meta=False)
        if training is not None:
            twin.train(training)
        inputs = copy_inputs((args, kwargs), low, None)
    except Exception:  # noqa: BLE001 - what cannot be copied cannot be run alone
        return False
    run: Step = twin if step is None else functools.partial(step, twin)
    try:
        with default_device_cpu(), rng_kept():
            call(run, *inputs)
    except Exception:  # noqa: BLE001 - any error of its own
        return True
    return False


def _recomputed(
    model: nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    step: Step | None,
    training: bool | None,
) -> set[tuple[str, str]]:
    """``stores.recomputed`` on a fresh copy of ``model`` (the pass's holds the autograd graph its
    backward may yet run), without the audit: the state its forward recomputes before every
    use, by module path and attribute."""
    try:
        twin = copy_model(model, None, meta=False)
    except Exception:  # noqa: BLE001 - what cannot be copied cannot be run again
        return set()
    if training is not None:
        twin.train(training)
    before = strand(twin)
    run: Step = twin if step is None else functools.partial(step, twin)
    with default_device_cpu():
        return recomputed(lambda: call(run, *copy_inputs((args, kwargs), None, None)), twin, before)


def _device_of(model: nn.Module) -> str:
    """Where the model given is: the device of its first parameter or buffer (the CPU if none)."""
    tensor = next(iter(state(model)), None)
    return str(tensor.device) if tensor is not None else "cpu"
