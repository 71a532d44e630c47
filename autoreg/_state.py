"""What autoreg keeps in an instance's ``__dict__``: three keys, and the roles of names.

``OWNED`` maps a name to its role: ``BUFFER`` for a buffer autoreg registered under an undeclared
name (row 2 applies to it), ``FRAMEWORK`` or ``MODEL`` for whose code first assigned the name, kept
only on classes with a framework base (row 4). Carried values have no role: a carried value is a
plain attribute that ``.to()`` converts (``_carry``). ``CONSTRUCTING`` is present while one of the
instance's construction methods runs, ``PENDING`` while tensors assigned before
``nn.Module.__init__`` wait to be registered; copies and pickles never hold either.
"""

from __future__ import annotations

from typing import Final

from torch import nn

__all__ = [
    "BUFFER",
    "CONSTRUCTING",
    "FRAMEWORK",
    "MODEL",
    "MODULE_INTERNALS",
    "OWNED",
    "PASS",
    "PENDING",
]

OWNED: Final = "_autoreg_owned"
CONSTRUCTING: Final = "_autoreg_constructing"
PENDING: Final = "_autoreg_pending"  # {name: persistent}

# Roles. Strings, so that pickles of every autoreg version load.
BUFFER: Final = "buffer"
FRAMEWORK: Final = "framework"
MODEL: Final = "model"
PASS: Final = "pass"  # noqa: S105 - a frame that does not tell whose an assignment is (row 4)

MODULE_INTERNALS: Final = frozenset(vars(nn.Module())) | {"_is_replica"}
