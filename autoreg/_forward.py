"""Audit one forward pass for the tensors that ``.to()`` can never reach: those made in ``forward``.

Design note
-----------
Registration fixes the tensors a module stores. It cannot fix the ones ``forward`` makes on the
default device - ``torch.arange(n)``, ``torch.tensor([...])``, ``torch.zeros(...)`` without
``device=`` - nor the ones ``forward`` takes from outside the module: a module-level global, a
closure, a config object, a numpy array. Those work on the CPU and fail on the GPU, usually after
deployment. ``audit_forward`` finds them without a GPU:

1. It deep-copies the model (parameters go straight to the stand-in device through the copy's
   memo, so no weight is duplicated) and moves the copy with its own ``.to()``, so that what
   ``.to()`` leaves behind on the real device is left behind here too - on the CPU, also for a
   model built on meta (``_strand``). The inputs are copied and moved with it. The caller's
   model, inputs and random number generators are left as they were; a tensor made before the
   pass (a global) that forward writes to is written on a copy.
2. It runs one forward of the copy on the stand-in device, ``meta`` (no memory, no values), under
   ``_Audit``, a ``TorchDispatchMode`` that sees the tensor arguments of every ATen operation.
   Factory calls without ``device=`` still land on the default device: nothing redirects them.
3. Each operation is judged by CUDA's rules, not by meta's (``meta @ cpu`` succeeds where
   ``cuda @ cpu`` raises): a CPU tensor with at least one dimension, next to a stand-in tensor, is
   a device finding - except in the arguments CUDA takes from the CPU on purpose (``_CPU_OK``:
   index tensors, ``copy_``'s source, packed-sequence lengths and batch sizes). A 0-dim CPU tensor
   is a scalar to CUDA, never a finding. After recording it, the audit moves the stray to the
   stand-in device and the pass goes on, so that one pass reports every stray.
4. Where each stray came from: every tensor an operation makes from nothing (a factory, data
   lifted by ``torch.tensor`` or ``torch.from_numpy``, a copy back to the CPU) is tagged with the
   user's line that made it - the first frame outside torch and autoreg; what an operation
   computes from tagged tensors inherits the tag. A CPU tensor the pass meets untagged was made
   before ``forward`` (a global, a closure, a config object, a plain attribute ``.to()`` left
   behind): it is tagged with the line where it entered. One finding per line and kind.
5. A second pass converts the copy and the floating inputs to ``bfloat16`` and reports floating
   tensors made in forward in another floating dtype that promote a ``bfloat16`` operation
   (``float32`` constants upcasting a half-precision model), or that an operation which does not
   promote (``mm``, ``linear``; meta runs them, CUDA raises) gets next to ``bfloat16`` ones, and
   tagged tensors of another dtype that make an operation raise. A dtype written in the code
   (``dtype=`` in a factory, ``.float()``, ``.to(torch.float32)``) is deliberate, not a finding.

Values: meta has none. What is computed from the inputs alone (``lengths.max()``, a mask of the
input) is computed on the CPU as well, so that ``.item()``, ``bool(t)``, ``.cpu()`` and shapes
that depend on values (``x[mask]``) behave as they will; an operation that raises on meta is
tried again with one such input on the CPU, where the caller keeps it (``pack_padded_sequence``
wants its lengths there). Any other value read is a stand-in (``False``, ``1``; ones for a copy
to the CPU), and an operation meta cannot run on unknown values stops the pass with
``ForwardAuditError``.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import inspect
import linecache
import os
import random
import sys
import traceback
import types
from collections.abc import Iterator
from types import FrameType
from typing import Any, Final, Generic, Literal, NoReturn, TypeVar

import torch
from torch import nn
from torch.nn.parameter import UninitializedParameter
from torch.overrides import _get_current_function_mode_stack
from torch.utils._device import DeviceContext
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map_only
from torch.utils.weak import WeakIdKeyDictionary

from ._audit import Finding, find_unregistered, locate_unregistered
from ._errors import ForwardAuditError, NotAModuleError
from ._messages import (
    CANNOT_COPY,
    CANNOT_COPY_INPUTS,
    FIX_ATTRIBUTE,
    FIX_COPIED_BACK,
    FIX_CREATED,
    FIX_ENTERED,
    FIX_PROMOTES,
    FIX_RAISES,
    FIX_RANDOM,
    FIX_RANDOM_LIKE,
    FIX_STORED,
    FIX_STORED_CONTAINER,
    FORWARD_RAISED,
    LOW_PRECISION_RAISED,
    NOT_A_MODULE,
    brief,
    describe,
)
from ._mixin import AutoRegisterMixin
from ._walk import map_tensors

__all__ = ["ForwardAuditError", "ForwardFinding", "audit_forward", "format_forward"]

STAND_IN: Final = torch.device("meta")
LOW_PRECISION: Final = torch.bfloat16

Kind = Literal["device", "dtype", "stored"]
_V = TypeVar("_V")

# --- the fix each finding suggests ---------------------------------------------------------------

# --- CUDA's rules: the arguments that take a CPU tensor next to device tensors -------------------

_CPU_OK: Final[dict[str, frozenset[str]]] = {
    "copy_": frozenset({"self", "src"}),  # a transfer between devices
    "index": frozenset({"indices"}),  # x[cpu_index]: CUDA moves the indices
    "index_put": frozenset({"indices"}),
    "index_put_": frozenset({"indices"}),
    "_index_put_impl_": frozenset({"indices"}),
    "_unsafe_index": frozenset({"indices"}),
    "_unsafe_index_put": frozenset({"indices"}),
    "_pack_padded_sequence": frozenset({"lengths"}),  # must be on the CPU
    "_pad_packed_sequence": frozenset({"batch_sizes"}),  # a PackedSequence's: on the CPU
    "lstm": frozenset({"batch_sizes"}),
    "gru": frozenset({"batch_sizes"}),
    "rnn_tanh": frozenset({"batch_sizes"}),
    "rnn_relu": frozenset({"batch_sizes"}),
    "ctc_loss": frozenset({"input_lengths", "target_lengths"}),
    "_ctc_loss": frozenset({"input_lengths", "target_lengths"}),
}
# Operations that take another floating dtype next to bfloat16 on purpose: conversions, and the
# normalisations whose CUDA kernels accept float32 weights and statistics with half inputs.
_MIXED_OK: Final = frozenset(
    {
        "copy_",
        "_to_copy",
        "native_layer_norm",
        "layer_norm",
        "native_batch_norm",
        "_native_batch_norm_legit",
        "_native_batch_norm_legit_no_training",
        "batch_norm",
        "cudnn_batch_norm",
        "native_group_norm",
        "group_norm",
        "rms_norm",
        "_fused_rms_norm",
    }
)
_RANDOM: Final = frozenset({"rand", "randn", "randint", "randperm", "normal", "bernoulli"})
_LIFTS: Final = frozenset({"lift_fresh", "lift_fresh_copy", "lift"})  # torch.tensor(data)
_READS: Final = frozenset({"_local_scalar_dense", "is_nonzero", "equal"})  # to Python values

_TORCH_DIR: Final = os.path.dirname(torch.__file__) + os.sep
_AUTOREG_DIR: Final = os.path.dirname(os.path.abspath(__file__)) + os.sep
# When forward is torch's own (nn.Linear), the line to report is in torch/nn/modules, not in the
# module-calling machinery.
_TORCH_MODULES: Final = os.path.join(_TORCH_DIR, "nn", "modules") + os.sep
_MODULE_CALL: Final = os.path.join(_TORCH_MODULES, "module.py")


@dataclasses.dataclass(frozen=True)
class ForwardFinding:
    """A tensor of a forward pass that stays behind when the model moves, and how to fix it.

    ``kind`` is ``"device"`` (a CPU tensor that would meet the model's device: CUDA raises),
    ``"dtype"`` (a tensor of another dtype that promotes or breaks an operation of the model in
    its own dtype or in ``bfloat16``) or ``"stored"`` (a tensor forward stores on a module where
    ``.to()`` leaves it behind: ``self.h = ...`` in a plain ``nn.Module``).
    ``filename`` and ``lineno`` are the user's line that made the tensor, or, for one made before
    ``forward`` (``entered``), the line where it first entered it; for ``"stored"``, the line
    that stored it. ``source`` is that line's text.
    ``op`` is the first operation that mixed it in, at ``op_filename:op_lineno`` (empty and 0 for
    ``"stored"``); ``tensor`` describes it (``float32[2, 3] cpu``); ``fix`` is what to write.
    ``class_name`` and ``module_path`` name the module whose code made the tensor (for
    ``"stored"``: the module whose attribute holds it), its path dotted from the audited model
    (``""`` for the model itself); ``attribute`` is the attribute stored (``""`` for the other
    kinds).
    """

    kind: Kind
    filename: str
    lineno: int
    source: str
    op: str
    op_filename: str
    op_lineno: int
    tensor: str
    entered: bool
    fix: str
    attribute: str
    class_name: str
    module_path: str

    def __str__(self) -> str:
        if self.kind == "stored":
            return (
                f"{self.where}: stored {self.tensor} in {self.class_name}.{self.attribute}: "
                f"{self.source}\n    fix: {self.fix}"
            )
        return (
            f"{self.where}: {self.kind} stray {self.tensor}, first mixed in by {_op_where(self)}: "
            f"{self.source}\n    fix: {self.fix}"
        )

    @property
    def where(self) -> str:
        """``path/to/file.py:12``, relative to the working directory when it lies under it."""
        return f"{_short(self.filename)}:{self.lineno}"

    def as_dict(self) -> dict[str, Any]:
        """The finding as JSON-ready values (what ``python -m autoreg audit --forward --json``
        prints)."""
        return {
            "kind": self.kind,
            "filename": self.filename,
            "lineno": self.lineno,
            "source": self.source,
            "op": self.op,
            "op_filename": self.op_filename,
            "op_lineno": self.op_lineno,
            "tensor": self.tensor,
            "entered": self.entered,
            "fix": self.fix,
            "attribute": self.attribute,
            "class_name": self.class_name,
            "module_path": self.module_path,
        }


def audit_forward(
    model: nn.Module,
    /,
    *args: Any,
    backward: bool = False,
    low_precision: torch.dtype | None = LOW_PRECISION,
    **kwargs: Any,
) -> list[ForwardFinding]:
    """Every stray tensor of one ``model(*args, **kwargs)`` pass, judged by CUDA's rules.

    Runs a copy of ``model`` and of the inputs on the meta device (no GPU, no memory), in the
    model's dtype, then a second pass with the copy and the floating inputs converted to
    ``low_precision`` (``None`` skips it); under ``torch.no_grad()`` unless ``backward=True``
    (then the backward of every output that requires grad is audited too). ``model``, the inputs
    and the random number generators are left as they were. Raises ``ForwardAuditError`` when
    the forward cannot run to its end on the meta device.
    """
    if not isinstance(model, nn.Module):
        raise NotAModuleError(
            NOT_A_MODULE.format(function="audit_forward", value=describe(model), hint="")
        )
    findings: dict[tuple[str | int, ...], ForwardFinding] = {}
    with _rng_kept():
        _run(model, args, kwargs, None, backward, findings)
        if low_precision is not None:
            _run(model, args, kwargs, low_precision, backward, findings)
    return list(findings.values())


def format_forward(findings: list[ForwardFinding], cls: str) -> str:
    """The findings as a table, one line each, with a summary line (empty list: one line)."""
    if not findings:
        return f"Nothing in the forward of {cls} stays behind when it moves."
    header = ("WHERE", "KIND", "TENSOR", "OP")
    rows = [header] + [(f.where, f.kind, f.tensor, _op_where(f)) for f in findings]
    widths = [max(len(row[column]) for row in rows) for column in range(4)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) + "  " + fix
        for row, fix in zip(rows, ["FIX"] + [f.fix for f in findings], strict=True)
    ]
    count = len(findings)
    summary = (
        f"{count} {'stray' if count == 1 else 'strays'} in the forward of {cls}: "
        "tensors that stay on the default device or dtype when the model moves."
    )
    return "\n".join([*lines, "", summary])


# --- one pass -------------------------------------------------------------------------------------


def _run(
    model: nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    low: torch.dtype | None,
    backward: bool,
    findings: dict[tuple[str | int, ...], ForwardFinding],
) -> None:
    """One forward (and backward) of a copy of ``model`` on the stand-in device, in ``low``.

    The pass in the model's own dtype (``low=None``) records the device findings, and the dtype
    findings against the model's floating dtype (a float64 numpy array in a float32 model).
    """
    twin = _copy_model(model, low)
    values: _ByTensor[torch.Tensor] = _ByTensor()
    inputs = _copy_inputs((args, kwargs), low, values)
    dtype = low or next((t.dtype for t in _state(twin) if t.is_floating_point()), None)
    audit = _Audit(twin, dtype, findings, values, devices=low is None)
    stores = _StoreWatch(twin) if low is None else None
    grad = torch.enable_grad() if backward else torch.no_grad()
    try:
        with _default_device_cpu(), grad, audit:
            output = _call(twin, *inputs)
            roots = [t for t in _tensors(output) if t.requires_grad]
    except Exception as error:  # noqa: BLE001 - raised again, with the user's line
        _raise_forward_error(error, model, low, findings)
    if stores is not None:
        audit.record_stores(twin, stores.lines)
    if not (backward and roots):
        return
    try:
        with _default_device_cpu(), audit:
            torch.autograd.backward(roots, [torch.ones_like(t) for t in roots])
    except Exception as error:  # noqa: BLE001 - raised again unless the audit caused it
        if not audit.moved_grad:
            _raise_forward_error(error, model, low, findings)
        # Else autograd expects the gradient of a stray the audit moved on its old device: the
        # backward pass ends there, with its findings.


def _strand(twin: nn.Module) -> dict[int, Finding]:
    """The tensors ``.to()`` left behind in the copy (``find_unregistered``), by id. Those of a
    model built on meta are put on the CPU, where they would be had it been built there: then
    ``self.mask.to(x)`` moves one, and ``x + self.mask`` mixes the devices."""
    stranded: dict[int, Finding] = {}
    replaced: dict[int, torch.Tensor] = {}
    for finding in find_unregistered(twin):
        tensor = finding.tensor
        if tensor.device.type == STAND_IN.type:
            cpu = torch.zeros(tensor.shape, dtype=tensor.dtype).requires_grad_(tensor.requires_grad)
            replaced[id(tensor)] = cpu
            tensor = cpu
        stranded[id(tensor)] = finding
    if replaced:
        for module in twin.modules():
            for name, value in list(vars(module).items()):
                if name not in ("_parameters", "_buffers", "_modules"):
                    new = map_tensors(value, lambda t: replaced.get(id(t), t))
                    if new is not value:
                        module.__dict__[name] = new
    return stranded


def _state(module: nn.Module) -> Iterator[torch.Tensor]:
    yield from module.parameters()
    yield from module.buffers()


def _raise_forward_error(
    error: Exception,
    model: nn.Module,
    low: torch.dtype | None,
    findings: dict[tuple[str | int, ...], ForwardFinding],
) -> NoReturn:
    cls = type(model).__name__
    filename, lineno = _error_line(error)
    message = FORWARD_RAISED if low is None else LOW_PRECISION_RAISED
    raise ForwardAuditError(
        message.format(
            cls=cls,
            where=f"{_short(filename)}:{lineno}",
            error=f"{type(error).__name__}: {error}",
            low=_dtype_name(low),
            found=_found(list(findings.values()), cls),
        ),
        list(findings.values()),
    ) from error


def _call(twin: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The forward call; the boundary where the search for the user's line stops."""
    return twin(*args, **kwargs)


def _copy_model(model: nn.Module, low: torch.dtype | None) -> nn.Module:
    """A deep copy of ``model`` moved by its own ``.to()`` to the stand-in device (and ``low``).

    Parameters enter the copy already on the stand-in device, through ``deepcopy``'s memo: the
    weights are never duplicated, and a plain attribute aliasing a parameter follows it, as
    ``.to()`` on a real device does (it swaps ``param.data`` in place).
    """
    memo: dict[int, Any] = {}
    for parameter in model.parameters():
        if isinstance(parameter, UninitializedParameter):  # a lazy module's: still lazy
            memo[id(parameter)] = UninitializedParameter(  # type: ignore[call-arg]
                parameter.requires_grad,  # type: ignore[arg-type]
                device=STAND_IN,
                dtype=parameter.dtype,
            )
        elif type(parameter) is nn.Parameter and parameter.layout == torch.strided:
            stand_in = torch.empty_like(parameter, device=STAND_IN)
            memo[id(parameter)] = nn.Parameter(stand_in, parameter.requires_grad)
    try:
        twin = copy.deepcopy(model, memo)
    except Exception as error:
        message = CANNOT_COPY.format(cls=type(model).__name__, error=_brief(error))
        raise ForwardAuditError(message, []) from error
    return twin.to(STAND_IN) if low is None else twin.to(STAND_IN, low)


def _copy_inputs(inputs: Any, low: torch.dtype | None, values: _ByTensor[torch.Tensor]) -> Any:
    """The inputs, deep-copied, with every tensor nested in lists, tuples and dicts moved;
    ``values`` maps each moved tensor to the caller's, which holds its values."""
    memo: dict[int, Any] = {}
    for tensor in _tensors(inputs):
        moved = tensor.detach().to(STAND_IN)
        if low is not None and moved.is_floating_point():
            moved = moved.to(low)
        memo[id(tensor)] = moved.requires_grad_(tensor.requires_grad)
        if tensor.device.type != STAND_IN.type:
            values[memo[id(tensor)]] = tensor.detach()
    try:
        return copy.deepcopy(inputs, memo)
    except Exception as error:
        raise ForwardAuditError(CANNOT_COPY_INPUTS.format(error=_brief(error)), []) from error


def _found(findings: list[ForwardFinding], cls: str) -> str:
    if not findings:
        return "No stray found before."
    return "Found before:\n" + format_forward(findings, cls)


def _error_line(error: BaseException) -> tuple[str, int]:
    """The user's line that raised ``error``: its innermost frame outside torch and autoreg."""
    frames = traceback.extract_tb(error.__traceback__)
    for frame in reversed(frames):
        if not frame.filename.startswith((_TORCH_DIR, _AUTOREG_DIR)):
            return frame.filename, frame.lineno or 0
    for frame in reversed(frames):
        if frame.filename.startswith(_TORCH_MODULES) and frame.filename != _MODULE_CALL:
            return frame.filename, frame.lineno or 0
    return "<unknown>", 0


def _brief(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def _tensors(value: Any) -> list[torch.Tensor]:
    return [leaf for leaf in tree_flatten(value)[0] if isinstance(leaf, torch.Tensor)]


@contextlib.contextmanager
def _rng_kept() -> Iterator[None]:
    """Restore torch's CPU generator, Python's and numpy's after the audit's passes."""
    python_state = random.getstate()
    numpy = sys.modules.get("numpy")
    numpy_state = numpy.random.get_state() if numpy is not None else None
    try:
        with torch.random.fork_rng(devices=[]):
            yield
    finally:
        random.setstate(python_state)
        if numpy is not None:
            numpy.random.set_state(numpy_state)


@contextlib.contextmanager
def _default_device_cpu() -> Iterator[None]:
    """Factories without ``device=`` go to the CPU, even inside a caller's device context."""
    if torch.get_default_device().type == "cpu" and not _in_device_context():
        yield
    else:
        with torch.device("cpu"):
            yield


def _in_device_context() -> bool:
    """Whether a ``with torch.device(...)`` other than the CPU is active (before torch 2.6,
    ``torch.get_default_device()`` does not see one)."""
    return any(
        isinstance(mode, DeviceContext) and torch.device(mode.device).type != "cpu"
        for mode in _get_current_function_mode_stack()  # type: ignore[no-untyped-call]
    )


class _ByTensor(Generic[_V]):
    """A value per tensor, by identity, that does not keep the tensor alive."""

    def __init__(self) -> None:
        self._map = WeakIdKeyDictionary()

    def get(self, tensor: torch.Tensor) -> _V | None:
        return self._map.get(tensor)  # type: ignore[no-any-return, no-untyped-call]

    def __setitem__(self, tensor: torch.Tensor, value: _V) -> None:
        self._map[tensor] = value

    def discard(self, tensor: torch.Tensor) -> None:
        self._map.pop(tensor, None)  # type: ignore[no-untyped-call]

    def __contains__(self, tensor: torch.Tensor) -> bool:
        return tensor in self._map


# --- the dispatch mode ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Site:
    """Where a tensor of the pass came from: made at ``filename:lineno``, or entered there."""

    filename: str
    lineno: int
    class_name: str  # the module whose code made it
    module_path: str
    entered: bool = False
    typed: bool = False  # its dtype was written in the code: not a dtype stray
    copied_back: bool = False  # a copy of a stand-in tensor to the CPU
    random: str = ""  # the random factory that drew it: new at every call, no constant
    attribute: Finding | None = None  # a plain attribute .to() left behind


class _Audit(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Judges every ATen operation of the pass by CUDA's rules and records the strays."""

    def __init__(
        self,
        twin: nn.Module,
        dtype: torch.dtype | None,
        findings: dict[tuple[str | int, ...], ForwardFinding],
        values: _ByTensor[torch.Tensor],
        *,
        devices: bool,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.devices = devices  # record device findings (the dtype pass does not repeat them)
        self.moved_grad = False  # a stray that requires grad was moved: backward may not follow
        # The values of stand-in tensors where they are known: the inputs (the caller's tensors,
        # never written to) and what is computed from them alone (lengths.max(), mask.all()).
        self.values = values
        self.dtype = dtype  # the pass's floating dtype, against which dtype strays are judged
        self.findings = findings
        self.sites: _ByTensor[_Site] = _ByTensor()
        self.names = {id(t): name for name, t in twin.named_parameters()}
        self.names.update({id(t): name for name, t in twin.named_buffers()})
        self.attributes = _strand(twin)  # the plain attributes .to() left behind
        # The copy's modules by id, with their paths: whose code runs an operation.
        self.modules = {id(m): (path, type(m).__name__) for path, m in twin.named_modules()}
        self.root = self.modules[id(twin)]
        self.made: _ByTensor[tuple[str, int]] = _ByTensor()  # the user's line that computed it

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        named = _named_tensors(func, args, kwargs)
        tensors = [t for _, t in named]
        stand_in = [t for t in tensors if t.device.type == STAND_IN.type]
        if stand_in and name in _READS:
            return self._read(func, args, kwargs)
        for tensor in tensors:
            if tensor not in self.sites and tensor.dim() and self._left_behind(tensor):
                self._tag_entered(tensor, name)
        replace: dict[int, torch.Tensor] = {}
        if stand_in:
            ok = _CPU_OK.get(name, frozenset())
            for arg, tensor in named:
                if tensor.dim() and arg not in ok and self._left_behind(tensor):
                    if self.devices:
                        self._record("device", tensor, func, stand_in)
                    self.moved_grad = self.moved_grad or tensor.requires_grad
                    replace[id(tensor)] = tensor.to(STAND_IN)
        for tensor in _written(func, args, kwargs):
            site = self.sites.get(tensor)
            if tensor.device.type == "cpu" and (site is None or site.entered):
                # Not made by this pass (a global, a closure's): written on a copy, so that the
                # caller's state is left as it was.
                replace.setdefault(id(tensor), tensor.clone())
        if name == "copy_" and args[0].device.type == "cpu" and stand_in:
            return args[0]  # a copy to the CPU from a device without values: nothing to copy
        if name == "_to_copy" and stand_in and _target_device(kwargs, args[0]).type == "cpu":
            original = self.values.get(args[0])
            if original is None:  # values read back from the stand-in device: ones
                original = torch.ones(args[0].shape, dtype=args[0].dtype)
            out = original.to(dtype=kwargs.get("dtype") or args[0].dtype, copy=True)
            self.sites[out] = _Site(
                *self._line(),
                copied_back=True,
                typed=kwargs.get("dtype") not in (None, args[0].dtype),
            )
            return out
        try:
            result = self._call(func, args, kwargs, replace, named, stand_in)
        except Exception as error:  # noqa: BLE001 - raised again if no input on the CPU helps
            result = self._on_the_cpu(error, func, args, kwargs, replace, named)
        self._tag_outputs(func, name, kwargs, tensors, result)
        self._follow_values(func, args, kwargs, result)
        return result

    def _follow_values(
        self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], result: Any
    ) -> None:
        """Compute on the CPU the values of what an operation makes from known values alone."""
        written = _written(func, args, kwargs)
        if written:  # the values of a tensor written in place are no longer known
            for tensor in written:
                self.values.discard(tensor)
            return
        outputs = _tensors(result)
        if not any(t.device.type == STAND_IN.type for t in outputs):
            return
        known = _with_values(self.values, args, kwargs)
        if known is None:
            return
        known_args, known_kwargs = known
        if "device" in known_kwargs:  # a copy to the stand-in device: its value stays here
            known_kwargs = {**known_kwargs, "device": None}
        try:
            computed = _tensors(func(*known_args, **known_kwargs))
        except Exception:  # noqa: BLE001 - the value stays unknown
            return
        for out, value in zip(outputs, computed, strict=False):
            if out.device.type == STAND_IN.type:
                self.values[out] = value

    def _on_the_cpu(
        self,
        error: Exception,
        func: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        replace: dict[int, torch.Tensor],
        named: list[tuple[str, torch.Tensor]],
    ) -> Any:
        """Run an operation that raised with one input it wants on the CPU, where the caller
        keeps it (packed-sequence lengths); raise the error again if none fits."""
        for _, tensor in named:
            value = self.values.get(tensor) if tensor.device.type == STAND_IN.type else None
            if value is None:
                continue
            try:
                return _invoke(
                    func, args, kwargs, {**replace, id(tensor): value.to(tensor.dtype, copy=True)}
                )
            except Exception:  # noqa: BLE001, S112 - the next one, or the first error
                continue
        raise error

    def _read(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``.item()``, ``bool(t)``, ``torch.equal`` on a stand-in tensor: its value where it is
        known (computed from the inputs alone); otherwise a stand-in value (False, 1, 1.0), which
        steers the pass the way values usually do (no error raised on bad values, loops run
        once)."""
        known = _with_values(self.values, args, kwargs)
        if known is not None:
            return func(*known[0], **known[1])
        tensor = args[0]
        if func.overloadpacket.__name__ != "_local_scalar_dense" or tensor.dtype == torch.bool:
            return False  # bool(t), torch.equal(a, b), a boolean's .item()
        return 1.0 if tensor.is_floating_point() else 1

    # --- running the operation, with the dtype rules of the low-precision pass ------------------

    def _call(
        self,
        func: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        replace: dict[int, torch.Tensor],
        named: list[tuple[str, torch.Tensor]],
        stand_in: list[torch.Tensor],
    ) -> Any:
        low = self.dtype
        if low is None or not any(t.dtype == low for _, t in named):
            return _invoke(func, args, kwargs, replace)
        strays = [t for _, t in named if self._dtype_stray(t, low)]
        if not strays:
            return _invoke(func, args, kwargs, replace)
        try:
            result = _invoke(func, args, kwargs, replace)
        except Exception:  # noqa: BLE001 - tried again below with the strays converted
            # Raises again if the dtypes were not the reason.
            result = _invoke(func, args, kwargs, _cast(replace, strays, low))
            for tensor in strays:
                self._record("dtype", tensor, func, stand_in, raises=True)
            return result
        floating = [t for t in strays if t.is_floating_point()]
        promoted = {t.dtype for t in _tensors(result) if t.is_floating_point()} - {low}
        culprits = [t for t in floating if t.dtype in promoted]
        if culprits:
            for tensor in culprits:
                self._record("dtype", tensor, func, stand_in, result=min(promoted, key=str))
            # The pass goes on in low precision, so that later strays show up on their own.
            return _invoke(func, args, kwargs, _cast(replace, culprits, low))
        if floating and not _keeps_dtype(func, args, low):
            # No promotion, yet two floating dtypes: an operation that does not promote (mm,
            # linear, embedding), which meta runs and CUDA rejects.
            for tensor in floating:
                self._record("dtype", tensor, func, stand_in, raises=True)
        return result

    def _left_behind(self, tensor: torch.Tensor) -> bool:
        return tensor.device.type == "cpu"

    def _dtype_stray(self, tensor: torch.Tensor, low: torch.dtype) -> bool:
        if tensor.dtype in (low, torch.bool) or not tensor.dim():
            return False
        site = self.sites.get(tensor)
        return site is not None and not site.typed

    # --- tags ---------------------------------------------------------------------------------

    def _tag_entered(self, tensor: torch.Tensor, name: str) -> None:
        if name in _LIFTS:
            return  # torch.tensor(data) in forward: tagged as made there, below
        site = _Site(*self._line(), entered=True, attribute=self.attributes.get(id(tensor)))
        self.sites[tensor] = site

    def _tag_outputs(
        self,
        func: Any,
        name: str,
        kwargs: dict[str, Any],
        tensors: list[torch.Tensor],
        result: Any,
    ) -> None:
        outputs = _tensors(result)
        if not outputs:
            return
        site: _Site | None = None
        if name in _LIFTS or not tensors:  # made from nothing: a factory, or lifted data
            site = _Site(
                *self._line(),
                typed=kwargs.get("dtype") is not None,
                random=name if name in _RANDOM else "",
            )
        else:
            site = next((s for t in tensors if (s := self.sites.get(t)) is not None), None)
            if (
                site is not None
                and name == "_to_copy"
                and kwargs.get("dtype") not in (None, tensors[0].dtype)
            ):
                site = dataclasses.replace(site, typed=True)
        line = self._line()[:2]
        for out in outputs:
            if out not in self.made:
                self.made[out] = line
        if site is None:
            return
        for out in outputs:
            if out not in self.sites:
                self.sites[out] = site

    # --- findings -------------------------------------------------------------------------------

    def _record(
        self,
        kind: Kind,
        tensor: torch.Tensor,
        func: Any,
        stand_in: list[torch.Tensor],
        *,
        raises: bool = False,
        result: torch.dtype | None = None,
    ) -> None:
        site = self.sites.get(tensor)
        if site is None:  # a 0-dim tensor, or one lifted by torch.tensor: tag it here
            site = _Site(*self._line())
            self.sites[tensor] = site
        key = (kind, site.filename, site.lineno)
        if key in self.findings:
            return
        op = func.overloadpacket.__name__
        ref = next((self.names[id(t)] for t in stand_in if id(t) in self.names), "x")
        if kind == "device":
            if site.attribute is not None:
                attribute = site.attribute
                fix = FIX_ATTRIBUTE.format(path=attribute.path, fix=attribute.fix)
            elif site.copied_back:
                fix = FIX_COPIED_BACK.format(ref=ref)
            elif site.entered:
                fix = FIX_ENTERED.format(ref=ref)
            else:
                fix = _created_fix(site.random, ref)
        else:
            low, stray = _dtype_name(self.dtype), _dtype_name(tensor.dtype)
            if raises:
                fix = FIX_RAISES.format(ref=ref, op=op, stray=stray, low=low)
            else:
                fix = FIX_PROMOTES.format(
                    ref=ref, op=op, stray=stray, low=low, result=_dtype_name(result)
                )
        op_filename, op_lineno = self._line()[:2]
        self.findings[key] = ForwardFinding(
            kind=kind,
            filename=site.filename,
            lineno=site.lineno,
            source=linecache.getline(site.filename, site.lineno).strip(),
            op=op,
            op_filename=op_filename,
            op_lineno=op_lineno,
            tensor=brief(tensor),
            entered=site.entered,
            fix=fix,
            attribute="",
            class_name=site.class_name,
            module_path=site.module_path,
        )

    def record_stores(self, twin: nn.Module, lines: dict[tuple[int, str], tuple[str, int]]) -> None:
        """Record what the pass stored on the copy's modules where ``.to()`` leaves it behind:
        the tensors ``find_unregistered`` reports now and did not before the pass, each at the
        line that stored its attribute (``lines``), or, for one put into a container in place,
        at the line that computed it."""
        for entry in locate_unregistered(twin):
            finding, holder = entry.finding, entry.holder
            tensor = finding.tensor
            if id(tensor) in self.attributes:
                continue  # there before the pass
            line = lines.get((id(holder), finding.attribute)) or self.made.get(tensor)
            filename, lineno = line or _forward_line(holder)
            key = ("stored", filename, lineno, entry.holder_path, finding.attribute)
            if key in self.findings:
                continue
            self.findings[key] = ForwardFinding(
                kind="stored",
                filename=filename,
                lineno=lineno,
                source=linecache.getline(filename, lineno).strip(),
                op="",
                op_filename="",
                op_lineno=0,
                tensor=brief(tensor),
                entered=False,
                fix=_stored_fix(holder, finding),
                attribute=finding.attribute,
                class_name=finding.class_name,
                module_path=entry.holder_path,
            )

    def _line(self) -> tuple[str, int, str, str]:
        """The user's line running now (the innermost frame outside torch and autoreg), with
        the class and path of the module whose code it is: the nearest ``self`` on the stack
        that is a module of the copy (the model itself when none is)."""
        frame = _user_frame(sys._getframe(1))
        if frame is None:
            filename, lineno = _user_line(sys._getframe(1))
        else:
            filename, lineno = frame.f_code.co_filename, frame.f_lineno
        while frame is not None and frame.f_code is not _call.__code__:
            owner = self.modules.get(id(frame.f_locals.get("self")))
            if owner is not None:
                return filename, lineno, owner[1], owner[0]
            frame = frame.f_back
        return filename, lineno, self.root[1], self.root[0]


def _user_frame(frame: FrameType | None) -> FrameType | None:
    """The innermost frame outside torch and autoreg, up to the forward call."""
    while frame is not None and frame.f_code is not _call.__code__:
        if not frame.f_code.co_filename.startswith((_TORCH_DIR, _AUTOREG_DIR)):
            return frame
        frame = frame.f_back
    return None


def _user_line(frame: FrameType | None) -> tuple[str, int]:
    """The innermost frame outside torch and autoreg, up to the forward call; if there is none
    (torch's own module), the innermost line of torch/nn/modules."""
    fallback: tuple[str, int] | None = None
    while frame is not None and frame.f_code is not _call.__code__:
        filename = frame.f_code.co_filename
        if not filename.startswith((_TORCH_DIR, _AUTOREG_DIR)):
            return filename, frame.f_lineno
        if fallback is None and filename.startswith(_TORCH_MODULES) and filename != _MODULE_CALL:
            fallback = (filename, frame.f_lineno)
        frame = frame.f_back
    return fallback or ("<unknown>", 0)


def _named_tensors(
    func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> list[tuple[str, torch.Tensor]]:
    """``(argument name, tensor)`` for every tensor argument, lists of tensors included."""
    named: list[tuple[str, torch.Tensor]] = []
    pairs = [
        *zip((a.name for a in func._schema.arguments), args, strict=False),
        *kwargs.items(),
    ]
    for arg, value in pairs:
        if isinstance(value, torch.Tensor):
            named.append((arg, value))
        elif isinstance(value, (list, tuple)):
            named.extend((arg, v) for v in value if isinstance(v, torch.Tensor))
    return named


def _invoke(
    func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], replace: dict[int, torch.Tensor]
) -> Any:
    """``func`` with the replaced tensors; an in-place op on a replaced ``self`` returns it."""
    if not replace:
        return func(*args, **kwargs)

    def swap(tensor: torch.Tensor) -> torch.Tensor:
        return replace.get(id(tensor), tensor)

    new_args, new_kwargs = tree_map_only(torch.Tensor, swap, (args, kwargs))
    result = func(*new_args, **new_kwargs)
    if _writes_self(func) and id(args[0]) in replace and result is new_args[0]:
        return args[0]  # an in-place operation on a stray: the stray itself stays where it was
    return result


def _written(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.Tensor]:
    """The tensors ``func`` writes to: ``self`` of an in-place operation, ``out=``."""
    written: list[torch.Tensor] = []
    for position, argument in enumerate(func._schema.arguments):
        if argument.alias_info is None or not argument.alias_info.is_write:
            continue
        value = args[position] if position < len(args) else kwargs.get(argument.name)
        if isinstance(value, torch.Tensor):
            written.append(value)
    return written


def _writes_self(func: Any) -> bool:
    schema = func._schema.arguments
    return bool(schema) and schema[0].alias_info is not None and schema[0].alias_info.is_write


def _with_values(
    values: _ByTensor[torch.Tensor], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    """``args`` and ``kwargs`` with each stand-in tensor replaced by its known value; ``None``
    if one is unknown, or if there is no tensor (a factory: its values are not worth making)."""
    leaves = _tensors((args, kwargs))
    if not leaves:
        return None
    found: dict[int, torch.Tensor] = {}
    for tensor in leaves:
        value = values.get(tensor) if tensor.device.type == STAND_IN.type else tensor
        if value is None:
            return None
        found[id(tensor)] = value
    swapped: tuple[tuple[Any, ...], dict[str, Any]] = tree_map_only(
        torch.Tensor, lambda t: found[id(t)], (args, kwargs)
    )
    return swapped


def _cast(
    replace: dict[int, torch.Tensor], tensors: list[torch.Tensor], dtype: torch.dtype
) -> dict[int, torch.Tensor]:
    cast = dict(replace)
    for tensor in tensors:
        cast[id(tensor)] = replace.get(id(tensor), tensor).to(dtype)
    return cast


def _keeps_dtype(func: Any, args: tuple[Any, ...], low: torch.dtype) -> bool:
    """Whether ``func`` takes another floating dtype next to ``low`` on purpose."""
    if func.overloadpacket.__name__ in _MIXED_OK:
        return True
    return _writes_self(func) and isinstance(args[0], torch.Tensor) and args[0].dtype == low


def _created_fix(random: str, ref: str) -> str:
    if random in ("rand", "randn"):
        return FIX_RANDOM_LIKE.format(ref=ref, op=random)
    return (FIX_RANDOM if random else FIX_CREATED).format(ref=ref)


def _target_device(kwargs: dict[str, Any], tensor: torch.Tensor) -> torch.device:
    device = kwargs.get("device")
    return tensor.device if device is None else torch.device(device)


def _dtype_name(dtype: torch.dtype | None) -> str:
    return str(dtype).removeprefix("torch.")


def _short(filename: str) -> str:
    if os.path.isabs(filename):
        relative = os.path.relpath(filename)
        if not relative.startswith(".."):
            return relative
    return filename


def _op_where(finding: ForwardFinding) -> str:
    if (finding.op_filename, finding.op_lineno) == (finding.filename, finding.lineno):
        return finding.op
    if finding.op_filename == finding.filename:
        return f"{finding.op} (line {finding.op_lineno})"
    return f"{finding.op} ({_short(finding.op_filename)}:{finding.op_lineno})"


class _StoreWatch:
    """The user's line of the first store of each attribute of the copy's modules in the pass.

    Each module of the copy is switched to a subclass of its class (one per class, same names)
    whose ``__setattr__`` notes the line, then calls the class's own. The copy is the audit's:
    the caller's modules and classes are left as they were. A module whose class cannot be
    subclassed that way is not watched.
    """

    def __init__(self, twin: nn.Module) -> None:
        self.lines: dict[tuple[int, str], tuple[str, int]] = {}
        watching: dict[type, type | None] = {}
        for module in twin.modules():
            cls = type(module)
            if cls not in watching:
                watching[cls] = self._subclass(cls)
            subclass = watching[cls]
            if subclass is not None:
                with contextlib.suppress(TypeError):  # a layout __class__ cannot take
                    module.__class__ = subclass

    def _subclass(self, cls: type) -> type | None:
        lines = self.lines
        setattr_of: Any = cls.__setattr__

        def __setattr__(module: nn.Module, name: str, value: Any) -> None:  # noqa: N807
            key = (id(module), name)
            if key not in lines:
                lines[key] = _user_line(sys._getframe(1))
            setattr_of(module, name, value)

        def body(namespace: dict[str, Any]) -> None:
            namespace.update(
                __setattr__=__setattr__, __module__=cls.__module__, __qualname__=cls.__qualname__
            )

        try:
            return types.new_class(cls.__name__, (cls,), exec_body=body)
        except Exception:  # noqa: BLE001 - a class that refuses subclasses: not watched
            return None


def _forward_line(module: nn.Module) -> tuple[str, int]:
    """The first line of ``module``'s ``forward``: where a store no hook saw is reported."""
    forward = type(module).forward
    try:
        return inspect.getsourcefile(forward) or "<unknown>", inspect.getsourcelines(forward)[1]
    except (OSError, TypeError):
        return "<unknown>", 0


def _stored_fix(holder: nn.Module, finding: Finding) -> str:
    """The fix for a tensor forward stored on ``holder``, where ``.to()`` leaves it."""
    tensor, value = finding.tensor, holder.__dict__.get(finding.attribute)
    if tensor.requires_grad or isinstance(holder, AutoRegisterMixin):
        return finding.fix  # an autograd result, a weight, a name autoreg cannot carry
    if value is tensor:
        return FIX_STORED.format(name=finding.attribute)
    kind = "dict" if isinstance(value, dict) else "list"
    return FIX_STORED_CONTAINER.format(kind=kind)
