"""What the audits look at in one module, and what they let pass: ``candidates``.

``find_unregistered`` and ``register_tensors`` read the same entries of a module's ``__dict__``:
tensors and list, tuple and dict attributes, less nn.Module's internal attributes, autoreg's own
``_autoreg_*`` keys, names an autoreg class declares ``autoreg.Plain``, and the tensors a forward
pre-hook of prune, weight_norm or spectral_norm recomputes at every call. Of those, what an
autoreg module carries moves with it (``carried_by_autoreg``), and a per-device cache moves with
nothing left behind when its module's class empties it in ``_apply`` (``is_device_cache``,
``overrides_apply``).
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import nn

from ._carry import carried
from ._declarations import Declaration
from ._facts import recomputed_names
from ._mixin import AutoRegisterMixin
from ._state import MODULE_INTERNALS
from ._walk import CONTAINERS

__all__ = ["candidates", "carried_by_autoreg", "is_device_cache", "overrides_apply"]


def candidates(module: nn.Module) -> Iterator[tuple[str, object]]:
    """The ``__dict__`` entries of ``module`` that hold, or may hold, tensors ``.to()`` ignores."""
    declarations: dict[str, Declaration] = (
        type(module).__autoreg__.declarations if isinstance(module, AutoRegisterMixin) else {}
    )
    recomputed = recomputed_names(module._forward_pre_hooks)
    for name, value in list(module.__dict__.items()):
        if not isinstance(value, (torch.Tensor, *CONTAINERS)):
            continue
        if name in MODULE_INTERNALS or name.startswith("_autoreg_") or name in recomputed:
            continue
        if declarations.get(name) is Declaration.PLAIN:
            continue
        yield name, value


def carried_by_autoreg(module: nn.Module, name: str, value: object) -> bool:
    """Whether ``module.name`` holds ``value`` that an autoreg module's ``.to()`` converts: the one
    place the audits ask autoreg's core what it carries.

    Only instances of autoreg classes carry: an instance unpickled after its class went back to
    ``nn.Module`` keeps autoreg's keys in its ``__dict__``, but nothing converts its tensors.
    """
    return isinstance(module, AutoRegisterMixin) and carried(module, name)


def is_device_cache(value: object) -> bool:
    """Whether ``value`` is a non-empty dict keyed by device names, as ``str(tensor.device)``."""
    return isinstance(value, dict) and bool(value) and all(map(_is_device_name, value))


def _is_device_name(key: object) -> bool:
    if not isinstance(key, str):
        return False
    try:
        return str(torch.device(key)) == key
    except (RuntimeError, TypeError, ValueError):
        return False


def overrides_apply(cls: type) -> bool:
    """Whether a class of ``cls.__mro__`` outside torch and autoreg defines ``_apply``."""
    return any(
        "_apply" in vars(klass) and klass.__module__.partition(".")[0] not in ("torch", "autoreg")
        for klass in cls.__mro__
    )
