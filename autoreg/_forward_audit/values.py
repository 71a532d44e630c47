"""The values of a pass on a model built on the meta device: meta has none, the inputs have theirs.

(A model with values runs on the CPU, and none of this is needed.) What an operation computes
from known values alone (``lengths.max()``, a mask of the input) is computed on the CPU as well,
so that ``.item()``, ``bool(t)``, ``.cpu()`` and shapes that depend on values (``x[mask]``)
behave as they will. An operation that raises on meta is tried again with one such input on the
CPU, where the caller keeps it (``pack_padded_sequence`` wants its lengths there). Any other value
read is a stand-in (``False``, ``1``), and counted: an error after one may come from it.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._pytree import tree_map_only

from .rules import STAND_IN, invoke, tensors_in, written
from .sites import ByTensor

__all__ = ["Values"]


class Values:
    """The values of stand-in tensors where they are known: the inputs (the caller's tensors,
    never written to) and what is computed from them alone."""

    def __init__(self) -> None:
        self.known: ByTensor[torch.Tensor] = ByTensor()
        self.guessed = 0  # the values read that were not known: stand-ins were used

    def follow(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], result: Any) -> None:
        """Compute on the CPU the values of what an operation makes from known values alone."""
        targets = written(func, args, kwargs)
        if targets:  # the values of a tensor written in place are no longer known
            for tensor in targets:
                self.known.discard(tensor)
            return
        outputs = tensors_in(result)
        if not any(t.device.type == STAND_IN.type for t in outputs):
            return
        known = self._substituted(args, kwargs)
        if known is None:
            return
        known_args, known_kwargs = known
        if "device" in known_kwargs:  # a copy to the stand-in device: its value stays here
            known_kwargs = {**known_kwargs, "device": None}
        try:
            computed = tensors_in(func(*known_args, **known_kwargs))
        except Exception:  # noqa: BLE001 - the value stays unknown
            return
        for out, value in zip(outputs, computed, strict=False):
            if out.device.type == STAND_IN.type:
                self.known[out] = value

    def on_the_cpu(
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
            value = self.known.get(tensor) if tensor.device.type == STAND_IN.type else None
            if value is None:
                continue
            try:
                return invoke(
                    func, args, kwargs, {**replace, id(tensor): value.to(tensor.dtype, copy=True)}
                )
            except Exception:  # noqa: BLE001, S112 - the next one, or the first error
                continue
        raise error

    def read(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``.item()``, ``bool(t)``, ``torch.equal`` on a stand-in tensor: its value where it is
        known (computed from the inputs alone); otherwise a stand-in value (False, 1, 1.0), which
        steers the pass the way values usually do (no error raised on bad values, loops run
        once)."""
        known = self._substituted(args, kwargs)
        if known is not None:
            return func(*known[0], **known[1])
        self.guessed += 1
        tensor = args[0]
        if func.overloadpacket.__name__ != "_local_scalar_dense" or tensor.dtype == torch.bool:
            return False  # bool(t), torch.equal(a, b), a boolean's .item()
        return 1.0 if tensor.is_floating_point() else 1

    def _substituted(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
        """``args`` and ``kwargs`` with each stand-in tensor replaced by its known value; ``None``
        if one is unknown, or if there is no tensor (a factory: its values are not worth making)."""
        leaves = tensors_in((args, kwargs))
        if not leaves:
            return None
        found: dict[int, torch.Tensor] = {}
        for tensor in leaves:
            value = self.known.get(tensor) if tensor.device.type == STAND_IN.type else tensor
            if value is None:
                return None
            found[id(tensor)] = value
        swapped: tuple[tuple[Any, ...], dict[str, Any]] = tree_map_only(
            torch.Tensor, lambda t: found[id(t)], (args, kwargs)
        )
        return swapped
