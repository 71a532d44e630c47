"""autoreg: tensors assigned to a module move with it.

Subclass ``autoreg.Module`` instead of ``torch.nn.Module`` (or put ``autoreg.AutoRegisterMixin``
first in the bases of any ``nn.Module`` subclass) and ``.to()``, ``.cuda()`` and ``.half()`` move
every tensor the module holds.
"""

from ._declarations import NonPersistent, Persistent, Plain
from ._errors import (
    AutoRegisterError,
    AutoRegisterWarning,
    ClassDefinitionError,
    ConfigurationError,
    UnregisteredTensorError,
)
from ._mixin import AutoRegisterMixin, Module

__version__ = "0.1.0"

__all__ = [
    "AutoRegisterError",
    "AutoRegisterMixin",
    "AutoRegisterWarning",
    "ClassDefinitionError",
    "ConfigurationError",
    "Module",
    "NonPersistent",
    "Persistent",
    "Plain",
    "UnregisteredTensorError",
]
