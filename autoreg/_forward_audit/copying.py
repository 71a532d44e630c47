"""The audit's copies: the model and the inputs, on the CPU with their values, and back to normal.

The model is deep-copied and converted by its own ``.to()``, so that what ``.to()`` leaves behind
on a real device is left behind here too (``strand``); the inputs are copied with it; what follows
the model is tagged (``follow``). A model built on the meta device has no values: its copy stays
there, its parameters mapped straight to meta through the copy's memo (no weight is duplicated),
and the caller's inputs keep their values for the pass (``values``). The random number generators
and the default device are kept as the caller had them.
"""

from __future__ import annotations

import contextlib
import copy
import random
import sys
import warnings
from collections.abc import Iterator
from typing import Any, Final

import torch
from torch import nn
from torch.nn.parameter import UninitializedParameter
from torch.overrides import _get_current_function_mode_stack
from torch.utils._device import DeviceContext
from torch.utils._pytree import tree_flatten

from .._audit import Finding, Located, join, locate_unregistered
from .._audit_scope import history_free_memo, object_fields
from .._copies import SharedModuleError, isolated_copy
from .._declarations import Declaration
from .._errors import ForwardAuditError
from .._messages.audits import (
    CANNOT_COPY,
    CANNOT_COPY_ATTRIBUTE,
    CANNOT_COPY_INPUTS,
    FIX_KEPT_PLAIN,
)
from .._messages.describe import describe, describe_error
from .._mixin import AutoRegisterMixin
from .._record import record_of
from .._walk import iter_tensors, map_tensors
from .calls import MODEL_DEVICE
from .rules import STAND_IN, tensors_in
from .sites import ByTensor
from .tags import Tag, Tags

__all__ = [
    "CannotConvertError",
    "copy_inputs",
    "copy_model",
    "default_device_cpu",
    "devices_held",
    "exchanged_tensors",
    "follow",
    "on_meta",
    "rng_kept",
    "state",
    "strand",
]


def on_meta(model: nn.Module) -> bool:
    """Whether ``model`` was built on the meta device (it has no values): the pass runs there."""
    return any(t.device.type == STAND_IN.type for t in state(model))


def copy_model(model: nn.Module, low: torch.dtype | None, meta: bool) -> nn.Module:
    """A deep copy of ``model``, on the CPU (on meta for a model built there), in ``low`` if
    given, converted by the model's own ``.to()``, one argument at a time (a class's override of
    ``to(device)`` takes one), so that what ``.to()`` leaves behind is left behind here too.

    A tensor with autograd history (a state kept by a training forward), which ``deepcopy``
    refuses, enters the copy as a detached copy of its value. On meta, parameters enter the copy
    already there, through ``deepcopy``'s memo: no weight is duplicated, and a plain attribute
    aliasing a parameter follows it, as ``.to()`` on a real device does (it swaps
    ``param.data`` in place).
    """
    memo: dict[int, Any] = {}
    if meta:
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
    history_free_memo(model, memo)
    try:
        twin = isolated_copy(model, memo)
    except SharedModuleError as error:
        raise ForwardAuditError(str(error), []) from None
    except Exception as error:
        raise ForwardAuditError(_cannot_copy(model, memo, error), []) from error
    moves: list[torch.device | str | torch.dtype] = []
    if meta:
        moves.append(STAND_IN)
    else:
        if any(t.device.type != "cpu" for t in state(twin)):
            moves.append("cpu")
        if _keeps_its_device(twin):
            # The model's device, on the CPU: a no-op for its tensors, but the device
            # Lightning's to() keeps (self.device) then follows it, as on a real move.
            moves.append(MODEL_DEVICE)
    if low is not None:
        moves.append(low)
    for move in moves:
        try:
            with warnings.catch_warnings():
                # nn.Module's .to(bfloat16) casts a complex buffer to a real dtype, with a
                # warning: what the model does, not the audit's to report here.
                warnings.simplefilter("ignore", UserWarning)
                twin.to(move)
        except Exception as error:  # the model's own to(), said as such
            raise CannotConvertError(move, error) from error
    return twin


class CannotConvertError(ForwardAuditError):
    """The copy's own ``.to(move)`` raised ``error``: the model's error, not the audit's."""

    def __init__(self, move: torch.device | str | torch.dtype, error: Exception) -> None:
        super().__init__(describe_error(error), [])
        self.move = move
        self.error = error


def _cannot_copy(model: nn.Module, memo: dict[int, Any], error: Exception) -> str:
    """Why ``model`` cannot be deep-copied: the first attribute of one of its modules that
    cannot, by itself, with its value; else ``error`` as it is."""
    for module in model.modules():
        for name, value in vars(module).items():
            if name == "_modules":
                continue  # each submodule is tried on its own
            entries = value.items() if name in ("_parameters", "_buffers") else [(name, value)]
            for attribute, item in entries:
                try:
                    copy.deepcopy(item, dict(memo))
                except Exception as blocking:  # noqa: BLE001 - this is the one to name
                    return CANNOT_COPY_ATTRIBUTE.format(
                        cls=type(model).__name__,
                        owner=type(module).__name__,
                        name=attribute,
                        value=describe(item),
                        error=describe_error(blocking),
                    )
    return CANNOT_COPY.format(cls=type(model).__name__, error=describe_error(error))


def exchanged_tensors(inputs: Any) -> list[torch.Tensor]:
    """The tensors the caller exchanges with forward: in its inputs, which the caller moves with
    the model, or in its output, which the caller meets. Nested in lists, tuples and dicts, and
    one level into a plain object among them (its fields, and the containers they hold): a batch
    wrapper that holds the padded tensors and their mask (DETR's ``NestedTensor``) is the input,
    a distribution a policy returns is the output."""
    found: dict[int, torch.Tensor] = {}
    for leaf in tree_flatten(inputs)[0]:
        if isinstance(leaf, torch.Tensor):
            found.setdefault(id(leaf), leaf)
        elif not isinstance(leaf, nn.Module):
            for _, item in object_fields(leaf):
                for tensor in tensors_in(item):
                    found.setdefault(id(tensor), tensor)
    return list(found.values())


def copy_inputs(inputs: Any, low: torch.dtype | None, values: ByTensor[torch.Tensor] | None) -> Any:
    """The inputs, deep-copied, with each of their tensors (``exchanged_tensors``) copied to the CPU
    (to meta when ``values`` is given: it then maps each to the caller's, which holds its
    values), its floating ones converted to ``low``."""
    memo: dict[int, Any] = {}
    for tensor in exchanged_tensors(inputs):
        device = STAND_IN if values is not None else torch.device("cpu")
        moved = tensor.detach().to(device, copy=True)
        if low is not None and moved.is_floating_point():
            moved = moved.to(low)
        memo[id(tensor)] = moved.requires_grad_(tensor.requires_grad)
        if values is not None and tensor.device.type != STAND_IN.type:
            values[memo[id(tensor)]] = tensor.detach()
    try:
        return copy.deepcopy(inputs, memo)
    except Exception as error:
        raise ForwardAuditError(
            CANNOT_COPY_INPUTS.format(error=describe_error(error)), []
        ) from error


def _kept_plain(twin: nn.Module) -> Iterator[Located]:
    """What the names an autoreg class declares ``autoreg.Plain`` hold (``fix`` declares so the
    tensors that share values): no finding of the attribute audit's, as they are kept where they
    are on purpose, and left behind by ``.to()`` all the same."""
    for prefix, module in twin.named_modules():
        if not isinstance(module, AutoRegisterMixin):
            continue
        for name, declaration in record_of(module).declarations.items():
            if declaration is not Declaration.PLAIN or name not in vars(module):
                continue
            fix = FIX_KEPT_PLAIN.format(name=name)
            for path, tensor in iter_tensors(vars(module)[name], join(prefix, name)):
                finding = Finding(path, tensor, type(module).__name__, name, fix)
                yield Located(finding, module, prefix)


def strand(twin: nn.Module) -> dict[int, Located]:
    """The tensors ``.to()`` left behind in the copy (``find_unregistered``), by id, with the
    first module that holds each. Those elsewhere than on the CPU are put there, where they would
    be had the model been built there (a model built on meta, one moved to a GPU): then
    ``self.mask.to(x)`` moves one, and ``x + self.mask`` mixes the devices. A reference to a
    buffer (or to a parameter torch overwrites) gets a tensor of its own: on a real device,
    ``.to()`` gives the buffer a new tensor and leaves the reference on the CPU, where the
    copy's ``.to("cpu")`` changed nothing."""
    stranded: dict[int, Located] = {}
    replaced: dict[int, torch.Tensor] = {}
    registered = {id(t) for t in state(twin)}
    for entry in (*locate_unregistered(twin), *_kept_plain(twin)):
        tensor = entry.finding.tensor
        if entry.finding.kind == "numpy":
            continue  # a numpy array never enters a pass as it is
        if id(tensor) in replaced:
            tensor = replaced[id(tensor)]
        elif tensor.device.type != "cpu" or id(tensor) in registered:
            if tensor.device.type == STAND_IN.type:  # on meta: no values, zeros
                cpu = torch.zeros(tensor.shape, dtype=tensor.dtype)
            else:  # on a GPU, or the buffer's on the CPU
                cpu = tensor.detach().to("cpu", copy=True)
            cpu.requires_grad_(tensor.requires_grad)
            replaced[id(tensor)] = cpu
            tensor = cpu
        stranded.setdefault(id(tensor), entry)
    if replaced:
        for module in twin.modules():
            for name, value in list(vars(module).items()):
                if name not in ("_parameters", "_buffers", "_modules"):
                    new = map_tensors(value, lambda t: replaced.get(id(t), t))
                    if new is not value:
                        module.__dict__[name] = new
    return stranded


def follow(tags: Tags, twin: nn.Module, stranded: dict[int, Located], inputs: Any) -> None:
    """Tag what follows the model: its parameters and buffers, what its modules carry, the
    inputs (the caller moves them with the model)."""
    for module in twin.modules():
        for name, value in vars(module).items():
            if name not in ("_parameters", "_buffers", "_modules"):
                for _, tensor in iter_tensors(value):
                    if id(tensor) not in stranded:
                        tags.set(tensor, Tag(True))
    for tensor in (*state(twin), *exchanged_tensors(inputs)):
        tags.set(tensor, Tag(True))


# Where Lightning defines the base whose to(), cuda(), cpu(), double(), half() and type() keep
# each of its modules' self.device and self.dtype in step (lightning and its standalone names)
_DEVICE_KEEPERS: Final = (
    ("lightning.fabric.utilities.device_dtype_mixin", "_DeviceDtypeModuleMixin"),
    ("lightning_fabric.utilities.device_dtype_mixin", "_DeviceDtypeModuleMixin"),
)


def _keeps_its_device(model: nn.Module) -> bool:
    """Whether ``model`` is an instance of Lightning's device-keeping base (by identity, once
    Lightning has loaded it: nothing is imported here), whose every move updates the device
    its modules report: another module's ``self.device`` stays as it was built, and a class's
    own ``to(device)`` override is not called by ``.cuda()`` nor by a parent's ``.to()``."""
    for module_name, name in _DEVICE_KEEPERS:
        keeper = getattr(sys.modules.get(module_name), name, None)
        if isinstance(keeper, type) and issubclass(type(model), keeper):
            return True
    return False


def devices_held(twin: nn.Module) -> dict[int, dict[int, str]]:
    """The CPU devices the copy's modules keep in attributes (``self.device = "cpu"``), by id:
    each module that keeps it, by id, with the name of its attribute, ``Class.attribute``: a
    device fixed when the model was built (one config's string, often kept by every part). One
    that the copy's ``.to(MODEL_DEVICE)`` set (``copy_model``: Lightning's ``_device``) follows
    the model."""
    held: dict[int, dict[int, str]] = {}
    for module in twin.modules():
        for name, value in vars(module).items():
            if isinstance(value, (torch.device, str)) and _cpu_device(value):
                if isinstance(value, torch.device) and value == MODEL_DEVICE:
                    continue
                keepers = held.setdefault(id(value), {})
                keepers.setdefault(id(module), f"{type(module).__name__}.{name}")
    return held


def _cpu_device(value: torch.device | str) -> bool:
    try:
        return torch.device(value).type == "cpu"
    except (RuntimeError, TypeError):
        return False


def state(module: nn.Module) -> Iterator[torch.Tensor]:
    yield from module.parameters()
    yield from module.buffers()


@contextlib.contextmanager
def rng_kept() -> Iterator[None]:
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
def default_device_cpu() -> Iterator[None]:
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
