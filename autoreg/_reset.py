"""``reset_buffers``: recompute derived buffers after building a model on the meta device.

A model built under ``torch.device("meta")`` and materialised with ``to_empty(device=...)`` gets
memory, not values. Parameters and persistent buffers come back from a checkpoint; non-persistent
buffers - the derived constants (rotary frequencies, masks, position ids) that autoreg registers by
default - are in no checkpoint and stay uninitialised, exactly as for ``nn.Module``.

The convention mirrors ``reset_parameters()``: a module that holds derived constants computes them
in a ``reset_buffers()`` method and calls it from ``__init__``:

```python
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
```

``reset_buffers()`` is a construction method (row 10): a new tensor it assigns is a buffer, as in
``__init__``.

``reset_buffers(model)`` calls the method of every module that defines one, so that the factory
calls in it create their tensors on the module's device, without ``device=`` arguments. It works
the same after ``model.load_state_dict(checkpoint, assign=True)`` on a meta model (no
``to_empty``): the recomputed buffers land next to the loaded weights. Carried runtime tensors are
not recomputed: the code that created them (usually ``forward``) does that again.

The recomputed buffers keep the dtype and the device they had (the entries of a ``BufferList`` or
``BufferDict`` the module holds are its buffers too, whether the method rebuilds the container or
replaces its entries). A method that computes
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
import sys
from collections.abc import Callable

import torch
from torch import nn

from ._carry import carried_values
from ._containers import BufferDict, BufferList
from ._frames import skip_as_dynamo_frames
from ._walk import iter_tensors, map_tensors

__all__ = ["reset_buffers"]


def reset_buffers(module: nn.Module, *, recurse: bool = True) -> list[str]:
    """Call ``reset_buffers()`` on each module of ``module``'s tree that defines it; return names.

    ``recurse=False`` resets ``module`` alone: the call to make from a framework's per-module
    initialisation hook (transformers' ``_init_weights(module)``). Modules are visited in
    ``module.named_modules()`` order (a module before its children, a shared module once), and
    the names returned are those of ``named_modules()`` (``""`` for ``module`` itself). Each
    call runs under ``torch.no_grad()`` (derived constants track no gradient) and under
    ``torch.device(d)``: ``d`` is the device of the module's first parameter or buffer that is
    not on the meta device, else of its submodules', else its nearest ancestor's device. Meta
    tensors are placeholders - after ``load_state_dict(..., assign=True)`` the non-persistent
    buffers are still on meta - so ``d`` is ``meta`` only for a module whose tensors all are.
    Afterwards each floating buffer of the module, and each floating tensor it carries, gets
    back the floating dtype it had before the call, and each that was not on meta the device it
    was on (see the module docstring).
    """
    reset: list[str] = []
    devices: dict[str, torch.device | None] = {}
    for name, submodule in module.named_modules() if recurse else [("", module)]:
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
        before = _placements(submodule)
        with torch.no_grad(), placement:
            method()
            _restore_placements(submodule, before)
        reset.append(name)
    return reset


# Where a value is held: ("", name) on the module itself, (child, key) in a buffer container the
# module holds under the attribute ``child`` (by its name: the method may replace the container).
_Place = tuple[str, str]
_Placements = dict[_Place, dict[str, tuple[torch.dtype, torch.device]]]


def _placements(module: nn.Module) -> _Placements:
    """``{place: {path: (dtype, device)}}`` for the buffers and carried values of ``module``."""
    return {
        place: {path: (t.dtype, t.device) for path, t in iter_tensors(value)}
        for place, value in _held(module).items()
    }


def _restore_placements(module: nn.Module, before: _Placements) -> None:
    """Give each recomputed buffer and carried tensor of ``module`` the floating dtype and the
    device it had."""
    for place, value in _held(module).items():
        if place not in before:
            continue
        was = before[place]
        restored = {
            id(t): moved
            for path, t in iter_tensors(value)
            if path in was and (moved := _restored(t, *was[path])) is not t
        }
        if restored:
            # Through __setattr__, as the method assigned it: a buffer keeps its persistence,
            # and a module whose own __setattr__ watches its attributes sees the new value.
            child, name = place
            owner = module._modules[child] if child else module
            setattr(owner, name, map_tensors(value, _replacing(restored)))


def _replacing(restored: dict[int, torch.Tensor]) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda tensor: restored.get(id(tensor), tensor)


def _held(module: nn.Module) -> dict[_Place, object]:
    """The buffers and carried values of ``module``, and the entries of its buffer containers."""
    held: dict[_Place, object] = {("", k): b for k, b in module._buffers.items() if b is not None}
    if getattr(type(module), "__autoreg__", None) is not None:
        held.update((("", k), v) for k, v in carried_values(module).items())
    for child, container in module._modules.items():
        if isinstance(container, (BufferList, BufferDict)):
            held.update(((child, k), b) for k, b in container._buffers.items() if b is not None)
    return held


def _restored(tensor: torch.Tensor, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    if not (dtype.is_floating_point and tensor.dtype.is_floating_point):
        dtype = tensor.dtype
    if device.type == "meta":  # a placeholder: the method chose where the value lives
        device = tensor.device
    if tensor.dtype == dtype and tensor.device == device:
        return tensor
    return tensor.to(device=device, dtype=dtype)


def _first_tensor(module: nn.Module) -> torch.Tensor | None:
    return next(itertools.chain(module.parameters(), module.buffers()), None)


def _materialised_device(module: nn.Module) -> torch.device | None:
    """The device of the first parameter or buffer not on meta: the module's own, else any."""
    for recurse in (False, True):
        for tensor in itertools.chain(module.parameters(recurse), module.buffers(recurse)):
            if not tensor.is_meta:
                return tensor.device
    return None


skip_as_dynamo_frames([sys.modules[__name__]])  # model code calls it (_frames)
