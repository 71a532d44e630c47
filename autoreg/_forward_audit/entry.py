"""``audit_forward``: the passes, each on a fresh copy of the model, and why a pass stops."""

from __future__ import annotations

import re
import traceback
from typing import Any, Final, NoReturn

import torch
from torch import nn

from .._audit import check_module
from .._errors import ForwardAuditError
from .._frames import error_line, is_library, location
from .._messages.audits import (
    BAD_FORWARD_MODE,
    FORWARD_OWN_ERROR,
    FORWARD_RAISED,
    FORWARD_RAISED_GUESSED,
    LOW_PRECISION_RAISED,
    NO_STRAY_BEFORE,
    STRAYS_BEFORE,
)
from .._messages.describe import describe_error, dtype_name
from .copying import copy_inputs, copy_model, default_device_cpu, rng_kept, state, strand
from .dispatch import Audit, Findings
from .finding import ForwardFinding, ModeChoice, ModeName
from .rules import tensors_in
from .sites import Lines, call
from .stores import StoreWatch, stored_findings
from .values import Values

__all__ = ["LOW_PRECISION", "audit_forward", "audited_modes"]

LOW_PRECISION: Final = torch.bfloat16
# "meta tensors", "'Meta' backend", "register_meta"; not "metadata"
_META: Final = re.compile(r"(?<![a-z])meta(?![a-z])", re.IGNORECASE)


def audit_forward(
    model: nn.Module,
    /,
    *args: Any,
    mode: ModeChoice | None = None,
    backward: bool = False,
    low_precision: torch.dtype | None = LOW_PRECISION,
    **kwargs: Any,
) -> list[ForwardFinding]:
    """Every stray tensor of one ``model(*args, **kwargs)`` pass, judged by CUDA's rules.

    Runs a copy of ``model`` and of the inputs on the meta device (no GPU, no memory), in the
    model's dtype, then a second pass with the copy and the floating inputs converted to
    ``low_precision`` (``None`` skips it); under ``torch.no_grad()`` unless ``backward=True``
    (then the backward of every output that requires grad is audited too). ``mode``: the copy
    runs in the mode the model is in (``None``), in ``"train"`` or ``"eval"`` mode, or in
    ``"both"``, one after the other (code that runs only in training, such as dropout's noise,
    or only in eval); each finding says its ``mode``. ``model``, its mode, the inputs and the
    random number generators are left as they were. Raises ``ForwardAuditError`` when the
    forward cannot run to its end on the meta device.
    """
    check_module(model, "audit_forward")
    findings: Findings = {}
    with rng_kept():
        for name in audited_modes(model, mode):
            training = None if mode is None else name == "train"
            _run(model, args, kwargs, None, training, backward, findings)
            if low_precision is not None:
                _run(model, args, kwargs, low_precision, training, backward, findings)
    return list(findings.values())


def audited_modes(model: nn.Module, mode: ModeChoice | None) -> tuple[ModeName, ...]:
    """The modes ``audit_forward(model, ..., mode=mode)`` runs the model in, in order."""
    if mode is None:
        return ("train",) if model.training else ("eval",)
    if mode == "both":
        return ("train", "eval")
    if mode in ("train", "eval"):
        return (mode,)
    raise ValueError(BAD_FORWARD_MODE.format(value=mode))


def _run(
    model: nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    low: torch.dtype | None,
    training: bool | None,
    backward: bool,
    findings: Findings,
) -> None:
    """One forward (and backward) of a copy of ``model`` on the stand-in device, in ``low``,
    in training mode or not (``None``: each module in the mode it is in).

    The pass in the model's own dtype (``low=None``) records the device findings, the state
    forward stores, and the dtype findings against the model's floating dtype (a float64 numpy
    array in a float32 model).
    """
    twin = copy_model(model, low)
    if training is not None:
        twin.train(training)
    mode: ModeName = "train" if twin.training else "eval"
    values = Values()
    inputs = copy_inputs((args, kwargs), low, values.known)
    dtype = low or next((t.dtype for t in state(twin) if t.is_floating_point()), None)
    attributes = strand(twin)
    dims = {d for t in tensors_in((args, kwargs)) for d in t.shape if d > 1}
    lines = Lines(twin, mode)
    audit = Audit(lines, attributes, dtype, findings, values, dims, devices=low is None)
    stores = StoreWatch(twin) if low is None else None
    grad = torch.enable_grad() if backward else torch.no_grad()
    try:
        with default_device_cpu(), grad, audit:
            output = call(twin, *inputs)
            roots = [t for t in tensors_in(output) if t.requires_grad]
    except Exception as error:  # noqa: BLE001 - raised again, with the user's line
        _raise_forward_error(error, model, low, audit, findings)
    if stores is not None:
        for key, finding in stored_findings(twin, mode, attributes, stores.lines, audit.made):
            findings.setdefault(key, finding)
    if not (backward and roots):
        return
    try:
        with default_device_cpu(), audit:
            torch.autograd.backward(roots, [torch.ones_like(t) for t in roots])
    except Exception as error:  # noqa: BLE001 - raised again unless the audit caused it
        if not audit.moved_grad:
            _raise_forward_error(error, model, low, audit, findings)
        # Else autograd expects the gradient of a stray the audit moved on its old device: the
        # backward pass ends there, with its findings.


def _raise_forward_error(
    error: Exception, model: nn.Module, low: torch.dtype | None, audit: Audit, findings: Findings
) -> NoReturn:
    """Raise ``ForwardAuditError`` for ``error``, which stopped a pass: as a gap of the meta
    device, as an error of the forward itself, or as the low-precision pass failing."""
    cls = type(model).__name__
    filename, lineno = error_line(error) or ("<unknown>", 0)
    if low is not None:
        message = LOW_PRECISION_RAISED
    elif _meta_gap(error):
        message = FORWARD_RAISED
    elif audit.values.guessed:
        message = FORWARD_RAISED_GUESSED
    else:
        message = FORWARD_OWN_ERROR
    found = list(findings.values())
    raise ForwardAuditError(
        message.format(
            cls=cls,
            where=location(filename, lineno),
            error=describe_error(error),
            low=dtype_name(low),
            guessed=audit.values.guessed,
            found=STRAYS_BEFORE.format(found="\n".join(map(str, found)))
            if found
            else NO_STRAY_BEFORE,
        ),
        found,
    ) from error


def _meta_gap(error: Exception) -> bool:
    """Whether ``error`` is the meta device's: an operation it cannot run without values (it
    says so: "meta", or torch's ``NotImplementedError``), not an error of the forward itself
    (wrong input shapes, a bug), which is raised the same on any device."""
    if _META.search(str(error)):
        return True
    frames = traceback.extract_tb(error.__traceback__)
    raised_by_torch = not frames or is_library(frames[-1].filename)
    return isinstance(error, NotImplementedError) and raised_by_torch
