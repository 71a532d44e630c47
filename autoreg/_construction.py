"""When an instance is being built (row 10), whatever defines its ``__init__``.

An instance is constructing until ``nn.Module.__init__`` has run (nothing else can be happening to
it then), and while one of its construction methods runs: ``__init__`` (written in the class
statement, or a ``functools.partialmethod``), ``__post_init__`` (``@dataclass`` calls it from the
``__init__`` it adds after the class statement), ``__attrs_pre_init__`` and
``__attrs_post_init__`` (attrs),
``configure_model()`` (Lightning builds layers there) and ``reset_buffers()`` (autoreg's convention
for derived buffers). Each such method an autoreg class defines is wrapped when the class is
created: while the outermost call for an instance runs, the instance's ``__dict__`` holds
``CONSTRUCTING``, a mark naming that ``__dict__`` (``_state.Building``). Tensors assigned before
``nn.Module.__init__`` ran (``PENDING``) are registered as soon as it has made its registries
(``_execute.register_pending``), or at the latest when the outermost call returns. Copies and
pickles never carry either key (``__getstate__``), and a copy that bypasses autoreg's hooks holds
a mark that is not its own: a copy made during construction is not constructing.

A call that begins before ``nn.Module.__init__`` has run (``super().__init__()`` comes first in
nearly every ``__init__``) writes nothing into the still empty ``__dict__``: torch reads a module
whose ``__dict__`` is empty as not yet initialized, and dynamo, meeting one being built inside a
compiled function, traces it as such; one holding autoreg's mark alone it traced as a built module
without ``_parameters``, and crashed. The instance is marked in ``_state.EARLY`` (its ``__dict__``,
by its id) for as long as the call runs, which eager code reads; and, once dynamo has traced an
assignment to an autoreg module in the process (``marks_for_compiled_code``), in its ``__dict__``
too, as a later call is, from the time ``nn.Module.__init__`` has made the registries:
``nn.Module.__init__`` reads ``self.call_super_init`` last, once they exist (torch 2.0 to 2.15), and
the class answers through ``_execute._SuperInit``, which puts the mark there. Compiled code reads
the mark alone, with a guard (``_state.is_building_compiled``), and nothing of the process's.
(Asking dynamo whether a compiled function runs, to keep the mark in the ``__dict__`` elsewhere,
crashed torch 2.6 and 2.7: their getter of the frame callback returns a reference it does not own.)
"""

from __future__ import annotations

import functools
import types
import weakref
from collections.abc import Callable
from typing import Any, Final

from torch import nn

from . import _state
from ._attribution import constant_result
from ._errors import ClassDefinitionError
from ._execute import answer_call_super_init, register_pending
from ._facts import is_compiling
from ._frames import skip_as_dynamo_frame
from ._messages.contract import INHERITED_INIT_UNDER_A_DECORATOR
from ._record import ClassRecord
from ._state import CONSTRUCTING, PENDING, Building, is_building, is_building_compiled

__all__ = [
    "CONSTRUCTION_METHODS",
    "compiled_marks",
    "finalize",
    "made_again_from",
    "marks_for_compiled_code",
    "prepare",
]

CONSTRUCTION_METHODS: Final = frozenset(
    (
        "__init__",
        "__post_init__",
        "__attrs_pre_init__",
        "__attrs_post_init__",
        "configure_model",
        "reset_buffers",
    )
)
_MARK: Final = "__autoreg_constructs__"  # set on the wrappers
_INHERITED: Final = "__autoreg_inherited__"  # set on a wrapper of an inherited __init__


def prepare(cls: type) -> None:
    """Wrap the construction methods a new autoreg class defines; a class without an ``__init__``
    of its own gets a wrapper of the one it inherits from a framework base (whose code may call a
    method of the model that assigns: ``nn.Module.__init__`` assigns nothing, and is not), unless
    a decorator writes it, or wrote it with wrapped hooks (``_inherited_init_left``). A class
    whose construction may begin before ``nn.Module.__init__`` then answers ``call_super_init``
    (``_SuperInit``); one that inherits ``nn.Module.__init__`` alone pays nothing for it."""
    for method in CONSTRUCTION_METHODS:
        function = cls.__dict__.get(method)
        inherited = False
        if function is None and method == "__init__":
            function = cls.__init__  # type: ignore[misc]
            inherited = True
            if function is nn.Module.__init__ or _inherited_init_left(cls):
                continue
        if function is None or issubclass(type(function), (staticmethod, classmethod)):
            continue  # a static or class method builds no instance, and takes none
        if not getattr(function, _MARK, False):
            wrapper = _constructing(function, method, cls if inherited else None)
            if inherited:
                setattr(wrapper, _INHERITED, True)  # checked by ``finalize``
            setattr(cls, method, wrapper)
    if any(getattr(getattr(cls, method, None), _MARK, False) for method in _BEGIN_EARLY):
        if _ANSWERING[0]:
            answer_call_super_init(cls)
        else:
            _WAITING.add(cls)


# The construction methods whose call may begin before nn.Module.__init__ has run.
_BEGIN_EARLY: Final = ("__init__", "__post_init__", "__attrs_pre_init__", "__attrs_post_init__")
# Whether classes answer call_super_init (``_SuperInit``): from the first assignment dynamo traces
# on an autoreg module (``marks_for_compiled_code``); the classes that will then.
_ANSWERING: Final[list[bool]] = [False]
_WAITING: Final[weakref.WeakSet[type]] = weakref.WeakSet()


@constant_result
def compiled_marks(cls: type) -> bool:
    """``marks_for_compiled_code()``, for an assignment to an instance of ``cls`` that dynamo is
    tracing: called by dynamo while it traces, never at run time. True."""
    marks_for_compiled_code()
    return True


def marks_for_compiled_code() -> None:
    """Have every construction that begins before ``nn.Module.__init__`` put its mark in the
    ``__dict__`` once ``nn.Module.__init__`` has made the registries, where compiled code reads
    it: called when dynamo first traces an assignment to an autoreg module (eager Python, while it
    traces, before it reads a mark), and at once from then on. Until then nothing reads that mark
    but eager code, which reads ``_state.EARLY``, and no construction pays for it (three Python
    calls of ``_SuperInit`` in ``nn.Module.__init__``: +0.3 µs, 7 % of a module that registers
    four tensors). The instances already past ``nn.Module.__init__`` are marked now."""
    if _ANSWERING[0]:
        return
    _ANSWERING[0] = True
    for cls in list(_WAITING):
        answer_call_super_init(cls)
    _WAITING.clear()
    for d in list(_state.EARLY.values()):
        if "_modules" in d and CONSTRUCTING not in d:
            d[CONSTRUCTING] = Building(d)


# The hooks of the __init__ that @dataclass and attrs write after the class statement, which
# they write only into a class that has none of its own: a wrapper of an inherited __init__, put
# there first, kept them from writing theirs (the fields were dropped).
_GENERATED_INIT_HOOKS: Final = ("__post_init__", "__attrs_pre_init__", "__attrs_post_init__")


def _inherited_init_left(cls: type) -> bool:
    """Whether the ``__init__`` that ``cls`` inherits is left unwrapped: when a decorator writes
    it, or wrote it, together with hooks that are construction methods, wrapped: ``cls`` itself
    defines a hook of a generated ``__init__``, or the class that defines the inherited one is an
    autoreg class that does. Read from the classes' ``__dict__``."""
    if any(hook in cls.__dict__ for hook in _GENERATED_INIT_HOOKS):
        return True
    for klass in cls.__mro__[1:]:
        if "__init__" in klass.__dict__:
            return isinstance(klass.__dict__.get("__autoreg__"), ClassRecord) and any(
                hook in klass.__dict__ for hook in _GENERATED_INIT_HOOKS
            )
    return False


def made_again_from(cls: type, old: type) -> None:
    """``cls`` was made again from the namespace of ``old``, with autoreg's wrappers: where a
    decorator made it (``@dataclass(slots=True)``, attrs' slotted classes, which discard
    ``old``), the methods they wrap that name their class (``super()``, ``__class__``) name
    ``cls`` now, as attrs makes every function it can reach name it: it reaches the wrappers, not
    the functions inside them. A class copied by hand leaves ``old`` as it is: a decorator that
    makes a class again makes it slotted, and a copy of ``old``'s namespace is as slotted as
    ``old`` (a copy of a dataclass holds its fields too)."""
    if "__slots__" not in cls.__dict__ or "__slots__" in old.__dict__:
        return
    for value in cls.__dict__.values():
        if type(value) is not types.FunctionType or not value.__dict__.get(_MARK):
            continue
        wrapped = value.__dict__.get("__wrapped__")
        if type(wrapped) is types.FunctionType and "__class__" in wrapped.__code__.co_freevars:
            closure = wrapped.__closure__ or ()
            cell = closure[wrapped.__code__.co_freevars.index("__class__")]
            if cell.cell_contents is old:
                cell.cell_contents = cls


def finalize(cls: type) -> None:
    """Finalize ``cls``, when its first instance is assigned to: its annotations are read again,
    now that the module defining it is done (forward references resolve). A class @dataclass
    decorated after autoreg wrapped the ``__init__`` it inherits, which kept the decorator from
    writing its own, is refused: its fields would be the base's, or never set. (attrs writes
    ``__init__`` over the wrapper, and with ``init=False`` writes ``__attrs_init__`` instead.)"""
    init = cls.__dict__.get("__init__")
    if type(init) is types.FunctionType and init.__dict__.get(_INHERITED):
        _refuse_an_unwritten_init(cls, init.__dict__.get("__wrapped__"))
    record: ClassRecord = cls.__autoreg__  # type: ignore[attr-defined]
    record.finalize()


def _refuse_an_unwritten_init(cls: type, wrapped: object) -> None:
    """Refuse ``cls``, given autoreg's wrapper of the ``__init__`` it inherits (``wrapped``),
    where @dataclass decorated it since and wrote no ``__init__`` (see ``finalize``): asked at
    each construction of ``cls`` in eager code (the first one refuses, before the base's
    ``__init__`` takes the fields' arguments), and at its first assignment (code dynamo
    compiles, which before torch 2.9 cannot trace a lookup in a class's ``__dict__``)."""
    own = cls.__dict__
    if "__dataclass_fields__" not in own or not getattr(
        own.get("__dataclass_params__"), "init", True
    ):
        return  # (not a dataclass, or one asked for no __init__: init=False)
    defining = [k for k in cls.__mro__[1:] if "__init__" in k.__dict__]  # object's at least
    # (the function a descriptor made, partialmethod's, is in no class's __dict__)
    base = next((k for k in defining if k.__dict__["__init__"] is wrapped), defining[0])
    hook = "__post_init__"
    has_hook = any(hook in k.__dict__ for k in base.__mro__)
    raise ClassDefinitionError(
        INHERITED_INIT_UNDER_A_DECORATOR.format(
            cls=cls.__name__,
            base=base.__name__,
            hook=hook,
            builds=f"{hook}()" if has_hook else "__init__(...)",
        )
    )


def _frame_signature(self: Any) -> None:
    """The arguments of a construction wrapper's frame, for a frame walker that reads them from
    the class its ``__class__`` names: ``self`` alone, which such a walker sets aside. (With the
    wrapper's ``*args, **kwargs``, Lightning took the keyword arguments as the caller passed
    them, over what the model's ``__init__`` made of them.)"""


def _constructing(method: Any, name: str, inherited_by: type | None = None) -> Callable[..., Any]:
    """``method`` (the class's ``name``) wrapped so that the instance is constructing while its
    outermost call runs; ``inherited_by``: the class that inherits it (an ``__init__``), which a
    decorator may have made a dataclass since (``_refuse_an_unwritten_init``)."""
    if isinstance(method, types.FunctionType):
        call: Callable[..., Any] = method
    else:  # a descriptor: functools.partialmethod, or anything else that binds

        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            return method.__get__(self, type(self))(*args, **kwargs)

    class _Frame:
        __init__ = _frame_signature  # what a frame walker reads for the wrapper's arguments

        @staticmethod
        def construct(self: Any, *args: Any, **kwargs: Any) -> Any:
            __class__  # type: ignore[name-defined]  # noqa: B018 - the frame holds the cell
            if (
                inherited_by is not None
                and not is_compiling()  # (finalize asks there)
                and "__dataclass_fields__" in inherited_by.__dict__
            ):
                _refuse_an_unwritten_init(inherited_by, method)
            d = self.__dict__
            # autoreg's own state is read through its module (_state.EARLY), never bound here:
            # a class pickled by value (cloudpickle) takes this function with it, and the module
            # by reference, where a set would be copied and the copy read by no one.
            early_ids = _state.EARLY
            if not d:  # before nn.Module.__init__ (nearly every __init__): the __dict__ stays empty
                early = id(d)
                if early in early_ids:  # an inner call: the outermost marks
                    return call(self, *args, **kwargs)
                early_ids[early] = d
                try:
                    result = call(self, *args, **kwargs)
                finally:
                    early_ids.pop(early, None)
                    mark = d.pop(CONSTRUCTING, None)  # put there by _SuperInit
                    if type(mark) is Building and mark.owner is d:
                        mark.owner = None  # copies made meanwhile that hold it are not being built
            else:
                building = is_building_compiled(self) if is_compiling() else is_building(d)
                if building or (early_ids and id(d) in early_ids):  # an inner call
                    return call(self, *args, **kwargs)
                mark = Building(d)  # replaces a mark a copy of another's __dict__ brought
                d[CONSTRUCTING] = mark
                try:
                    result = call(self, *args, **kwargs)
                finally:
                    mark.owner = None  # copies made meanwhile that hold it are not being built
                    self.__dict__.pop(CONSTRUCTING, None)
            if PENDING in self.__dict__:  # nn.Module.__init__ did not ask (register_pending)
                register_pending(self)
            return result

    # The wrapper's frame sits between the method of a class and its base's (super().__init__()
    # reaches the base's wrapper). It runs code named as the method (what a traceback shows),
    # and holds __class__, whose __init__'s only argument is self, as frame walkers read them:
    # Lightning's save_hyperparameters() walks the frames of __init__ up to collect every
    # subclass's arguments (where it found none, it stopped, and the subclass's arguments were
    # lost), and collects nothing from this one.
    construct: Callable[..., Any] = _Frame.construct
    construct.__code__ = construct.__code__.replace(co_name=name)
    skip_as_dynamo_frame(construct.__code__)  # a frame of autoreg's own (_frames)
    functools.update_wrapper(construct, method)
    if isinstance(method, functools.partialmethod):
        # What functools.partialmethod's own function holds, where inspect.signature reads it
        # (3.11, 3.12; 3.13); __wrapped__, which it follows first, would lead it to the
        # partialmethod, which it cannot read.
        del construct.__wrapped__  # type: ignore[attr-defined]
        construct._partialmethod = construct.__partialmethod__ = method  # type: ignore[attr-defined]
    setattr(construct, _MARK, True)
    return construct
