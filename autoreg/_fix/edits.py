"""The edits ``plan`` hands to ``codemod``, and the hand edits listed where ``fix`` would guess.

An ``Edit`` names the class it changes (a ``ClassInfo``) and, but for ``MakeAutoreg``, the line
of the store it rewrites. A ``HandEdit`` is what ``plan`` or ``codemod`` lists instead: where,
why, and what to write. Plain data: no torch, no LibCST, no file access.
"""

from __future__ import annotations

import dataclasses
from typing import Literal, TypeAlias

from .strays import ClassInfo

__all__ = [
    "DeclareBuffer",
    "DeclarePlain",
    "Edit",
    "HandEdit",
    "MakeAutoreg",
    "RegisterBuffer",
    "WrapModules",
]


@dataclasses.dataclass(frozen=True)
class MakeAutoreg:
    """Base style: ``cls`` becomes an autoreg class. ``replace`` is the index of its
    ``nn.Module`` base (which becomes ``autoreg.Module``); None puts ``autoreg.AutoRegisterMixin``
    first."""

    cls: ClassInfo
    replace: int | None


@dataclasses.dataclass(frozen=True)
class RegisterBuffer:
    """Buffer style: every store of ``attribute`` in the methods of ``cls`` (whole source, all
    branches). A store in a method that runs while the module is built becomes
    ``self.register_buffer("attribute", EXPR, persistent=False)`` (unless ``rewrite`` is False:
    a ``DeclareBuffer`` registers the name); every other store must store what a buffer takes,
    or it is listed.

    ``lineno``: a store that ran during construction (0: none did). ``seen``: the line and kind
    (as ``Site.value``) of each store that ran. ``built``: the methods that stored it during
    construction.
    """

    cls: ClassInfo
    attribute: str
    lineno: int
    seen: tuple[tuple[int, str], ...] = ()
    built: tuple[str, ...] = ()
    rewrite: bool = True


@dataclasses.dataclass(frozen=True)
class DeclareBuffer:
    """Buffer style: ``attribute``, first stored at run time (at ``lineno``), is registered as
    ``None`` in ``cls.__init__``."""

    cls: ClassInfo
    attribute: str
    lineno: int


@dataclasses.dataclass(frozen=True)
class WrapModules:
    """Buffer style: the container of modules stored at ``lineno`` becomes ``nn.{container}``."""

    cls: ClassInfo
    attribute: str
    lineno: int
    container: Literal["ModuleList", "ModuleDict"]


@dataclasses.dataclass(frozen=True)
class DeclarePlain:
    """Base style: ``attribute: autoreg.Plain`` in the body of ``cls``, if ``cls`` becomes an
    autoreg class in this rewrite: autoreg then leaves the name a plain attribute (a complex
    tensor that the core would cast to a real dtype, an alias that it would convert apart from
    the tensor it follows); ``comment`` says why, on that line."""

    cls: ClassInfo
    attribute: str
    comment: str


Edit: TypeAlias = MakeAutoreg | RegisterBuffer | DeclareBuffer | WrapModules | DeclarePlain


@dataclasses.dataclass(frozen=True)
class HandEdit:
    """What ``fix`` lists instead of guessing: at ``filename:lineno``, ``name`` (``Class.attr``),
    why it is not rewritten, and the edit to make."""

    filename: str
    lineno: int
    name: str
    reason: str
    edit: str
