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
        with torch.no_grad(), placement:
            method()
        reset.append(name)
    return reset


def _first_tensor(module: nn.Module) -> torch.Tensor | None:
    return next(itertools.chain(module.parameters(), module.buffers()), None)


def _materialised_device(module: nn.Module) -> torch.device | None:
    """The device of the first parameter or buffer not on meta: the module's own, else any."""
    for recurse in (False, True):
        for tensor in itertools.chain(module.parameters(recurse), module.buffers(recurse)):
            if not tensor.is_meta:
                return tensor.device
    return None
