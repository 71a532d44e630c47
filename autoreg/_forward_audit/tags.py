"""What the pass knows about each tensor: whether it follows the model, and where it came from.

A tensor *follows the model* when a moved model would have it on its own device: the model's
parameters, buffers and carried state, the inputs (the caller moves them with the model), and
what operations compute from them or make with ``device=`` one of theirs. Any other tensor stays
on the default device when the model moves: made by a factory without ``device=``, lifted from
data, copied back with ``.cpu()``, or made before ``forward`` (a global, a closure's, a config's,
a plain attribute ``.to()`` left behind). Its ``Site``s say where it came from (``sites``); an
integer or bool tensor's say where, but not the floating dtype made there: ``rand(n) < p`` and
``noise.argsort()`` give no float the draw's dtype.

On the CPU both kinds live on the same device, so the pass keeps the fact beside each tensor, by
its storage: views, ``.data``, ``detach()`` and ``nn.Parameter(t)`` share their base's storage,
and with it what is known about it. A model built on the meta device runs there, and there a
tensor follows the model where it is not on the CPU: the fact is the device itself.
"""

from __future__ import annotations

import dataclasses
from typing import Final

import torch
from torch.utils.weak import WeakIdKeyDictionary

from .sites import Site, untyped

__all__ = ["Tag", "Tags", "storage_key"]


@dataclasses.dataclass(frozen=True)
class Tag:
    """``model``: the tensor follows the model; ``sites``: where it came from, when it was made
    in the pass or entered it (none for the model's own state and the inputs); ``pending``: the
    keys of the dtype findings held back until it meets the model (an operation it promoted
    to its dtype, whose result may yet be converted back to the model's)."""

    model: bool
    sites: tuple[Site, ...] = ()
    pending: frozenset[tuple[object, ...]] = frozenset()


_MODEL: Final = Tag(True)


class Tags:
    """A ``Tag`` per storage (per tensor when it has none), without keeping either alive."""

    def __init__(self) -> None:
        self._map = WeakIdKeyDictionary()

    def get(self, tensor: torch.Tensor) -> Tag | None:
        tag: Tag | None = self._map.get(storage_key(tensor))  # type: ignore[no-untyped-call]
        if tag is None and tensor.device.type != "cpu":
            return _MODEL  # a model built on meta: on its device
        return tag

    def known(self, tensor: torch.Tensor) -> bool:
        """Whether ``tensor`` (its storage) has a tag of its own."""
        return storage_key(tensor) in self._map

    def set(self, tensor: torch.Tensor, tag: Tag) -> None:
        if not (tensor.is_floating_point() or tensor.is_complex()):
            # An integer or bool tensor (a comparison, argsort's indices) keeps where it came
            # from, not the floating dtype made there, which none of its values has.
            tag = Tag(tag.model, untyped(tag.sites))  # and no held-back finding: not floating
        self._map[storage_key(tensor)] = tag

    def model(self, tensor: torch.Tensor) -> None:
        """Mark ``tensor`` as following the model, keeping where it came from."""
        tag = self.get(tensor)
        self.set(tensor, Tag(True, *((tag.sites, tag.pending) if tag is not None else ())))

    def follows(self, tensor: torch.Tensor) -> bool:
        """Whether ``tensor`` would be on the model's device after the model moved."""
        tag = self.get(tensor)
        return tag is not None and tag.model

    def sites(self, tensor: torch.Tensor) -> tuple[Site, ...]:
        tag = self.get(tensor)
        return tag.sites if tag is not None else ()

    def pending(self, tensor: torch.Tensor) -> frozenset[tuple[object, ...]]:
        tag = self.get(tensor)
        return tag.pending if tag is not None else frozenset()


def storage_key(tensor: torch.Tensor) -> object:
    """The storage of ``tensor`` (shared by its views and aliases); the tensor itself when it has
    none (sparse, nested, a wrapper subclass)."""
    try:
        with torch._C.DisableTorchFunctionSubclass():  # a lazy module's parameter refuses it
            return tensor.untyped_storage()
    except (RuntimeError, NotImplementedError, TypeError, ValueError):  # ValueError: a lazy
        return tensor  # module's UninitializedParameter
