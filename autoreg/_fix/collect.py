"""From the audits' findings on a built model to ``Stray`` records: plain data for ``plan``.

The one step of ``autoreg fix`` that looks at tensors and classes. A finding names a tensor, the
class of the module that holds it and the attribute; here it gets the module itself (found by
walking the model as ``find_unregistered`` does), what the attribute holds (a tensor, a container
of tensors or of modules, a weight that requires grad, ...), where it was stored (``sites``), and
where the module's class and its bases are defined (``inspect``).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterable, Sequence

import torch
from torch import nn

from .._audit import Finding, _is_device_cache
from .._contract import MODULE_INTERNALS, why_no_buffer_slot
from .._forward import ForwardFinding
from .._messages import (
    FIX_HAND_AUTOGRAD,
    FIX_HAND_AUTOGRAD_EDIT,
    FIX_HAND_DEVICE_CACHE,
    FIX_HAND_DEVICE_CACHE_EDIT,
    FIX_HAND_FINDING,
    FIX_HAND_FORWARD,
    FIX_HAND_GRAD,
    FIX_HAND_GRAD_EDIT,
    FIX_HAND_NO_SLOT,
    FIX_HAND_NO_SLOT_EDIT,
    FIX_HAND_PARAMETER,
    FIX_HAND_PARAMETER_EDIT,
)
from .._mixin import AutoRegisterMixin
from .._walk import CONTAINERS, iter_modules, iter_tensors
from .plan import ClassInfo, HandEdit, Kind, Site, Stray
from .sites import Stores

__all__ = ["collect", "forward_hand_edits"]


def collect(
    model: nn.Module,
    findings: Sequence[Finding],
    stores: Stores,
    stored: Iterable[tuple[nn.Module, str, Site]] = (),
) -> list[Stray]:
    """One ``Stray`` per class and attribute of ``findings`` (in their order), with the sites
    ``stores`` recorded for it; ``stored`` adds sites the forward audit found, as
    ``(module, attribute, site)``."""
    holders = _holders(model)
    groups: dict[tuple[type, str], list[nn.Module]] = {}
    for finding in findings:
        for holder in holders.get((id(finding.tensor), finding.attribute), ()):
            if type(holder).__name__ == finding.class_name:
                modules = groups.setdefault((type(holder), finding.attribute), [])
                if holder not in modules:
                    modules.append(holder)
    extra: dict[tuple[type, str], list[Site]] = {}
    for module, attribute, site in stored:
        extra.setdefault((type(module), attribute), []).append(site)
        groups.setdefault((type(module), attribute), []).append(module)
    fixes = {(f.class_name, f.attribute): f.fix for f in findings}
    strays = []
    for (cls, attribute), modules in groups.items():
        sites = [site for module in modules for site in stores.of(module, attribute)]
        sites += extra.get((cls, attribute), [])
        fix = fixes.get((cls.__name__, attribute), "")
        strays.append(_stray(cls, attribute, modules[0], tuple(dict.fromkeys(sites)), fix))
    return strays


def forward_hand_edits(findings: Iterable[ForwardFinding]) -> list[HandEdit]:
    """The forward audit's device and dtype strays, listed with their fixes."""
    return [
        HandEdit(
            f.filename, f.lineno, "", FIX_HAND_FORWARD.format(kind=f.kind, tensor=f.tensor), f.fix
        )
        for f in findings
        if f.kind in ("device", "dtype")
    ]


def _stray(
    cls: type, attribute: str, module: nn.Module, sites: tuple[Site, ...], fix: str
) -> Stray:
    classes = _classes(cls)
    value = module.__dict__.get(attribute)

    text = {"attribute": attribute, "cls": cls.__qualname__}

    def hand(reason: str, edit: str) -> Stray:
        return Stray(classes, attribute, Kind.HAND, sites, reason=reason, edit=edit)

    if isinstance(value, torch.Tensor):
        if isinstance(value, nn.Parameter):
            return hand(FIX_HAND_PARAMETER, FIX_HAND_PARAMETER_EDIT.format(**text))
        if value.requires_grad and value.is_leaf:
            return hand(FIX_HAND_GRAD, FIX_HAND_GRAD_EDIT.format(**text))
        if value.requires_grad and any(site.construction for site in sites):
            return hand(FIX_HAND_AUTOGRAD, FIX_HAND_AUTOGRAD_EDIT)
        where = why_no_buffer_slot(cls, attribute)
        if where is not None:
            return hand(FIX_HAND_NO_SLOT.format(where=where, **text), FIX_HAND_NO_SLOT_EDIT)
        kind = Kind.TENSOR
    elif _is_device_cache(value):
        return hand(FIX_HAND_DEVICE_CACHE, FIX_HAND_DEVICE_CACHE_EDIT.format(**text))
    elif any(True for _ in iter_modules(value)):
        container = type(value).__name__
        return Stray(classes, attribute, Kind.MODULES, sites, container, _wrappable(value))
    elif any(t.requires_grad and t.is_leaf for _, t in iter_tensors(value)):
        return hand(FIX_HAND_GRAD, FIX_HAND_GRAD_EDIT.format(**text))
    else:
        kind = Kind.TENSORS
    if isinstance(module, AutoRegisterMixin):  # autoreg would move it: something else is wrong
        return hand(FIX_HAND_FINDING.format(**text), fix)
    return Stray(classes, attribute, kind, sites, type(value).__name__)


def _holders(model: nn.Module) -> dict[tuple[int, str], list[nn.Module]]:
    """``(id(tensor), attribute)`` to the modules whose ``attribute`` holds the tensor: directly,
    in a container, or as a parameter or buffer of a module in a container (as
    ``find_unregistered`` walks them)."""
    index: dict[tuple[int, str], list[nn.Module]] = {}
    seen: set[int] = set()

    def visit(root: nn.Module) -> None:
        for module in root.modules():
            if id(module) in seen:
                continue
            seen.add(id(module))
            for name, value in list(vars(module).items()):
                if name in MODULE_INTERNALS or not isinstance(value, (torch.Tensor, *CONTAINERS)):
                    continue
                tensors = [t for _, t in iter_tensors(value)]
                for _, held in iter_modules(value):
                    tensors += [*held.parameters(), *held.buffers()]
                    visit(held)
                for tensor in tensors:
                    index.setdefault((id(tensor), name), []).append(module)

    visit(model)
    return index


def _wrappable(value: object) -> bool:
    """Whether ``value`` can become an ``nn.ModuleList`` / ``nn.ModuleDict`` as it is."""
    if type(value) is list:
        return all(isinstance(item, nn.Module) for item in value)
    if type(value) is dict:
        return all(
            isinstance(key, str) and key and "." not in key and isinstance(item, nn.Module)
            for key, item in value.items()
        )
    return False


def _classes(cls: type) -> tuple[ClassInfo, ...]:
    """``cls`` and its bases, torch's, autoreg's and builtins left out."""
    return tuple(
        _class_info(klass)
        for klass in cls.__mro__
        if klass is cls
        or klass.__module__.partition(".")[0] not in ("torch", "autoreg", "builtins")
    )


def _class_info(cls: type) -> ClassInfo:
    bases = tuple(_base_kind(base) for base in cls.__bases__)
    try:
        filename = inspect.getsourcefile(cls)
        lines, lineno = inspect.getsourcelines(cls)
    except (OSError, TypeError):
        filename = None
    if filename is None:
        return ClassInfo(cls.__qualname__, None, 0, 0, bases)
    end = lineno + len(lines) - 1
    return ClassInfo(cls.__qualname__, os.path.abspath(filename), lineno, end, bases)


def _base_kind(base: type) -> str:
    if base is nn.Module:
        return "module"
    if issubclass(base, nn.Module) and base.__module__.partition(".")[0] == "torch":
        return "torch"
    return "other"
