"""Strict and warn mode: the one place where a decision's ``concern`` refuses or warns.

Strict mode raises ``UnregisteredTensorError`` about the concern; warn mode warns once per class,
concern and name, pointing at the user's assignment; a leaf tensor that requires grad, assigned
while the module is built, warns in every mode (a weight nobody trains). Warnings are emitted only
the first time a class sees a (concern, name): the steady-state assignment path never calls
``warnings``, which would break torch.compile graphs on every call.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ._attribution import constant_result, warn_at_assignment
from ._config import Mode
from ._contract import REGISTER, Concern, Decision
from ._errors import UnregisteredTensorError
from ._facts import is_compiling, why_no_buffer_slot
from ._frames import past_dynamo
from ._messages.contract import (
    CARRIED_COMPLEX,
    CARRY_COMPLEX,
    FIXES_CARRIED,
    FIXES_COMPLEX,
    FIXES_REGISTERED,
    GRAD_LEAF,
    NO_BUFFER_SLOT,
    STRICT_CONTAINER,
    STRICT_UNDECLARED,
    UNSURE_DERIVED,
    WARN_CONTAINER,
    WARN_UNDECLARED,
)
from ._messages.describe import describe
from ._record import ClassRecord
from ._walk import loose_tensors

__all__ = ["compiled_warned", "enforce"]


def enforce(
    module: nn.Module, record: ClassRecord, name: str, value: Any, decision: Decision
) -> None:
    """Refuse (strict) or warn about ``decision.concern`` for ``module.name = value``."""
    concern = decision.concern
    mode = record.mode
    if concern is None:
        return
    if mode is not Mode.STRICT and (
        compiled_warned(record.cls, concern.value, name)
        if is_compiling()
        else (concern.value, name) in record.warned
    ):
        return  # warned once per class, concern and name: nothing more to look at or say
    cls = type(module).__name__
    if concern is Concern.GRAD_LEAF:
        message = GRAD_LEAF.format(cls=cls, name=name, value=describe(value))
        if mode is Mode.STRICT:
            raise UnregisteredTensorError(message)
        _warn_once(record, concern, name, message)  # in every mode: a weight nobody trains
        return
    if mode is Mode.REGISTER:
        return
    if concern is Concern.NO_SLOT:
        where = why_no_buffer_slot(type(module), name)
        message = NO_BUFFER_SLOT.format(cls=cls, name=name, value=describe(value), where=where)
    elif concern is Concern.UNSURE_DERIVED:
        message = UNSURE_DERIVED.format(cls=cls, name=name, value=describe(value))
    elif concern is Concern.CONTAINER:
        loose = loose_tensors(module, value)
        if not loose:
            return  # nothing in it that only autoreg would move
        path, tensor = loose[0]
        fields = {
            "cls": cls,
            "name": name,
            "kind": type(value).__name__,
            "count": len(loose),
            "example": f"{name}{path} = {describe(tensor)}",
        }
        if mode is Mode.STRICT:
            raise UnregisteredTensorError(STRICT_CONTAINER.format(why=record.strict_by, **fields))
        message = WARN_CONTAINER.format(**fields)
    else:
        kind = "persistent" if record.persistent else "non-persistent"
        if decision.action is REGISTER:
            reason = "it was assigned during construction"
            action = f"register it as a {kind} buffer ({reason})"
            past = f"registered as a {kind} buffer because {reason}"
            fixes = FIXES_REGISTERED
        elif isinstance(value, torch.Tensor) and value.is_complex():
            action, past, fixes = CARRY_COMPLEX, CARRIED_COMPLEX, FIXES_COMPLEX
        else:
            action = "carry it along with .to() as runtime state, outside state_dict"
            past = "carried as runtime state: it moves with .to() but is not in state_dict"
            fixes = FIXES_CARRIED
        fields = {
            "cls": cls,
            "name": name,
            "value": describe(value),
            "default": f"a buffer ({kind}):",
        }
        if mode is Mode.STRICT:
            raise UnregisteredTensorError(
                (STRICT_UNDECLARED + fixes).format(action=action, why=record.strict_by, **fields)
            )
        message = (WARN_UNDECLARED + fixes).format(action_past=past, **fields)
    if mode is Mode.STRICT:
        raise UnregisteredTensorError(message)
    _warn_once(record, concern, name, message)


@constant_result
def compiled_warned(cls: type, concern: str, name: str) -> bool:
    """Whether ``cls`` has warned about (``concern``, ``name``), for an assignment dynamo is
    tracing: called by dynamo while it traces, never at run time (its answer is a constant of the
    compiled code, without a guard: one on the set of warnings would recompile for every warning
    the class gives afterwards, anywhere). A warning once given stays given: compiled code traced
    before it asks again, eagerly (``_warn_once``)."""
    record: ClassRecord = cls.__autoreg__  # type: ignore[attr-defined]
    return (concern, name) in record.warned


def _warn_once(record: ClassRecord, concern: Concern, name: str, message: str) -> None:
    """Warn about (concern, name) the first time this class sees it, at the user's assignment."""
    if is_compiling():  # frames cannot be walked in code dynamo compiles (this, a caller), nor
        # the set of warnings read (dynamo would guard on it): eagerly, a graph break, as
        # warnings.warn's
        past_dynamo(_warn_once, record, concern, name, message)
        return
    key = (concern.value, name)
    if key not in record.warned:
        record.warned.add(key)
        warn_at_assignment(record, message)
