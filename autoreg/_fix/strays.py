"""The records ``collect`` hands to ``plan``: what leaves tensors behind, and where it was stored.

One ``Stray`` per class and attribute, with what it holds (``Kind``), the classes it concerns
(``ClassInfo``: where each is defined, what its bases are) and where it was stored (``Site``, as
``sites`` records it). Plain data: no torch, no LibCST, no file access.
"""

from __future__ import annotations

import dataclasses
import enum

__all__ = ["ClassInfo", "Kind", "Site", "Stray"]


class Kind(enum.Enum):
    """What a stray holds, as far as fixing it goes."""

    TENSOR = "a tensor"  # a plain tensor attribute: autoreg moves it; so does a buffer
    TENSORS = "a container of tensors"  # autoreg carries it; plain PyTorch has no buffer container
    MODULES = "a container of modules"  # nn.ModuleList / nn.ModuleDict, in either style
    HAND = "a tensor only its author can place"  # a weight, a class-level name, ...: listed


@dataclasses.dataclass(frozen=True)
class Site:
    """Where a value was stored on a module: ``filename:lineno``, in ``function`` (a qualified
    name), during the module's construction or not, what it stored (``"tensor"``,
    ``"parameter"``, ``"module"``, ``"none"``, ``"container"`` or ``"other"``), whether
    ``nn.Module.__init__`` had run on the module by then (a buffer can be registered), and
    whether the store ran inside a base's ``__init__`` that another ``__init__`` called (before
    what that one does after its ``super().__init__()``), and, for a store made by code that is
    not the user's (an installed package's), the user's code that called it (file, line)."""

    filename: str
    lineno: int
    function: str
    construction: bool
    value: str
    initialised: bool = True
    nested: bool = False
    caller: tuple[str, int] | None = None


@dataclasses.dataclass(frozen=True)
class ClassInfo:
    """A class, as the codemod finds it: its file (None without source), its qualified name and
    the lines of its statement; ``bases`` says for each base whether it is ``torch.nn.Module``
    itself (``"module"``), another ``torch.nn`` class (``"torch"``) or anything else;
    ``declared``: the names its own annotations would declare buffers if it used autoreg
    (``_declarations.buffer_declarations``); ``seen``: ``(name, line, value)`` of each store of
    them in its file that the run saw (what ``Site.value`` says it stored); ``module``: whether
    it is an ``nn.Module`` subclass (a plain mixin is not)."""

    qualname: str
    filename: str | None
    lineno: int
    end_lineno: int
    bases: tuple[str, ...]
    declared: tuple[str, ...] = ()  # what its annotations would declare buffers, made autoreg's
    seen: tuple[tuple[str, int, str], ...] = ()  # the stores of those the run saw
    module: bool = True  # an nn.Module subclass (else a plain mixin: no buffer goes in it)
    shown: str = ""  # its __name__, where it is not its qualname's last part (a decorator's class)

    @property
    def short(self) -> str:
        """The class's name as the audit shows it: its ``__name__`` (a class decorator that
        returns a subclass under the decorated class's name shows that name)."""
        return self.shown or self.qualname.rpartition(".")[2]

    def holds(self, site: Site) -> bool:
        return site.filename == self.filename and self.lineno <= site.lineno <= self.end_lineno


@dataclasses.dataclass(frozen=True)
class Stray:
    """One attribute of one class that leaves tensors behind.

    ``classes``: the class of the module that holds it, then its bases (torch's and autoreg's
    left out). ``sites``: where it was stored. ``container``: ``"list"``, ``"tuple"`` or
    ``"dict"`` for the container kinds, and whether it can become ``nn.ModuleList`` /
    ``nn.ModuleDict`` as it is (``wrappable``). ``reason`` and ``edit``: for ``Kind.HAND``, why
    and what to write. ``complex``: it holds a complex tensor, which ``nn.Module``'s
    ``.to(a real dtype)`` casts to that dtype once it is a buffer. ``answers``: the class of the
    module's MRO whose ``__getattr__`` (not nn.Module's) may answer for the attribute, which
    ``register_buffer`` then refuses ("attribute already exists"; a config or wrapped-module
    fallback). ``subclass``: a subclass in the user's code, none of the run's classes, whose own
    methods store the attribute too (what it stores there the run never saw): loaded
    (``collect``), or in the source under the working directory (``project``, buffer style).
    ``setter``: what a store runs that ``register_buffer`` skips (``FIX_HAND_SETTER``'s words):
    a data descriptor of the name or a ``__setattr__`` of the user's, in a class of the MRO or a
    subclass's; the buffer style lists the name (``project``). ``hidden``: a subclass of the
    user's, none of the run's classes, that defines the name on its class (a value, a method, a
    ``cached_property``), and how: ``hasattr()`` finds it there, so ``register_buffer`` raises
    (loaded: ``collect``; in the source: ``project``); the buffer style lists the name. A
    subclass's ``__getattr__`` is ``answers``. ``probed``: such a subclass (in the source:
    ``project``) that asks whether the name exists (``hasattr(self, "last")``): registered as
    None in ``__init__``, it would always exist; the buffer style lists a name it would declare.
    """

    classes: tuple[ClassInfo, ...]
    attribute: str
    kind: Kind
    sites: tuple[Site, ...] = ()
    container: str = ""
    wrappable: bool = False
    reason: str = ""
    edit: str = ""
    complex: bool = False
    plain: str = ""  # base style: kept a plain attribute if its class becomes autoreg's; why
    answers: str = ""  # the class whose __getattr__ may answer for the name (not nn.Module's)
    subclass: str = ""  # a subclass of the user's, outside the run, that stores it too
    setter: str = ""  # what runs on self.<attribute> = ... and not on register_buffer
    # a subclass of the user's that defines the name on its class, and how (FIX_CLASS_LEVEL)
    hidden: tuple[str, str] | None = None
    probed: str = ""  # a subclass of the user's, outside the run, that asks whether it exists

    @property
    def name(self) -> str:
        return f"{self.classes[0].short}.{self.attribute}"
