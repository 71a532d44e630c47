"""How values are described in every message: a tensor in full (``describe``) or in a table
(``brief``), a dtype, an error, an object.
"""

from __future__ import annotations

from typing import Any, Final

import torch

# --- describing values ---------------------------------------------------------------------------


def describe(value: Any) -> str:
    """``Tensor(shape=(4, 4), dtype=torch.float32, device='cpu')``; a non-tensor's type name."""
    if isinstance(value, torch.Tensor):
        grad = ", requires_grad=True" if value.requires_grad else ""
        if value.is_nested:  # no single shape
            return (
                f"NestedTensor({value.size(0)} tensors, dtype={value.dtype}, "
                f"device='{value.device}'{grad})"
            )
        return (
            f"{type(value).__name__}(shape={tuple(value.shape)}, dtype={value.dtype}, "
            f"device='{value.device}'{grad})"
        )
    return f"'{torch.typename(value)}'"


def brief(tensor: torch.Tensor) -> str:
    """``float32[16, 16] cpu``, with ``, requires grad`` when it does: a tensor in a table."""
    shape = f"nested({tensor.size(0)})" if tensor.is_nested else str(list(tensor.shape))
    text = f"{dtype_name(tensor.dtype)}{shape} {tensor.device}"
    return text + ", requires grad" if tensor.requires_grad else text


def dtype_name(dtype: torch.dtype | None) -> str:
    """``float32``: a dtype without its ``torch.`` prefix."""
    return str(dtype).removeprefix("torch.")


def describe_error(error: BaseException) -> str:
    """``TypeError: message`` (the type alone when the message is empty): an error quoted in
    another message."""
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def describe_object(value: object) -> str:
    """``the class Net`` for a class; the ``repr`` of anything else: what a target gave."""
    return A_CLASS.format(name=value.__qualname__) if isinstance(value, type) else repr(value)


A_CLASS: Final = "the class {name}"
