"""Classes annotated with real objects (no ``from __future__ import annotations`` here)."""

from typing import ClassVar, Optional

import torch

import autoreg


class Eager(autoreg.Module):
    mask: torch.Tensor
    maybe: Optional[torch.Tensor]  # noqa: UP045 - the spelling under test
    union: torch.Tensor | None
    stats: autoreg.Persistent
    scratch: autoreg.NonPersistent
    pinned: autoreg.Plain
    counter: ClassVar[int] = 0
    forward_ref: "autoreg.Persistent"
    later: "LaterAlias"


LaterAlias = autoreg.Persistent  # defined after the class that refers to it
