"""The library's one exception family and its warning; their messages live in ``_messages``.

Every error derives from ``AutoRegisterError`` and from the builtin a user would catch
(``TypeError``, ``ValueError``, ...). All are importable from ``autoreg`` and named ``autoreg.X``
in tracebacks.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AutoRegisterError",
    "AutoRegisterWarning",
    "BufferKeyError",
    "BufferTypeError",
    "ClassDefinitionError",
    "ConfigurationError",
    "ExportError",
    "ForwardAuditError",
    "NotAModuleError",
    "UnregisteredTensorError",
]


class AutoRegisterError(Exception):
    """Base class of every error raised by autoreg."""


class UnregisteredTensorError(AutoRegisterError, TypeError):
    """A strict autoreg module was assigned a tensor that it would otherwise register or carry."""


class ExportError(AutoRegisterError, RuntimeError):
    """Non-strict ``torch.export`` traced a forward that assigns a tensor to a new name."""


class ClassDefinitionError(AutoRegisterError, TypeError):
    """An autoreg class is defined wrongly: bad bases or bad class keywords."""


class ConfigurationError(AutoRegisterError, ValueError):
    """The ``AUTOREG_MODE`` environment variable holds a value autoreg does not know."""


class NotAModuleError(AutoRegisterError, TypeError):
    """An audit or ``register_tensors`` was given something other than a module instance."""


class BufferTypeError(AutoRegisterError, TypeError):
    """A ``BufferList`` / ``BufferDict`` was given a value it cannot hold, or a non-string key."""


class BufferKeyError(AutoRegisterError, KeyError):
    """A ``BufferDict`` key cannot name a buffer."""

    def __str__(self) -> str:  # KeyError would show the repr of the message
        return str(self.args[0])


class ForwardAuditError(AutoRegisterError, RuntimeError):
    """The forward pass could not run to its end on the stand-in device; ``findings`` so far."""

    def __init__(self, message: str, findings: list[Any]) -> None:
        super().__init__(message)
        self.findings = findings


class AutoRegisterWarning(UserWarning):
    """autoreg made a decision about a tensor that the code does not state explicitly."""


for _public in (
    AutoRegisterError,
    UnregisteredTensorError,
    ExportError,
    ClassDefinitionError,
    ConfigurationError,
    NotAModuleError,
    BufferTypeError,
    BufferKeyError,
    ForwardAuditError,
    AutoRegisterWarning,
):
    _public.__module__ = "autoreg"  # tracebacks say autoreg.X, where users import it from
