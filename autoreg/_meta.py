"""``reset_buffers``: recompute derived buffers after building a model on the meta device.

A model built under ``torch.device("meta")`` and materialised with ``to_empty(device=...)`` gets
memory, not values. Parameters and persistent buffers come back from a checkpoint; non-persistent
buffers - the derived constants (rotary frequencies, masks, position ids) that autoreg registers by
default - are in no checkpoint and stay uninitialised, exactly as for ``nn.Module``.

The convention mirrors ``reset_parameters()``: a module that holds derived constants computes them
in a ``reset_buffers()`` method and calls it from ``__init__``::

    class Rotary(autoreg.Module):
        def __init__(self, dim: int) -> None:
            super().__init__()
            self.dim = dim
            self.reset_buffers()

        def reset_buffers(self) -> None:
            self.inv_freq = 1.0 / 10_000 ** (torch.arange(0, self.dim, 2) / self.dim)

    with torch.device("meta"):
        model = Model()
    model.to_empty(device="cuda")
    model.load_state_dict(checkpoint)
    autoreg.reset_buffers(model)

``reset_buffers(model)`` calls the method of every module that defines one, so that the factory
calls in it create their tensors on the module's device, without ``device=`` arguments. It works
the same after ``model.load_state_dict(checkpoint, assign=True)`` on a meta model (no
``to_empty``): the recomputed buffers land next to the loaded weights. Carried runtime tensors are
not recomputed: the code that created them (usually ``forward``) does that again.

The recomputed buffers keep the dtype and the device they had. A method that computes
``inv_freq`` in the default float32, run after ``model.double()`` (or after
``from_pretrained(..., dtype=torch.float64)``), gives a float64 buffer: exactly what building the
model normally and then calling ``.double()`` gives. The rule: a floating buffer that the method
replaces with a floating tensor of another dtype is converted back to the dtype it had; other
buffers (integer, bool, complex) keep the dtype the method chose, as ``.to(dtype)`` would leave
them. A buffer that was on a real device comes back on that device; one that was a meta
placeholder (after ``load_state_dict(..., assign=True)``) stays where the method created it, on
the module's device.
"""

from __future__ import annotations

import contextlib
import itertools

import torch
from torch import nn

__all__ = ["reset_buffers"]


def reset_buffers(module: nn.Module) -> list[str]:
    """Call ``reset_buffers()`` on each module of ``module``'s tree that defines it; return names.

    Modules are visited in ``module.named_modules()`` order (a module before its children, a shared
    module once), and the names returned are those of ``named_modules()`` (``""`` for ``module``
    itself). Each call runs under ``torch.no_grad()`` (derived constants track no gradient) and
    under ``torch.device(d)``: ``d`` is the device of the module's first parameter or buffer that
    is not on the meta device, else of its submodules', else its nearest ancestor's device. Meta
    tensors are placeholders - after ``load_state_dict(..., assign=True)`` the non-persistent
    buffers are still on meta - so ``d`` is ``meta`` only for a module whose tensors all are.
    Afterwards each floating buffer of the module gets back the floating dtype it had before the
    call, and each buffer that was not on meta the device it was on (see the module docstring).
    """
    reset: list[str] = []
    devices: dict[str, torch.device | None] = {}
    for name, submodule in module.named_modules():
        device = _materialised_device(submodule)
        if device is None and name:
            device = devices.get(name.rpartition(".")[0])
        if device is None and _first_tensor(submodule) is not None:
            device = torch.device("meta")
        devices[name] = device
        method = getattr(submodule, "reset_buffers", None)
        if not callable(method):
            continue
        placement = torch.device(device) if device is not None else contextlib.nullcontext()
        before = {
            key: (buffer.dtype, buffer.device)
            for key, buffer in submodule._buffers.items()
            if buffer is not None
        }
        with torch.no_grad(), placement:
            method()
            _restore_placement(submodule, before)
        reset.append(name)
    return reset


def _restore_placement(
    module: nn.Module, before: dict[str, tuple[torch.dtype, torch.device]]
) -> None:
    """Give each recomputed buffer of ``module`` the floating dtype and the device it had."""
    for key, buffer in list(module._buffers.items()):
        if buffer is None or key not in before:
            continue
        dtype, device = before[key]
        if not (dtype.is_floating_point and buffer.dtype.is_floating_point):
            dtype = buffer.dtype
        if device.type == "meta":  # a placeholder: the method chose where the value lives
            device = buffer.device
        if buffer.dtype != dtype or buffer.device != device:
            # Through __setattr__, as the method assigned it: the buffer keeps its persistence,
            # and a module whose own __setattr__ watches buffers sees the new value.
            setattr(module, key, buffer.to(device=device, dtype=dtype))


def _first_tensor(module: nn.Module) -> torch.Tensor | None:
    return next(itertools.chain(module.parameters(), module.buffers()), None)


def _materialised_device(module: nn.Module) -> torch.device | None:
    """The device of the first parameter or buffer not on meta: the module's own, else any."""
    for recurse in (False, True):
        for tensor in itertools.chain(module.parameters(recurse), module.buffers(recurse)):
            if not tensor.is_meta:
                return tensor.device
    return None
