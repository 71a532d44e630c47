"""Modes and class keywords: validated once, when a class is created.

A class's mode comes from its keywords (``strict=``, ``warn=``), inherited from its autoreg bases;
the ``AUTOREG_MODE`` environment variable, when set, overrides it for every autoreg class created
afterwards (library authors run their CI with ``AUTOREG_MODE=strict``).
"""

from __future__ import annotations

import enum
import os

from ._errors import ClassDefinitionError, ConfigurationError
from ._messages.contract import BAD_MODE, KEYWORD_NOT_BOOL

__all__ = ["ENV_VAR", "Mode", "check_bool", "environment_mode"]

ENV_VAR = "AUTOREG_MODE"


class Mode(enum.Enum):
    """What an autoreg class does with a tensor whose role its code does not state."""

    REGISTER = "register"  # register or carry it (the default)
    WARN = "warn"  # register or carry it, and warn once per class and name
    STRICT = "strict"  # raise UnregisteredTensorError


def environment_mode() -> Mode | None:
    """The mode ``AUTOREG_MODE`` forces on every class, or None when it is unset or empty.

    Case and surrounding spaces do not count (``STRICT``, ``" strict"``): a shell or a CI file
    writes the value, and what it means is not in doubt.
    """
    # Read at every class created (torch's parametrizations create one per instance): 0.5 us
    # when unset, about 1 % of a parametrization's cost. Reading os.environ's private dict was
    # 0.07 us, and is not done: nothing depends on an unpromised detail of the standard library.
    value = os.environ.get(ENV_VAR, "")
    if not value.strip():
        return None
    try:
        return Mode(value.strip().lower())
    except ValueError:
        valid = ", ".join(repr(mode.value) for mode in Mode)
        raise ConfigurationError(BAD_MODE.format(value=value, valid=valid)) from None


def check_bool(cls_name: str, keyword: str, value: object) -> bool | None:
    """Return a class keyword's value after checking that it is True, False or absent (None)."""
    if value is None or isinstance(value, bool):
        return value
    raise ClassDefinitionError(KEYWORD_NOT_BOOL.format(cls=cls_name, keyword=keyword, value=value))
