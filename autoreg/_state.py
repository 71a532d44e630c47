"""What autoreg keeps in an instance's ``__dict__``: the roles of some names, and a few keys.

The role of a name is kept under its own key, ``role_key(name)`` (``'_autoreg_role_mask'``):
``BUFFER`` for a buffer autoreg registered under an undeclared name (row 2 applies to it),
``CARRIED`` for a value autoreg carries (the last assignment's decision ``moves`` it: rows 8, 10
and 11; a None stored over it since, or its deletion, keeps the mark), ``FRAMEWORK`` or ``MODEL``
for whose code first assigned the name (row 4; a carried or buffer name is the model's): both on
classes with a framework base, and ``FRAMEWORK`` on any class for a name torch's own code set first
(``_facts``). A key per name, not one dict of roles: compiled code reads the role of the name it
assigns, and dynamo guards a dict it reads as a whole on some torch versions (every new role
anywhere would recompile); copies get the roles as they get every attribute. Keys are identifiers,
also for a name that is none (``'a.b'``): dynamo writes its guards on them as attribute accesses.

``CARRYING`` holds the names that have been carried, a dict of each to its role key: ``.to()``
looks them up instead of searching the whole ``__dict__``, and converts those whose role is
``CARRIED`` now. It changes only when a name is first carried, so an assignment that updates a
carried value, or deletes it (in a compiled ``forward`` too), never reads it: a name deleted
stays in it, its role ``CARRIED``, and is there already when it is carried again, until eager code
next adds a name and the list has doubled since (``_carry.carry``): then the names no longer
carried, or no longer held (taken out of ``__dict__`` around ``__delattr__``), leave it, by a new
dict, and their keys holding None or ``CARRIED`` go. The role of a name deleted that was never
carried (on a class with a framework base, every name's) is forgotten when eager code next gives
a new name a role and ``__dict__`` has doubled since the last time (``SWEEP_AT``, ``_carry.sweep``).

A copy that bypasses autoreg's hooks - a class's own ``__getstate__`` returning
``self.__dict__.copy()``, a ``DataParallel`` replica, which copies ``__dict__`` - holds the very
same objects as its original. ``PENDING`` is replaced by a new dict when it changes. A name is
added to ``CARRYING`` in place (a model that makes up names as it runs would otherwise copy the
dict at every new one): the other may then find in its list a name it does not carry, which
nothing reads without its own role, ``CARRIED``, under the name's key.

Compiled code never reads ``CARRYING`` (dynamo would guard on its contents, and every name carried
eagerly afterwards would recompile) nor adds to it: a name it carries first gets its role, and
``CARRYING`` gets ``UNLISTED`` in place of the dict. A first carry traced once is replayed on every
call of that graph, so this may replace a dict eager code made meanwhile: nothing is lost, as the
roles say which names are carried, and eager code makes the dict again from them before it reads
it (``_carry.listed``); copies and pickles never hold ``UNLISTED``.

``CONSTRUCTING`` holds a ``Building`` mark while one of the instance's construction methods runs,
from the time ``nn.Module.__init__`` has made the registries; a method that began before it (nearly
every ``__init__``) marks the instance in ``EARLY``, outside the ``__dict__``, while it runs, and in
the ``__dict__`` from that time only once dynamo has traced an assignment to an autoreg module
(``_construction`` says why). The mark names the ``__dict__`` it was put in, for as long as the call
runs: a copy that bypassed autoreg's hooks during that call (a class's own ``__copy__``, or a
``__setstate__`` that updates ``__dict__``) holds the original's mark, or a copy of it, and is not
being built. ``PENDING`` is present while tensors assigned before ``nn.Module.__init__`` wait to be
registered (``_execute._SuperInit`` registers them as soon as nn.Module.__init__ has made its
registries); copies and pickles never hold either (``__setstate__`` drops them), and hold
``PICKLED`` instead: an instance unpickled without it, and without any of autoreg's keys, was
pickled before its class used autoreg.
"""

from __future__ import annotations

from typing import Final

from torch import nn

__all__ = [
    "BUFFER",
    "CARRIED",
    "CARRYING",
    "CONSTRUCTING",
    "EARLY",
    "FRAMEWORK",
    "LEGACY_ROLES",
    "MODEL",
    "MODULE_INTERNALS",
    "OWN_KEYS",
    "PASS",
    "PENDING",
    "PICKLED",
    "ROLE",
    "SWEEP_AT",
    "UNLISTED",
    "Building",
    "is_building",
    "is_building_compiled",
    "role_key",
    "role_name",
]

ROLE: Final = "_autoreg_role_"  # + name, for a name that is an identifier
_ROLE_HEX: Final = "_autoreg_rolehex_"  # + the name's UTF-8 bytes in hex, for a non-identifier
CARRYING: Final = "_autoreg_carrying"  # {name: role_key(name)}: every name ever carried
UNLISTED: Final = True  # under CARRYING, once compiled code carried a name first
SWEEP_AT: Final = "_autoreg_sweep_at"  # the size of __dict__ at which deleted roles are next swept
CONSTRUCTING: Final = "_autoreg_constructing"
PENDING: Final = "_autoreg_pending"  # {name: decision}
PICKLED: Final = "_autoreg_pickled"  # in a pickle of an autoreg instance, popped on loading
LEGACY_ROLES: Final = "_autoreg_owned"  # {name: role}: autoreg 0.1's record, in old pickles
OWN_KEYS: Final = "_autoreg"  # every key autoreg keeps starts with it

# Roles. Strings, so that pickles of every autoreg version load.
BUFFER: Final = "buffer"
CARRIED: Final = "carried"
FRAMEWORK: Final = "framework"
MODEL: Final = "model"
PASS: Final = "pass"  # noqa: S105 - a frame that does not tell whose an assignment is (row 4)
# Row 4 in compiled code when nothing there tells, and warn or strict mode would say so: the store
# is left to eager code, past dynamo (never a role: __setattr__ acts on it before it is stored).
UNDECIDED: Final = "undecided"

# nn.Module's own attributes, and the object's (torch's parametrizations assign __class__,
# DataParallel's replicas __dict__): names that hold no attribute of the model's.
MODULE_INTERNALS: Final = frozenset(vars(nn.Module())) | {"_is_replica", "__class__", "__dict__"}

# The instances being built whose outermost construction method began before nn.Module.__init__
# ran: their __dict__ by its id (then empty: nothing may be put in it first; ``_construction``
# says why). An entry lives while that call runs.
EARLY: Final[dict[int, dict[str, object]]] = {}


def role_key(name: str) -> str:
    """The key of ``name``'s role in the instance's ``__dict__``."""
    return ROLE + name if name.isidentifier() else _ROLE_HEX + name.encode().hex()


def role_name(key: str) -> str | None:
    """The name whose role ``key`` holds; None when ``key`` holds no role."""
    if key.startswith(_ROLE_HEX):
        return bytes.fromhex(key[len(_ROLE_HEX) :]).decode()
    if key.startswith(ROLE):
        return key[len(ROLE) :]
    return None


class Building:
    """What ``CONSTRUCTING`` holds while a construction method runs that began after
    ``nn.Module.__init__``: the ``__dict__`` of the instance being built (``owner``), until the
    call returns (None then). A copy of the mark (``copy``, ``deepcopy``, pickle) is one whose
    call has returned: a copy is never being built."""

    def __init__(self, owner: dict[str, object] | None) -> None:
        self.owner = owner

    def __copy__(self) -> Building:
        return Building(None)

    def __deepcopy__(self, memo: dict[int, object]) -> Building:
        return Building(None)

    def __reduce__(self) -> tuple[type[Building], tuple[None]]:
        return Building, (None,)


def is_building(d: dict[str, object]) -> bool:
    """Whether the instance whose ``__dict__`` is ``d`` holds the mark of a construction method
    running for it (``Building``), not one it got with a copy of another's ``__dict__``."""
    mark = d.get(CONSTRUCTING)
    return type(mark) is Building and mark.owner is d


def is_building_compiled(module: nn.Module) -> bool:
    """``is_building`` inside code dynamo compiles: whether the instance holds the mark of a
    construction method whose call runs. The mark is read by ``getattr``, which finds the
    class's ``None`` (``AutoRegisterMixin``) where the ``__dict__`` holds none, and which dynamo
    guards when the instance holds none too (a key absent from a ``__dict__`` it reads it does not
    guard: code traced on a built module was reused inside ``reset_buffers()``); no
    ``__getattr__`` of the model's runs for it (one may print, raise or break the graph). Whose
    call, not asked: dynamo before torch 2.12 answers ``is`` between two dicts read from
    different places as False (a copy holding the mark of a call that still runs is then taken
    for the instance built)."""
    mark = getattr(module, CONSTRUCTING, None)
    return type(mark) is Building and mark.owner is not None
