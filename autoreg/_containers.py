"""``BufferList`` and ``BufferDict``: list- and dict-like modules whose tensors are buffers.

PyTorch has ``nn.ParameterList`` / ``nn.ParameterDict`` but no buffer counterparts (pytorch issue
#37386): a plain list of tensors on a module stays behind on ``.to()`` and is not in
``state_dict``. These containers hold each tensor as a buffer of their own (``'0'``, ``'1'``, ...
or the dict's keys), so the tensors move with the module, deep-copy and pickle with it, and appear
in ``state_dict`` as ``anchors.0`` / ``tables.key`` when persistent.

Design note
-----------
- Storage is the module's own ``_buffers``: reading an entry returns the current buffer, the one
  ``.to()`` put there; nothing is duplicated.
- Each new tensor goes through ``register_buffer`` (global registration hooks see it, and may
  replace it); re-indexing after ``insert`` or ``del`` moves existing buffers between keys.
- One persistence for the whole container, **non-persistent by default**, as everywhere in
  autoreg: replacing a plain list or dict attribute by a ``BufferList`` / ``BufferDict`` does not
  change the checkpoint format (old checkpoints still load with ``strict=True``). Pass
  ``persistent=True`` for state worth saving. An ``nn.Buffer`` whose own persistence disagrees is
  refused rather than silently changed.
- Entries are tensors only: not None, not ``nn.Parameter`` (a weight belongs in
  ``nn.ParameterList``), not modules.
- ``BufferDict`` keys are strings that can name a buffer: not empty or dotted, not a method or
  attribute of the class (``keys``, ``persistent``, ...) - the rule ``register_buffer`` applies,
  checked up front so that the error says why (``_facts.why_no_buffer_slot``). ``update`` keeps
  the order of a plain dict (``nn.ParameterDict`` sorts it).
"""

from __future__ import annotations

import operator
import sys
from collections.abc import ItemsView, Iterable, Iterator, KeysView, Mapping, ValuesView
from typing import Any, Final, Self, cast, overload

import torch
from torch import nn

from ._errors import BufferKeyError, BufferTypeError
from ._facts import why_no_buffer_slot
from ._frames import skip_as_dynamo_frames
from ._messages.contract import (
    A_PARAMETER,
    KEY_NOT_A_NAME,
    KEY_NOT_A_STRING,
    NOT_A_TENSOR,
    NOT_AN_ITERABLE_OF_TENSORS,
    PERSISTENCE_CLASH,
)
from ._messages.describe import describe

__all__ = ["BufferDict", "BufferList"]

_PERSISTENT: Final = "_autoreg_persistent"  # instance key; '_autoreg_' names cannot be buffer keys


def _checked(container: nn.Module, where: str, value: object) -> torch.Tensor:
    """``value`` if the container may hold it as a buffer; raise BufferTypeError otherwise."""
    cls = type(container).__name__
    if not isinstance(value, torch.Tensor):
        raise BufferTypeError(NOT_A_TENSOR.format(value=describe(value), cls=cls, where=where))
    if isinstance(value, nn.Parameter):
        raise BufferTypeError(A_PARAMETER.format(value=describe(value), cls=cls, where=where))
    own = container.__dict__[_PERSISTENT]
    if isinstance(value, nn.Buffer) and getattr(value, "persistent", own) != own:
        given = not own
        raise BufferTypeError(PERSISTENCE_CLASH.format(given=given, cls=cls, where=where, own=own))
    return value


class BufferList(nn.Module):
    """A list of tensors held as buffers: they move with ``.to()`` and (if persistent) are saved.

    Like ``nn.ParameterList``: index it, iterate it, ``append`` / ``extend`` / ``insert`` /
    ``pop`` / ``del``; entries are registered as buffers ``'0'``, ``'1'``, ... so ``state_dict``
    keys read ``name.0``; a checkpoint loads into a ``BufferList`` of the same length. Functions
    that need a real list (``torch.stack``) take ``list(buffers)``, as with ``nn.ParameterList``.
    ``persistent`` (default False, like autoreg's buffers) applies to every entry:

    ```python
    self.anchors = autoreg.BufferList(torch.tensor(a) for a in ANCHORS)
    self.anchors[0]                   # the current buffer: moved by .to()
    ```
    """

    def __init__(
        self, values: Iterable[torch.Tensor] | None = None, *, persistent: bool = False
    ) -> None:
        super().__init__()
        self.__dict__[_PERSISTENT] = bool(persistent)
        if values is not None:
            self.extend(values)

    @property
    def persistent(self) -> bool:
        """Whether the entries are saved in ``state_dict`` (fixed at construction)."""
        return bool(self.__dict__[_PERSISTENT])

    def _key(self, index: int) -> str:
        position = operator.index(index)
        size = len(self._buffers)
        if not -size <= position < size:
            raise IndexError(f"BufferList index {position} is out of range ({size} entries)")
        return str(position % size)

    def _register(self, key: str, value: object) -> None:
        tensor = _checked(self, f"index {key}", value)
        self.register_buffer(key, tensor, self.persistent)

    def _rewrite(self, values: list[torch.Tensor]) -> None:
        """Store ``values`` (buffers this list already holds) under keys '0'..n-1."""
        buffers = self._buffers
        for position, value in enumerate(values):
            buffers[str(position)] = value
        for position in range(len(values), len(buffers)):
            del buffers[str(position)]
            self._non_persistent_buffers_set.discard(str(position))

    @overload
    def __getitem__(self, index: int) -> torch.Tensor: ...

    @overload
    def __getitem__(self, index: slice) -> BufferList: ...

    def __getitem__(self, index: int | slice) -> torch.Tensor | BufferList:
        if isinstance(index, slice):
            return type(self)(list(self)[index], persistent=self.persistent)
        return cast(torch.Tensor, self._buffers[self._key(index)])

    def __setitem__(self, index: int, value: torch.Tensor) -> None:
        self._register(self._key(index), value)

    def __delitem__(self, index: int | slice) -> None:
        values = list(self)
        if isinstance(index, slice):
            del values[index]
        else:
            del values[int(self._key(index))]
        self._rewrite(values)

    def __len__(self) -> int:
        return len(self._buffers)

    def __iter__(self) -> Iterator[torch.Tensor]:
        buffers = self._buffers
        return iter([cast(torch.Tensor, buffers[str(i)]) for i in range(len(buffers))])

    def __iadd__(self, values: Iterable[torch.Tensor]) -> Self:
        return self.extend(values)

    def __dir__(self) -> list[str]:
        return [key for key in super().__dir__() if not key.isdigit()]  # type: ignore[no-untyped-call]

    def append(self, value: torch.Tensor) -> Self:
        """Add ``value`` at the end, as a buffer."""
        self._register(str(len(self)), value)
        return self

    def extend(self, values: Iterable[torch.Tensor]) -> Self:
        """Add each tensor of ``values`` at the end, as buffers."""
        if isinstance(values, torch.Tensor) or not isinstance(values, Iterable):
            raise BufferTypeError(
                NOT_AN_ITERABLE_OF_TENSORS.format(
                    cls=type(self).__name__, method="extend", value=describe(values)
                )
            )
        for value in values:
            self.append(value)
        return self

    def insert(self, index: int, value: torch.Tensor) -> None:
        """Insert ``value`` before position ``index`` (clamped, as ``list.insert`` does)."""
        values = list(self)
        self.append(value)  # registered (hooks run) under a new key, then moved into place
        values.insert(operator.index(index), self._buffers[str(len(values))])  # type: ignore[arg-type]
        self._rewrite(values)

    def pop(self, index: int = -1) -> torch.Tensor:
        """Remove and return the entry at ``index`` (the last by default)."""
        value = self[index]
        del self[index]
        return value

    def extra_repr(self) -> str:
        entries = [f"({key}): {describe(tensor)}" for key, tensor in self._buffers.items()]
        return "\n".join([f"persistent={self.persistent}", *entries])


class BufferDict(nn.Module):
    """A dict of tensors held as buffers: they move with ``.to()`` and (if persistent) are saved.

    Like ``nn.ParameterDict``: ``d[key]``, ``d[key] = tensor``, ``del d[key]``, ``in``, ``len``,
    iteration over keys, ``keys`` / ``values`` / ``items`` / ``get`` / ``pop`` / ``update`` /
    ``clear`` / ``copy``. Keys are buffer names, so ``state_dict`` keys read ``name.key``; they
    must be strings that can name a buffer (not ``''``, dotted, or a method name such as
    ``'keys'``). Insertion order is kept. ``persistent`` (default False, like autoreg's buffers)
    applies to every entry:

    ```python
    self.tables = autoreg.BufferDict({"sin": sin, "cos": cos})
    self.tables["sin"]                # the current buffer: moved by .to()
    ```
    """

    def __init__(
        self,
        buffers: Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]] | None = None,
        *,
        persistent: bool = False,
    ) -> None:
        super().__init__()
        self.__dict__[_PERSISTENT] = bool(persistent)
        if buffers is not None:
            self.update(buffers)

    @property
    def persistent(self) -> bool:
        """Whether the entries are saved in ``state_dict`` (fixed at construction)."""
        return bool(self.__dict__[_PERSISTENT])

    def _check_key(self, key: object) -> str:
        if not isinstance(key, str):
            raise BufferTypeError(KEY_NOT_A_STRING.format(key=key, type=type(key).__name__))
        if key not in self._buffers:
            where = why_no_buffer_slot(type(self), key)
            if where is None and key in self.__dict__:
                where = "is an attribute of this BufferDict"
            if where is not None:
                raise BufferKeyError(KEY_NOT_A_NAME.format(key=key, where=where))
        return key

    def __getitem__(self, key: str) -> torch.Tensor:
        if key not in self._buffers:
            raise KeyError(key)
        return cast(torch.Tensor, self._buffers[key])

    def __setitem__(self, key: str, value: torch.Tensor) -> None:
        key = self._check_key(key)
        tensor = _checked(self, f"key {key!r}", value)
        self.register_buffer(key, tensor, self.persistent)

    def __delitem__(self, key: str) -> None:
        if key not in self._buffers:
            raise KeyError(key)
        del self._buffers[key]
        self._non_persistent_buffers_set.discard(key)

    def __contains__(self, key: object) -> bool:
        return key in self._buffers

    def __len__(self) -> int:
        return len(self._buffers)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._buffers))

    def keys(self) -> KeysView[str]:
        return self._buffers.keys()

    def values(self) -> ValuesView[torch.Tensor]:
        return cast(ValuesView[torch.Tensor], self._buffers.values())

    def items(self) -> ItemsView[str, torch.Tensor]:
        return cast(ItemsView[str, torch.Tensor], self._buffers.items())

    def get(self, key: str, default: Any = None) -> Any:
        """``self[key]`` if ``key`` is present, else ``default``."""
        return self._buffers.get(key, default)

    def pop(self, key: str) -> torch.Tensor:
        """Remove ``key`` and return its tensor."""
        value = self[key]
        del self[key]
        return value

    def clear(self) -> None:
        """Remove every entry."""
        for key in list(self._buffers):
            del self[key]

    def update(
        self,
        buffers: Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]] = (),
        /,
        **kwargs: torch.Tensor,
    ) -> None:
        """Add or replace entries, as ``dict.update`` does (a mapping, pairs, or keywords)."""
        for key, value in dict(buffers, **kwargs).items():
            self[key] = value

    def copy(self) -> BufferDict:
        """A new ``BufferDict`` holding the same tensors, with the same persistence."""
        return type(self)(self.items(), persistent=self.persistent)

    def extra_repr(self) -> str:
        entries = [f"({key}): {describe(tensor)}" for key, tensor in self._buffers.items()]
        return "\n".join([f"persistent={self.persistent}", *entries])


skip_as_dynamo_frames([sys.modules[__name__]])  # model code calls it (_frames)
