"""Row 4: whose is an assignment, the framework base's or the model's?

Judged by the code that makes it: walking out from the assignment, the nearest frame that runs a
method of one of the instance's own classes decides. A method of a base class that does not use
autoreg (``LightningModule``, ``Metric``, the ``torch.nn`` class the mixin is put before, and the
classes of their MROs) makes the assignment the framework's; a method of any other class of the
instance (the model's own) makes it the model's. Frames that tell nothing are passed over:
autoreg's own, any ``__setattr__`` (a class that overrides it to log or validate, then calls
``super().__setattr__``), nn.Module's methods, and functions that are no method of the instance's
classes (a framework's helper module, a decorator's shared wrapper, a lambda). No such frame at all
(code outside the module assigns): the model's.

A frame's code is matched by where it lives - its module and qualified name - never by code object
identity, so decorators whose wrapper code object is shared by every function they wrap
(``torch.no_grad()``, any ``functools.wraps`` decorator) cannot mix a model's method up with a
framework's. Each code object's verdict is kept in the class record: a walk costs a dictionary
lookup per frame, and the first assignment of each name decides once per instance.
"""

from __future__ import annotations

import types
from typing import Final

from ._record import ClassRecord
from ._state import MODEL, PASS

__all__ = ["attribute"]

_OWN_PACKAGE: Final = __name__.partition(".")[0]


def attribute(record: ClassRecord, frame: types.FrameType | None) -> str:
    """``FRAMEWORK`` or ``MODEL``: whose is the assignment made in ``frame`` (and its callers)."""
    verdicts = record.verdicts
    while frame is not None:
        code = frame.f_code
        known = verdicts.get(id(code))
        if known is None:
            verdict = _judge(record, code, frame.f_globals.get("__name__", ""))
            verdicts[id(code)] = (code, verdict)
        else:
            verdict = known[1]
        if verdict != PASS:
            return verdict
        frame = frame.f_back
    return MODEL


def _judge(record: ClassRecord, code: types.CodeType, module: object) -> str:
    """What a frame running ``code``, defined in ``module``, tells about an assignment."""
    if not isinstance(module, str) or module.partition(".")[0] == _OWN_PACKAGE:
        return PASS
    if code.co_name == "__setattr__":
        return PASS
    # The longest prefix of the qualified name that names a class of the MRO, defined in the
    # module the code runs in: 'Model.__init__.<locals>.helper' is Model's.
    parts = code.co_qualname.split(".")
    for end in range(len(parts) - 1, 0, -1):
        verdict = record.judges.get((module, ".".join(parts[:end])))
        if verdict is not None:
            return verdict
    return PASS
