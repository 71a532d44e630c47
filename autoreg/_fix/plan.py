"""From strays to a plan: the edits of each file, and the hand edits listed instead of guessing.

Pure: no torch, no LibCST, no file access. ``collect`` builds the ``Stray`` records (``strays``)
from a built model; ``codemod`` carries out the edits (``edits``).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Sequence
from typing import Literal, TypeAlias

from .._messages.fix import (
    FIX_HAND_COMPLEX,
    FIX_HAND_COMPLEX_EDIT,
    FIX_HAND_CONTAINER,
    FIX_HAND_CONTAINER_EDIT,
    FIX_HAND_DECLARE_EDIT,
    FIX_HAND_GENERATED,
    FIX_HAND_GENERATED_EDIT,
    FIX_HAND_GETATTR,
    FIX_HAND_GETATTR_EDIT,
    FIX_HAND_HELPER,
    FIX_HAND_HELPER_EARLY_EDIT,
    FIX_HAND_HELPER_EDIT,
    FIX_HAND_LIBRARY,
    FIX_HAND_LINKED,
    FIX_HAND_MODULES_AS_IS,
    FIX_HAND_MODULES_BASE,
    FIX_HAND_MODULES_EDIT,
    FIX_HAND_NO_SOURCE,
    FIX_HAND_NO_SOURCE_EDIT,
    FIX_HAND_NOT_EDITABLE,
    FIX_HAND_NOT_EDITABLE_EDIT,
    FIX_HAND_PLAIN_MIXIN,
    FIX_HAND_PLAIN_MIXIN_EDIT,
    FIX_HAND_PROBED,
    FIX_HAND_STORED_BY_PACKAGE,
    FIX_HAND_STORED_BY_PACKAGE_EDIT,
    FIX_HAND_SUBCLASS,
    FIX_HAND_SUBCLASS_EDIT,
    FIX_HAND_SUBCLASS_HIDES,
    FIX_HAND_SUBCLASS_HIDES_EDIT,
    FIX_HAND_UNSEEN,
    FIX_HAND_UNSEEN_EDIT,
    PLAIN_COMMENT,
)
from .edits import (
    DeclareBuffer,
    DeclarePlain,
    Edit,
    HandEdit,
    MakeAutoreg,
    RegisterBuffer,
    WrapModules,
)
from .strays import ClassInfo, Kind, Site, Stray

__all__ = ["Plan", "Style", "make_plan"]

Style: TypeAlias = Literal["base", "buffer"]


@dataclasses.dataclass
class Plan:
    """The edits of each file (in the order found), and the hand edits."""

    edits: dict[str, list[Edit]] = dataclasses.field(default_factory=dict)
    hand: list[HandEdit] = dataclasses.field(default_factory=list)

    def add(self, filename: str, edit: Edit) -> None:
        edits = self.edits.setdefault(filename, [])
        if edit not in edits:
            edits.append(edit)

    def list_hand(self, hand: HandEdit) -> None:
        if hand not in self.hand:
            self.hand.append(hand)


def make_plan(
    strays: Iterable[Stray],
    style: Style,
    root: str,
    libraries: Sequence[str] = (),
    keeps_complex: bool = False,
) -> Plan:
    """The plan for ``strays`` in ``style``: only files under ``root`` and under none of
    ``libraries`` (site-packages, the standard library) are edited. ``keeps_complex``: whether
    autoreg keeps a complex tensor complex under ``.to(a real dtype)`` (``nn.Module`` does not:
    the buffer style never registers one)."""
    plan = Plan()
    strays = list(strays)
    for stray in strays:
        if stray.kind is Kind.HAND:
            _hand(plan, stray, stray.reason, stray.edit)
            if style == "base" and stray.plain:  # if its class becomes autoreg's: kept plain
                _keep_plain(plan, stray, stray.plain)
        elif stray.sites and all(site.caller is not None for site in stray.sites):
            _stored_by_package(plan, stray)
        elif stray.complex and (style == "buffer" or not keeps_complex or _declared(stray)):
            # A declared name is a buffer on autoreg (row 9), cast to a real dtype as nn.Module
            # casts one: only an undeclared one is carried or registered complex (row 10)
            edit = FIX_HAND_COMPLEX_EDIT.format(attribute=stray.attribute)
            _hand(plan, stray, FIX_HAND_COMPLEX, edit)
            if style == "base":  # if its class becomes autoreg's for another name: kept plain
                _keep_plain(plan, stray, PLAIN_COMMENT)
        elif style == "base":
            _plan_base(plan, stray, root, libraries)
        else:
            _plan_buffer(plan, stray, root, libraries)
    if style == "base":
        _through_bases(plan, strays)
    return plan


def _declared(stray: Stray) -> bool:
    """Whether an annotation of a class of ``stray`` (``freqs_cis: torch.Tensor``, for
    TorchScript) would declare its name a buffer once that class is autoreg's."""
    return any(stray.attribute in cls.declared for cls in stray.classes)


def _through_bases(plan: Plan, strays: Iterable[Stray]) -> None:
    """Drop the ``MakeAutoreg`` of a class whose base is made autoreg's too: it is autoreg's
    through that base (and the mixin first in its own bases, after a base that has it, is an
    order Python refuses). Its bases are the classes after it in a stray's ``classes``."""
    made = {e.cls for edits in plan.edits.values() for e in edits if isinstance(e, MakeAutoreg)}
    bases: dict[ClassInfo, set[ClassInfo]] = {}
    for stray in strays:
        for index, cls in enumerate(stray.classes):
            bases.setdefault(cls, set()).update(stray.classes[index + 1 :])
    for filename, edits in plan.edits.items():
        plan.edits[filename] = [
            e for e in edits if not (isinstance(e, MakeAutoreg) and bases.get(e.cls, set()) & made)
        ]


def _plan_base(plan: Plan, stray: Stray, root: str, libraries: Sequence[str]) -> None:
    """``autoreg.Module`` (or the mixin) for the class whose code stores it: autoreg then
    registers or carries it, wherever and however it is stored."""
    if stray.kind is Kind.MODULES:
        reason = FIX_HAND_MODULES_BASE.format(container=stray.container)
        _hand(plan, stray, reason, _modules_edit(stray))
        return
    cls = _storing_class(stray)
    if not cls.module:  # a plain mixin: the module class, whose construction runs its store
        cls = stray.classes[0]
    if _editable(plan, stray, cls, root, libraries):
        assert cls.filename is not None  # _editable
        torch_bases = [kind for kind in cls.bases if kind != "other"]
        replace = cls.bases.index("module") if torch_bases == ["module"] else None
        plan.add(cls.filename, MakeAutoreg(cls, replace))


def _keep_plain(plan: Plan, stray: Stray, comment: str) -> None:
    """``attribute: autoreg.Plain  # comment`` in the class that stores ``stray``, if it becomes
    autoreg's."""
    cls = _storing_class(stray)
    if cls.filename is not None:
        plan.add(cls.filename, DeclarePlain(cls, stray.attribute, comment))


def _storing_class(stray: Stray) -> ClassInfo:
    """The class whose code stores ``stray`` (code outside its classes, a helper or setattr
    from outside, leaves the holder's class)."""
    return next(
        (c for site in stray.sites for c in stray.classes if c.holds(site)), stray.classes[0]
    )


def _plan_buffer(plan: Plan, stray: Stray, root: str, libraries: Sequence[str]) -> None:
    """``register_buffer`` where construction stores it, or as None in ``__init__`` when it is
    first stored at run time; ``nn.ModuleList`` / ``nn.ModuleDict`` for modules."""
    attribute = stray.attribute
    built = [site for site in stray.sites if site.construction]
    mixin = _storing_class(stray)
    if not mixin.module:  # a plain mixin: classes that are no modules may use its code too
        holder = stray.classes[0].short
        name = mixin.short
        reason = FIX_HAND_PLAIN_MIXIN.format(mixin=name)
        _hand(plan, stray, reason, FIX_HAND_PLAIN_MIXIN_EDIT.format(mixin=name, cls=holder))
        return
    if stray.kind is Kind.TENSORS:
        reason = FIX_HAND_CONTAINER.format(container=stray.container)
        _hand(plan, stray, reason, FIX_HAND_CONTAINER_EDIT.format(attribute=attribute))
    elif stray.kind is Kind.MODULES:
        if not stray.wrappable:
            reason = FIX_HAND_MODULES_AS_IS.format(container=stray.container)
            _hand(plan, stray, reason, _modules_edit(stray))
            return
        container: Literal["ModuleList", "ModuleDict"] = (
            "ModuleDict" if stray.container == "dict" else "ModuleList"
        )
        stores = [site for site in built if site.value == "container"]
        for site, cls in _in_classes(plan, stray, stores, root, libraries):
            plan.add(site.filename, WrapModules(cls, attribute, site.lineno, container))
    else:
        _plan_tensor(plan, stray, root, libraries)


def _plan_tensor(plan: Plan, stray: Stray, root: str, libraries: Sequence[str]) -> None:
    """A tensor attribute, buffer style: every store of it in the source of its classes
    (``RegisterBuffer``); registered as None in ``__init__`` (``DeclareBuffer``) when no method
    of them stores it while the module is built (it is first stored at run time, or by a
    helper outside the classes)."""
    attribute = stray.attribute
    if stray.subclass:  # a store of a subclass's, which the run never saw: a float raises
        reason = FIX_HAND_SUBCLASS.format(subclass=stray.subclass, attribute=attribute)
        _hand(plan, stray, reason, FIX_HAND_SUBCLASS_EDIT.format(attribute=attribute))
        return
    if stray.hidden is not None:  # hasattr() finds it on a subclass's class: register_buffer raises
        subclass, where = stray.hidden
        text = {"subclass": subclass, "attribute": attribute}
        reason = FIX_HAND_SUBCLASS_HIDES.format(where=where, **text)
        _hand(plan, stray, reason, FIX_HAND_SUBCLASS_HIDES_EDIT.format(**text))
        return
    if stray.answers:  # register_buffer would ask hasattr(), which __getattr__ may answer
        reason = FIX_HAND_GETATTR.format(cls=stray.answers, attribute=attribute)
        _hand(
            plan,
            stray,
            reason,
            FIX_HAND_GETATTR_EDIT.format(cls=stray.answers, attribute=attribute),
        )
        return
    inside = [s for s in stray.sites if any(c.holds(s) for c in stray.classes)]
    helpers = [s for s in stray.sites if s not in inside]
    declare = not any(s.construction for s in inside)
    later = [s for s in inside if not s.construction]
    holder = next((c for c in stray.classes if later and c.holds(later[0])), stray.classes[0])
    if declare and stray.probed:  # registered as None, the name a subclass probes would exist
        text = {"cls": holder.qualname, "attribute": attribute}
        reason = FIX_HAND_PROBED.format(cls=f"its subclass {stray.probed}")
        _hand(plan, stray, reason, FIX_HAND_DECLARE_EDIT.format(**text))
        return
    # Code outside the classes that stores it before the rewrite registers it (before
    # nn.Module.__init__, inside a base's __init__, ahead of the declaration right after
    # super().__init__(), or ahead of the first store rewritten): register_buffer would then
    # raise, the name being a plain attribute. Listed, and nothing of it rewritten.
    registered = declare
    early = []
    for site in stray.sites:  # in the order the stores ran
        if site in inside:
            registered = registered or site.construction
        elif site.construction and (not site.initialised or site.nested or not registered):
            early.append(site)
    if early:
        _in_classes(plan, stray, early, root, libraries)
        return
    for site in helpers:  # a helper that stores it once a register_buffer has run: listed
        if site.construction and not declare:
            _in_classes(plan, stray, [site], root, libraries)
    if not inside and not helpers:
        _hand(plan, stray, FIX_HAND_UNSEEN, FIX_HAND_UNSEEN_EDIT.format(attribute=attribute))
        return
    for cls in stray.classes:
        mine = [s for s in inside if cls.holds(s)]
        if not mine and not _quietly_editable(cls, root, libraries):
            continue
        if mine and not _editable(plan, stray, cls, root, libraries):
            continue
        assert cls.filename is not None
        built = [s for s in mine if s.construction]
        seen = tuple(dict.fromkeys((s.lineno, s.value) for s in mine))
        methods = tuple(dict.fromkeys(s.function.rpartition(".")[2] for s in built))
        lineno = built[0].lineno if built else 0
        edit = RegisterBuffer(cls, attribute, lineno, seen, methods, rewrite=not declare)
        plan.add(cls.filename, edit)
    if declare and _editable(plan, stray, holder, root, libraries):
        assert holder.filename is not None
        lineno = later[0].lineno if later else holder.lineno
        plan.add(holder.filename, DeclareBuffer(holder, attribute, lineno))


def _quietly_editable(cls: ClassInfo, root: str, libraries: Sequence[str]) -> bool:
    """Whether ``fix`` may edit the file of ``cls`` (a class no store ran in: not listed)."""
    return (
        cls.filename is not None
        and _under(cls.filename, root)
        and not any(_under(cls.filename, lib) for lib in libraries)
    )


def _in_classes(
    plan: Plan, stray: Stray, sites: Sequence[Site], root: str, libraries: Sequence[str]
) -> list[tuple[Site, ClassInfo]]:
    """Each of ``sites`` with the class of ``stray`` whose code it is in; a site outside them
    (a helper function) or in a file that cannot be edited is listed."""
    if not sites:
        _hand(plan, stray, FIX_HAND_UNSEEN, FIX_HAND_UNSEEN_EDIT.format(attribute=stray.attribute))
        return []
    found = []
    for site in sites:
        cls = next((c for c in stray.classes if c.holds(site)), None)
        if cls is None and os.path.basename(site.filename).startswith("<"):
            # Code without a file: the __init__ a dataclass generates stores its fields
            holder = stray.classes[0]
            where = (holder.filename or site.filename, holder.lineno or site.lineno)
            text = {"cls": holder.qualname, "attribute": stray.attribute}
            hand = HandEdit(
                *where,
                stray.name,
                FIX_HAND_GENERATED.format(**text),
                FIX_HAND_GENERATED_EDIT.format(**text),
            )
            plan.list_hand(hand)
        elif cls is None:
            reason = FIX_HAND_HELPER.format(function=site.function)
            template = FIX_HAND_HELPER_EDIT if site.initialised else FIX_HAND_HELPER_EARLY_EDIT
            edit = template.format(
                cls=stray.classes[0].qualname, attribute=stray.attribute, function=site.function
            )
            plan.list_hand(HandEdit(site.filename, site.lineno, stray.name, reason, edit))
        elif _editable(plan, stray, cls, root, libraries):
            found.append((site, cls))
    return found


def _editable(
    plan: Plan, stray: Stray, cls: ClassInfo, root: str, libraries: Sequence[str]
) -> bool:
    """Whether ``fix`` may edit the file of ``cls``; if not, list ``stray`` with the reason."""
    if cls.filename is None:
        reason = FIX_HAND_NO_SOURCE.format(cls=cls.qualname)
        _hand(plan, stray, reason, FIX_HAND_NO_SOURCE_EDIT.format(cls=cls.qualname))
        return False
    library = next((lib for lib in libraries if _under(cls.filename, lib)), None)
    if library is None and _under(cls.filename, root):
        return True
    path = os.path.realpath(cls.filename)
    linked = not library and path != os.path.abspath(cls.filename)
    reason = (
        FIX_HAND_LIBRARY if library else FIX_HAND_LINKED if linked else FIX_HAND_NOT_EDITABLE
    ).format(cls=cls.qualname, root=root, library=library, path=path)
    plan.list_hand(
        HandEdit(cls.filename, cls.lineno, stray.name, reason, FIX_HAND_NOT_EDITABLE_EDIT)
    )
    return False


def _under(path: str, directory: str) -> bool:
    """Whether ``path`` is under ``directory``, both resolved: a file reached through a
    symbolic link is where the link leads."""
    path, directory = os.path.realpath(path), os.path.realpath(directory)
    return os.path.commonpath([path, directory]) == directory


def _stored_by_package(plan: Plan, stray: Stray) -> None:
    """List ``stray``, which only an installed package's code stores (Lightning's
    ``save_hyperparameters`` keeps a copy of the model's modules), at the user's call of it."""
    site = next((s for s in stray.sites if s.construction), stray.sites[0])
    assert site.caller is not None
    reason = FIX_HAND_STORED_BY_PACKAGE.format(
        holds=stray.kind.value,
        function=site.function,
        where=f"{site.filename}:{site.lineno}",
    )
    plan.list_hand(HandEdit(*site.caller, stray.name, reason, FIX_HAND_STORED_BY_PACKAGE_EDIT))


def _hand(plan: Plan, stray: Stray, reason: str, edit: str) -> None:
    """List ``stray`` at its first store (in construction, if any), or at its class; a store
    that a package's code made (torch's ``RNNBase.__setattr__``) at the user's line that called
    it: never in a file the user does not own."""
    sites = [site for site in stray.sites if site.construction] or list(stray.sites)
    cls = stray.classes[0]
    where = (cls.filename or "", cls.lineno)
    if sites:
        where = sites[0].caller or (sites[0].filename, sites[0].lineno)
    plan.list_hand(HandEdit(*where, stray.name, reason, edit))


def _modules_edit(stray: Stray) -> str:
    container = "ModuleDict" if stray.container == "dict" else "ModuleList"
    return FIX_HAND_MODULES_EDIT.format(attribute=stray.attribute, container=container)
