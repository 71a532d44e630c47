"""autoreg: tensors assigned to a module move with it.

Subclass ``autoreg.Module`` instead of ``torch.nn.Module`` (or put ``autoreg.AutoRegisterMixin``
first in the bases of any ``nn.Module`` subclass) and ``.to()``, ``.cuda()`` and ``.half()`` move
every tensor the module holds.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:  # what type checkers and the API reference read
    from ._audit import Finding, find_unregistered
    from ._containers import BufferDict, BufferList
    from ._declarations import Carried, NonPersistent, Persistent, Plain
    from ._errors import (
        AutoRegisterError,
        AutoRegisterWarning,
        BufferKeyError,
        BufferTypeError,
        ClassDefinitionError,
        ConfigurationError,
        ExportError,
        ForwardAuditError,
        NotAModuleError,
        UnregisteredTensorError,
    )
    from ._forward_audit import ForwardFinding, audit_forward
    from ._mixin import AutoRegisterMixin, Module
    from ._register import register_tensors
    from ._reset import reset_buffers

__version__ = "0.1.0"

__all__ = [
    "AutoRegisterError",
    "AutoRegisterMixin",
    "AutoRegisterWarning",
    "BufferDict",
    "BufferKeyError",
    "BufferList",
    "BufferTypeError",
    "Carried",
    "ClassDefinitionError",
    "ConfigurationError",
    "ExportError",
    "Finding",
    "ForwardAuditError",
    "ForwardFinding",
    "Module",
    "NonPersistent",
    "NotAModuleError",
    "Persistent",
    "Plain",
    "UnregisteredTensorError",
    "audit_forward",
    "find_unregistered",
    "register_tensors",
    "reset_buffers",
]

# Each public name, and the module that defines it: imported when first asked for (PEP 562),
# so that `import autoreg` imports no torch (the command line's --help answers at once).
_EXPORTS: Final = {
    "AutoRegisterError": "_errors",
    "AutoRegisterMixin": "_mixin",
    "AutoRegisterWarning": "_errors",
    "BufferDict": "_containers",
    "BufferKeyError": "_errors",
    "BufferList": "_containers",
    "BufferTypeError": "_errors",
    "Carried": "_declarations",
    "ClassDefinitionError": "_errors",
    "ConfigurationError": "_errors",
    "ExportError": "_errors",
    "Finding": "_audit",
    "ForwardAuditError": "_errors",
    "ForwardFinding": "_forward_audit",
    "Module": "_mixin",
    "NonPersistent": "_declarations",
    "NotAModuleError": "_errors",
    "Persistent": "_declarations",
    "Plain": "_declarations",
    "UnregisteredTensorError": "_errors",
    "audit_forward": "_forward_audit",
    "find_unregistered": "_audit",
    "register_tensors": "_register",
    "reset_buffers": "_reset",
}


def __getattr__(name: str) -> Any:
    """A public name, imported from its module the first time it is asked for."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'autoreg' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
