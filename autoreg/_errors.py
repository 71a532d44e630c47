"""The library's one exception family, its warning, and the long messages they carry.

Every message names ``Class.attribute``, describes the offending value and shows the fix. The
messages are module-level templates so that the whole voice of the library can be read in one place
and asserted whole by the tests.
"""

from __future__ import annotations

from typing import Any, Final

import torch

__all__ = [
    "AutoRegisterError",
    "AutoRegisterWarning",
    "BufferKeyError",
    "BufferTypeError",
    "ClassDefinitionError",
    "ConfigurationError",
    "ExportError",
    "NotAModuleError",
    "UnregisteredTensorError",
    "describe",
]


class AutoRegisterError(Exception):
    """Base class of every error raised by autoreg."""

    __module__ = "autoreg"


class UnregisteredTensorError(AutoRegisterError, TypeError):
    """A strict autoreg module was assigned a tensor that it would otherwise register or carry."""

    __module__ = "autoreg"


class ExportError(AutoRegisterError, RuntimeError):
    """Non-strict ``torch.export`` traced a forward that assigns a tensor to a new name."""

    __module__ = "autoreg"


class ClassDefinitionError(AutoRegisterError, TypeError):
    """An autoreg class is defined wrongly: bad bases or bad class keywords."""

    __module__ = "autoreg"


class ConfigurationError(AutoRegisterError, ValueError):
    """The ``AUTOREG_MODE`` environment variable holds a value autoreg does not know."""

    __module__ = "autoreg"


class NotAModuleError(AutoRegisterError, TypeError):
    """``find_unregistered`` or ``register_tensors`` was given something other than a module."""

    __module__ = "autoreg"


class BufferTypeError(AutoRegisterError, TypeError):
    """A ``BufferList`` / ``BufferDict`` was given a value it cannot hold, or a non-string key."""

    __module__ = "autoreg"


class BufferKeyError(AutoRegisterError, KeyError):
    """A ``BufferDict`` key cannot name a buffer."""

    __module__ = "autoreg"

    def __str__(self) -> str:  # KeyError would show the repr of the message
        return str(self.args[0])


class AutoRegisterWarning(UserWarning):
    """autoreg made a decision about a tensor that the code does not state explicitly."""

    __module__ = "autoreg"


def describe(value: Any) -> str:
    """``Tensor(shape=(4, 4), dtype=torch.float32, device='cpu')``; a non-tensor's type name."""
    if isinstance(value, torch.Tensor):
        grad = ", requires_grad=True" if value.requires_grad else ""
        return (
            f"{type(value).__name__}(shape={tuple(value.shape)}, dtype={value.dtype}, "
            f"device='{value.device}'{grad})"
        )
    return f"'{torch.typename(value)}'"


# --- Class definition (class keywords) ----------------------------------------------------------

MIXIN_AFTER_MODULE: Final = """\
class {cls} lists nn.Module before autoreg.AutoRegisterMixin in its bases, so \
nn.Module.__setattr__ runs first and the mixin never sees an assignment.
Put the mixin first:
    class {cls}(autoreg.AutoRegisterMixin, {bases}): ..."""

MIXIN_WITHOUT_MODULE: Final = """\
class {cls} uses autoreg.AutoRegisterMixin but is not an nn.Module subclass.
Mix it into a module class, before it:
    class {cls}(autoreg.AutoRegisterMixin, nn.Module): ...
or subclass autoreg.Module, which is exactly that."""

UNKNOWN_KEYWORD: Final = """\
class {cls} got the unknown class keyword(s) {names}.
autoreg's class keywords are persistent=, strict= and warn=, each True or False:
    class {cls}(autoreg.Module, persistent=True): ..."""

KEYWORD_NOT_BOOL: Final = """\
class {cls}: the class keyword {keyword}= must be True or False, got {value!r}."""

STRICT_AND_WARN: Final = """\
class {cls} sets both strict=True and warn=True; choose one.
strict=True raises on every undeclared tensor; warn=True registers it and warns once."""

BAD_MODE: Final = """\
AUTOREG_MODE={value!r} is not a mode autoreg knows.
Valid values: {valid}. Leave it unset (or empty) to use each class's own keywords; \
the default is 'register'."""

# --- Assignments (rows 6, 7, 8, 10 and 11; strict and warn mode) ----------------------------------

_FIXES: Final = """\
Make it explicit, whichever fits (annotations go in the class body):
    {default:<29}{name}: torch.Tensor
    a buffer in state_dict:      {name}: autoreg.Persistent
    a buffer not in state_dict:  {name}: autoreg.NonPersistent
    registered by hand:          self.{name} = nn.Buffer(value, persistent=False)
    a weight to train:           self.{name} = nn.Parameter(value)
    never registered or moved:   {name}: autoreg.Plain"""

STRICT_UNDECLARED: Final = (
    """\
cannot assign {value} to {cls}.{name}: {cls} is strict ({why}) and '{name}' is not declared.
Without strict, autoreg would {action}.
"""
    + _FIXES
)

WARN_UNDECLARED: Final = (
    """\
{cls}.{name} = {value} was {action_past}.
"""
    + _FIXES
)

GRAD_LEAF: Final = """\
{cls}.{name} = {value} is a leaf tensor that requires grad: it stays a plain attribute, as in \
nn.Module, so .to() and the optimizer never see it.
If it is a weight to train, wrap it: self.{name} = nn.Parameter(value); if it is not, detach it \
or create it with requires_grad=False; to keep it as it is, annotate {name}: autoreg.Plain."""

NO_BUFFER_SLOT: Final = """\
{value} assigned to {cls}.{name} cannot become a buffer: '{name}' {where}, so .to() will leave \
it behind.
Rename the attribute, or move the class-level value into __init__; to keep it as it is, annotate \
{name}: autoreg.Plain."""

STRICT_CONTAINER: Final = """\
cannot assign a {kind} holding {count} unregistered tensor(s) to {cls}.{name}: {cls} is strict \
({why}).
For example {example}. Without strict, autoreg would carry the {kind}: its tensors move with .to() \
but are not in state_dict.
Make it explicit, whichever fits:
    self.{name} = autoreg.BufferList([...])   # or autoreg.BufferDict({{...}}): buffers that move
    self.register_buffer("...", tensor)       # one buffer per tensor
    {name}: autoreg.Plain                     # never moved"""

WARN_CONTAINER: Final = """\
{cls}.{name} is a {kind} holding {count} unregistered tensor(s), e.g. {example}; autoreg carries \
it: its tensors move with .to() but are not in state_dict.
Make it explicit with autoreg.BufferList / autoreg.BufferDict (buffers that move; with \
persistent=True, saved in state_dict), or annotate {name}: autoreg.Plain to keep it where it \
is."""

# --- torch.export --------------------------------------------------------------------------------

NEW_NAME_DURING_EXPORT: Final = """\
cannot {action} {cls}.{name} = {value} while non-strict torch.export traces forward: export \
restores the attributes the module had before tracing, not new ones, so '{name}' would keep a \
fake tensor and the module would compute with it afterwards.
Create '{name}' before exporting, whichever fits:
    self.{name} = torch.zeros(...)   # in __init__: a buffer; export records its updates
    module(example_input)            # run it once: '{name}' then exists and export restores it
or export with torch.export.export(..., strict=True), which leaves the module untouched."""
