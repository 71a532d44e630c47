"""The assignment contract: what ``self.name = value`` does, as one pure decision.

``_facts.situation`` reads the facts of one assignment - what the value is, what the name holds,
whose the name is, whether the module is being built - into a ``Situation``. ``classify`` returns
the ``Decision``: the row of the contract table that applies, what to do, whether ``.to()``
converts the value afterwards, and what strict and warn mode have to say. ``classify`` reads
nothing else, so its decisions can be kept per class (``decide``): an assignment either replays a
decision ``classify`` made for the same situation or asks it.

The rows, in the order they are tried (docs, "The contract"):

1. an ``nn.Parameter``, ``nn.Buffer`` or module: nn.Module's; a buffer autoreg registered there is
   no longer autoreg's.
2. a value nn.Module refuses for a buffer autoreg registered: the buffer is unregistered and the
   value assigned afresh.
3. a name that holds a parameter, buffer or submodule: nn.Module's.
4. a name the code of a framework base assigned first: nn.Module's, for good.
5. a name declared ``autoreg.Plain``: a plain attribute.
6. a leaf tensor that requires grad, or the weight prune / weight_norm / spectral_norm derive: a
   plain attribute; so is an undeclared tensor that may be such a weight when that cannot be told.
7. a name that cannot hold a buffer (defined on the class, nn.Module internals, '' or dotted):
   nn.Module's; a data descriptor (a property) decides what assigning means.
8. a list, tuple or dict: carried.
9. a declared tensor: a buffer; under ``autoreg.Carried``, carried (containers too).
10. a tensor assigned while the module is built: a buffer (an autograd result or a complex
    tensor: carried).
11. a tensor assigned at any other time: carried.
12. anything else: nn.Module's.

"Carried": a decision that ``moves`` the value it stores marks the name carried where it is carried
out (``_execute``), and ``.to()`` converts what the marked names hold (``_carry``).
"""

from __future__ import annotations

import enum
from typing import Final, NamedTuple

from ._declarations import Declaration
from ._facts import (
    BUFFERS,
    COMPLEX,
    CONTAINER,
    EXPLICIT,
    GRAD_LEAF,
    GRAD_RESULT,
    OTHER,
    TENSORS,
    UNBUILT,
    Situation,
)
from ._record import CACHE_LIMIT, ClassRecord
from ._state import BUFFER, FRAMEWORK

__all__ = [
    "EXPLICIT_ROW",
    "HAND_OVER",
    "OTHER_ROW",
    "REGISTER",
    "REGISTERED",
    "RELEASE",
    "STORE",
    "Action",
    "Concern",
    "Decision",
    "classify",
    "decide",
]

# What nn.Module refuses for a buffer: not a tensor, not None, a type without __torch_function__
# (a torch.fx Proxy has it, while symbolic_trace runs forward; _facts reads it from the type).
_REFUSED_BY_BUFFERS: Final = (CONTAINER, OTHER)  # a tuple: see _facts.TENSORS


class Action(enum.Enum):
    HAND_OVER = "nn.Module's behaviour; the name is no longer autoreg's"
    RELEASE = "the buffer is unregistered, then the value is assigned afresh"
    STORE = "stored as nn.Module stores it"
    REGISTER = "registered as a buffer"


HAND_OVER, RELEASE, STORE, REGISTER = Action


class Concern(enum.Enum):
    """What strict mode refuses and warn mode warns about."""

    UNDECLARED = "undeclared"
    CONTAINER = "container"
    GRAD_LEAF = "grad"
    NO_SLOT = "slot"
    UNSURE_DERIVED = "derived"  # whether it is a utility's derived weight cannot be told


class Decision(NamedTuple):
    row: int
    action: Action
    moves: bool = False  # .to() converts the value while it stays there (rows 8 to 11)
    concern: Concern | None = None
    persistent: bool = False
    always: bool = False  # the concern is raised (strict) or warned about in every mode


# The decisions there are, made once: classify returns one of these.
EXPLICIT_ROW: Final = Decision(1, HAND_OVER)  # _mixin replays it for a new submodule
_RELEASE: Final = Decision(2, RELEASE)
REGISTERED: Final = Decision(3, STORE)  # _mixin replays it past a base's __setattr__
_FRAMEWORK: Final = Decision(4, STORE)
_PLAIN: Final = Decision(5, STORE)
_GRAD: Final = {
    Concern.GRAD_LEAF: Decision(6, STORE, concern=Concern.GRAD_LEAF, always=True),
    None: Decision(6, STORE),
}
_UNSURE_DERIVED: Final = Decision(6, STORE, concern=Concern.UNSURE_DERIVED)
_NO_SLOT: Final = {c: Decision(7, STORE, concern=c) for c in (Concern.NO_SLOT, None)}
_CONTAINER: Final = Decision(8, STORE, True, Concern.CONTAINER)
_DECLARED: Final = {p: Decision(9, REGISTER, True, persistent=p) for p in (True, False)}
_DECLARED_CARRIED: Final = Decision(9, STORE, True)
_CONSTRUCTION: Final = {
    p: Decision(10, REGISTER, True, Concern.UNDECLARED, p) for p in (True, False)
}
_CONSTRUCTION_RESULT: Final = Decision(10, STORE, True, Concern.UNDECLARED)
_RUNTIME: Final = Decision(11, STORE, True, Concern.UNDECLARED)
OTHER_ROW: Final = Decision(12, STORE)  # _mixin replays it for a class under __class__


def classify(record: ClassRecord, s: Situation) -> Decision:
    """The contract row for the assignment described by ``s``, on an instance of ``record``'s
    class. Pure: the same record and situation always give the same decision."""
    name, kind, role, registry, constructing, slot, derived = s
    if kind is EXPLICIT:
        return EXPLICIT_ROW
    if role == BUFFER and registry is BUFFERS and kind in _REFUSED_BY_BUFFERS:
        return _RELEASE
    if registry is not None and registry is not UNBUILT:
        return REGISTERED
    if role == FRAMEWORK:
        return _FRAMEWORK
    tensor = kind in TENSORS
    if not (tensor or kind is CONTAINER):
        return OTHER_ROW
    declaration = record.declarations.get(name)
    if declaration is Declaration.PLAIN:
        return _PLAIN
    if kind is GRAD_LEAF or (tensor and derived):
        leaf = kind is GRAD_LEAF and constructing
        return _GRAD[Concern.GRAD_LEAF if leaf else None]
    if tensor and derived is None and declaration is None:
        return _UNSURE_DERIVED  # nn.Module's plain attribute, as a derived weight would be
    carried = declaration is Declaration.CARRIED
    if slot is not None and ((tensor and not carried) or slot in ("internal", "descriptor")):
        # What is carried (a container, a name declared Carried) is carried under any other
        # name: the instance's __dict__, where it is kept, wins over a class attribute that is
        # no data descriptor.
        return _NO_SLOT[Concern.NO_SLOT if tensor and slot != "descriptor" else None]
    if carried:
        return _DECLARED_CARRIED
    if kind is CONTAINER:
        return _CONTAINER
    if declaration is not None:
        return _DECLARED[record.persistence(declaration)]
    if constructing:
        # An autograd result is state of a run; a complex tensor would be cast to a real dtype by
        # nn.Module's .to(dtype) as a buffer, where the plain attribute it was is never touched:
        # both are carried (_carry moves a complex one, and never to a real dtype).
        if kind is GRAD_RESULT or kind is COMPLEX:
            return _CONSTRUCTION_RESULT
        return _CONSTRUCTION[record.persistent]
    return _RUNTIME


def decide(record: ClassRecord, s: Situation, *, compiling: bool) -> Decision:
    """``classify(record, s)``, kept per class and situation. Inside code dynamo compiles the
    decision is made afresh: a lookup in a dict that grows would make it guard on the dict."""
    if compiling:
        return classify(record, s)
    decision = record.decisions.get(s)
    if decision is None:
        decision = classify(record, s)
        if len(record.decisions) < CACHE_LIMIT:
            record.decisions[s] = decision
    return decision
