"""The export guard: non-strict ``torch.export`` must not leave fake tensors on a real module.

Non-strict export runs ``forward`` on fake tensors, then restores the attributes the module had
before tracing - not new ones: a tensor or container first assigned while it traces would stay on
the module, fake, and the module would compute with it afterwards. autoreg refuses that assignment
with ``ExportError`` (rows 8 to 11); ``nn.Module`` has the same leak, silently.

Detection needs ``torch.compiler.is_exporting`` (torch >= 2.7); on older torch nothing is detected.
Strict export traces with dynamo and leaves the module untouched: it is never refused.

A name deleted before the assignment (``del self.h; self.h = new``) is new to autoreg, whether the
module held it when export began (export restores it) or not (the fake would stay): autoreg cannot
tell the two, refuses both, and says to assign without deleting.
"""

from __future__ import annotations

import torch
from torch import nn

from ._errors import ExportError
from ._messages.contract import DELETED_NAME_DURING_EXPORT, NEW_NAME_DURING_EXPORT
from ._messages.describe import describe
from ._state import CARRIED, role_key
from ._walk import iter_tensors

__all__ = ["refuse_while_exporting"]

_is_exporting = getattr(torch.compiler, "is_exporting", None)


def refuse_while_exporting(module: nn.Module, name: str, value: object, action: str) -> None:
    """Raise ExportError if non-strict ``torch.export`` traces the first assignment of ``name``."""
    if _is_exporting is None or not _is_exporting() or torch.compiler.is_dynamo_compiling():
        return
    if isinstance(value, torch.Tensor):
        what = describe(value)
    else:
        first = next(iter_tensors(value), None)
        if first is None:
            return  # a container without tensors: nothing fake stays behind
        path, tensor = first
        what = f"{type(value).__name__} holding {name}{path} = {describe(tensor)}"
    # A name deleted keeps its key: None, or CARRIED for a name it carried (never the role of a
    # name it does not hold, which is all this is called for).
    deleted = module.__dict__.get(role_key(name), False) in (None, CARRIED)
    message = DELETED_NAME_DURING_EXPORT if deleted else NEW_NAME_DURING_EXPORT
    cls = type(module).__name__
    raise ExportError(message.format(action=action, cls=cls, name=name, value=what))
