"""autoreg: tensors assigned to a module move with it.

Subclass ``autoreg.Module`` instead of ``torch.nn.Module`` (or put ``autoreg.AutoRegisterMixin``
first in the bases of any ``nn.Module`` subclass) and ``.to()``, ``.cuda()`` and ``.half()`` move
every tensor the module holds.
"""

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
