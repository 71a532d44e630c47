"""The contract, checked against a reference model of it by a hypothesis state machine.

Random sequences of operations run on an autoreg module and on ``Reference``
(``tests/contract_model.py``, the README's table restated row by row), first inside ``__init__``
and then from outside: assignments of tensors, tensors that require grad, parameters,
``nn.Buffer``s (which take over a carried name), modules, ``None``, ints and (nested) lists, tuples
and dicts of tensors, some holding the module's own parameter and buffer; ``del``;
``register_buffer`` (nn.Module's own: it raises over a carried name, and a failure leaves the name
as it was); appending to a list attribute; dtype moves; ``state_dict`` round trips into fresh
instances; deepcopy and pickle. The names are undeclared, declared (``Persistent``,
``NonPersistent``, ``torch.Tensor``), ``Plain``, a property, a method, a class-level default and a
dotted name; each example builds a fresh class in register, warn or strict mode, persistent or not.

Every operation must raise what the reference says (strict mode's ``UnregisteredTensorError`` with
the right message, naming ``Class.name``) and emit exactly the ``AutoRegisterWarning``s it predicts
(once per class, kind and name, pointing at the assignment); a refused operation is followed by a
probe that the name kept its role. After every step, what the module holds (role, value, dtypes,
identity of its own parameter and buffer inside containers), what ``.to()`` hands to its conversion
function, ``state_dict`` keys and ``named_buffers`` must match, and a move keeps lists and dicts
(in place) and parameters, and rebuilds exactly the values that changed. Only observable behaviour
is compared, never autoreg's bookkeeping.
"""

from __future__ import annotations

import copy
import functools
import itertools
import pickle
import re
import types
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from torch import nn

import autoreg
from tests.contract.contract_model import (
    FIXED,
    KINDS,
    MODULE,
    NAMES,
    NO_SLOT,
    PROPERTY,
    TENSORS,
    ClassModel,
    Outcome,
    Own,
    Reference,
    T,
)

Op = tuple[Any, ...]  # ("assign", name, kind) | ("delete", name) | ("append", name)
# | ("register", name, kind, persistent)


class Subject(autoreg.Module):
    p: autoreg.Persistent
    n: autoreg.NonPersistent
    t: torch.Tensor
    pl: autoreg.Plain
    default = 0.5  # a class-level default

    def __init__(self, body: Callable[[Subject], None], weight: bool) -> None:
        super().__init__()
        if weight:  # without any parameter, registration takes autoreg's cached path
            self.w = nn.Parameter(torch.zeros(2))
        self.register_buffer("fixed", torch.zeros(2))
        body(self)  # the operations of the construction phase

    @property
    def prop(self) -> object:
        return self.__dict__.get("_prop")

    @prop.setter
    def prop(self, value: object) -> None:
        self.__dict__["_prop"] = value

    def meth(self) -> None:
        """A method: an instance attribute of its name shadows it, as on nn.Module."""


_serial = itertools.count()


def subject_class(mode: str, persistent: bool) -> type[Subject]:
    """A new class per example: autoreg's warnings are once per class, kind and name."""
    name = f"Subject{next(_serial)}"

    def body(namespace: dict[str, Any]) -> None:
        namespace.update(__module__=__name__, __qualname__=name)

    keywords = {"persistent": persistent, "strict": mode == "strict", "warn": mode == "warn"}
    cls: type[Subject] = types.new_class(name, (Subject,), keywords, body)
    globals()[name] = cls  # so that pickle finds it
    return cls


def make_value(kind: str, module: Subject) -> object:
    zeros = torch.zeros
    factories: dict[str, Callable[[], object]] = {
        "float": lambda: zeros(2),
        "long": lambda: torch.arange(2),
        "grad_leaf": lambda: zeros(2, requires_grad=True),
        "grad_result": lambda: zeros(2, requires_grad=True) * 2,
        "param": lambda: nn.Parameter(zeros(2)),
        "buffer_persistent": lambda: nn.Buffer(zeros(2), persistent=True),
        "buffer_non_persistent": lambda: nn.Buffer(zeros(2), persistent=False),
        "module": nn.Identity,
        "none": lambda: None,
        "int": lambda: 3,
        "list": lambda: [zeros(2), torch.arange(2)],
        "tuple": lambda: (zeros(2), 3),
        "dict": lambda: {"k": zeros(2)},
        "nested": lambda: {"k": [zeros(2), (zeros(2), {"deep": torch.arange(2)})]},
        "empty": list,
        "own": lambda: (
            [module._parameters["w"], module.fixed] if "w" in module._parameters else [module.fixed]
        ),
        "grad_list": lambda: [zeros(2, requires_grad=True)],
    }
    return factories[kind]()


# --- running an operation, and describing what it did -------------------------------------------

MESSAGES: dict[
    str, Callable[[re.Match[str]], tuple[Any, ...]]
] = {  # the key sentence of each of autoreg's messages -> its description
    r"is a leaf tensor that requires grad": lambda m: ("grad",),
    r"cannot become a buffer": lambda m: ("slot",),
    r"(?:was registered as|would register it as) a (\S+) buffer": lambda m: ("register", m[1]),
    r"was carried as runtime state|would carry it along": lambda m: ("carry",),
    r"a (\w+) holding (\d+) unregistered tensor": lambda m: ("container", m[1], int(m[2])),
}


def describe_message(text: str, module: nn.Module, name: str) -> Any:
    found = [read(match) for key, read in MESSAGES.items() if (match := re.search(key, text))]
    if len(found) != 1 or f"{type(module).__name__}.{name} " not in text.replace(":", " "):
        return ("unexpected message", text)
    return found[0]


def apply(module: Subject, op: Op) -> Outcome:
    """Run ``op``; describe the exception it raised and the warnings it emitted."""
    name = op[1]
    raised = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if op[0] == "assign":
                setattr(module, name, make_value(op[2], module))
            elif op[0] == "delete":
                delattr(module, name)
            elif op[0] == "register":
                module.register_buffer(name, make_value(op[2], module), op[3])  # type: ignore[arg-type]
            else:
                target = module.prop if name == PROPERTY else vars(module).get(name)
                if isinstance(target, list):
                    target.append(torch.zeros(2))
        except (TypeError, KeyError, AttributeError) as error:
            ours = isinstance(error, autoreg.UnregisteredTensorError)
            raised = (
                type(error).__name__,
                describe_message(str(error), module, name) if ours else None,
            )
    said = tuple(
        describe_message(str(w.message), module, name)
        if w.category is autoreg.AutoRegisterWarning and w.filename == __file__  # the user's line
        else ("unexpected warning", w.category.__name__, w.filename, str(w.message))
        for w in caught
    )
    return raised, said


def expect(reference: Reference, op: Op, constructing: bool) -> Outcome:
    if op[0] == "assign":
        return reference.assign(op[1], op[2], constructing)
    if op[0] == "delete":
        return reference.delete(op[1])
    if op[0] == "register":
        return reference.register_buffer(op[1], op[2], op[3])
    reference.append(op[1])
    return None, ()


# --- observing the module ------------------------------------------------------------------------


def held(module: Subject) -> dict[str, tuple[str, Any, bool]]:
    """``name -> (role, value, persistent)`` for each name the module holds."""
    found: dict[str, tuple[str, Any, bool]] = {}
    attributes = vars(module)
    for name in (*NAMES, *FIXED):
        if name in module._parameters:
            found[name] = ("param", module._parameters[name], False)
        elif name in module._buffers:
            persistent = name not in module._non_persistent_buffers_set
            found[name] = ("buffer", module._buffers[name], persistent)
        elif name in module._modules:
            found[name] = ("module", module._modules[name], False)
        elif name == PROPERTY:
            if "_prop" in attributes:
                found[name] = ("attribute", attributes["_prop"], False)
        elif name in attributes:
            found[name] = ("attribute", attributes[name], False)
    return found


def describe(value: Any, own: dict[int, Own], top: bool = True) -> Any:
    """``value`` in the reference's terms."""
    if isinstance(value, torch.Tensor):
        if not top and id(value) in own:
            return own[id(value)]
        return T(value.dtype, value.requires_grad, value.is_leaf)
    if isinstance(value, dict):
        return ("dict", tuple((k, describe(v, own, top=False)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        kind = "list" if isinstance(value, list) else "tuple"
        return (kind, tuple(describe(v, own, top=False) for v in value))
    return MODULE if isinstance(value, nn.Module) else value


def walk(value: Any, path: str = "") -> Iterator[tuple[str, torch.Tensor]]:
    if isinstance(value, torch.Tensor):
        yield path, value
    elif isinstance(value, (list, tuple, dict)):
        entries = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in entries:
            yield from walk(item, f"{path}[{key!r}]")


def own_tensors(module: Subject) -> dict[int, Own]:
    own = {id(module.fixed): Own("fixed")}
    if "w" in module._parameters:
        own[id(module._parameters["w"])] = Own("w")
    return own


def observe(module: Subject) -> dict[str, tuple[str, Any, bool]]:
    own = own_tensors(module)
    return {
        name: (role, describe(value, own), persistent)
        for name, (role, value, persistent) in held(module).items()
    }


def moved(module: Subject) -> set[tuple[str, str]]:
    """``(name, path)`` of each tensor ``.to()`` converts (a dry run: the function returns it)."""
    seen: set[int] = set()

    def record(tensor: torch.Tensor) -> torch.Tensor:
        seen.add(id(tensor))
        return tensor

    module._apply(record)
    own = own_tensors(module)
    return {
        (name, path)
        for name, (_, value, _) in held(module).items()
        for path, tensor in walk(value)
        if id(tensor) in seen and not (path and id(tensor) in own)
    }


# --- the machine --------------------------------------------------------------------------------

# Plain tensors more often (most rows are about them), and the containers strict mode accepts.
KINDS_DRAWN = [*TENSORS, *TENSORS, *KINDS, "empty", "own", "grad_list"]


VERBS = ["assign", "assign", "assign", "delete", "register", "append"]


def operation(verb: str, name: str, kind: str, buffer_kind: str, persistent: bool) -> Op:
    if verb == "assign":
        return (verb, name, kind)
    if verb == "register":
        return (verb, name, buffer_kind, persistent)
    return (verb, name)


@functools.cache
def operations(names: tuple[str, ...]) -> st.SearchStrategy[Op]:
    """Operations on ``names``: a few per example, so that operations meet on the same name."""
    return st.builds(
        operation,
        st.sampled_from(VERBS),
        st.sampled_from(names),
        st.sampled_from(KINDS_DRAWN),
        st.sampled_from(["float", "long", "none", "int"]),
        st.booleans(),
    ).filter(
        # nn.Module's own edge cases for a Parameter or module over a class attribute: left out.
        lambda op: op[0] != "assign" or op[1] not in NO_SLOT or op[2] not in ("param", "module")
    )


class ContractMachine(RuleBasedStateMachine):
    cls: type[Subject]
    operations: st.SearchStrategy[Op]
    model: ClassModel
    construction: list[Op]
    module: Subject
    reference: Reference

    def step(self, module: Subject, reference: Reference, op: Op, constructing: bool) -> None:
        expected = expect(reference, op, constructing)
        assert apply(module, op) == expected, op
        raised, said = expected
        if raised and op[0] != "append":
            # Nothing lost: a list the name held before the failure still moves as it is now.
            self.step(module, reference, ("append", op[1]), constructing)
        event(f"raised {raised}")  # --hypothesis-show-statistics shows what the examples reached
        for message in said:
            event(f"warned {message[0]}")

    def build(self) -> tuple[Subject, Reference]:
        reference = Reference(self.model)

        def body(module: Subject) -> None:
            for op in self.construction:
                self.step(module, reference, op, constructing=True)

        return self.cls(body, self.model.weight), reference

    @initialize(data=st.data())
    def construct(self, data: st.DataObject) -> None:
        mode = data.draw(st.sampled_from(["register", "warn", "strict"]), label="mode")
        persistent = data.draw(st.booleans(), label="persistent")
        weight = data.draw(st.booleans(), label="weight")
        # Undeclared names, where most rows of the table apply, and up to two others; "b" is
        # left alone during construction, so that it becomes runtime state more often.
        others = data.draw(st.lists(st.sampled_from(NAMES[2:]), max_size=2, unique=True))
        construction = st.lists(operations(("a", *others)), max_size=8)
        self.construction = data.draw(construction, label="construction")
        self.operations = operations(("a", "b", *others))
        self.cls = subject_class(mode, persistent)
        self.model = ClassModel(mode, persistent, weight)
        self.module, self.reference = self.build()

    def teardown(self) -> None:
        if hasattr(self, "cls"):
            del globals()[self.cls.__name__]

    @rule(data=st.data())
    def operate(self, data: st.DataObject) -> None:
        op = data.draw(self.operations, label="op")
        self.step(self.module, self.reference, op, constructing=False)

    @rule(dtype=st.sampled_from([torch.float64, torch.float16, torch.float32]))
    def move(self, dtype: torch.dtype) -> None:
        before = {name: value for name, (_, value, _) in held(self.module).items()}
        expected_before = self.reference.view()
        self.module.to(dtype)
        self.reference.to(dtype)
        after, expected_after = held(self.module), self.reference.view()
        for name, value in before.items():
            # Parameters stay the same objects; lists and dicts are converted in place; any other
            # value is a new object exactly when it changed (tuples are rebuilt).
            same = (
                expected_after[name][0] == "param"
                or type(value) in (list, dict)
                or expected_after[name] == expected_before[name]
            )
            assert (after[name][1] is value) == same, name

    @rule()
    def load_into_fresh_instance(self) -> None:
        fresh, fresh_reference = self.build()
        result = fresh.load_state_dict(self.module.state_dict(), strict=False)
        ours, theirs = self.reference.state_dict_keys(), fresh_reference.state_dict_keys()
        assert set(result.missing_keys) == theirs - ours
        assert set(result.unexpected_keys) == ours - theirs

    @rule(how=st.sampled_from(["deepcopy", "pickle"]))
    def copy(self, how: str) -> None:
        tensors = [t for _, value, _ in held(self.module).values() for _, t in walk(value)]
        if how == "deepcopy" and not all(t.is_leaf for t in tensors):
            # torch refuses to deepcopy an autograd result, for nn.Module alike.
            with pytest.raises(RuntimeError, match=r"graph leaves|non-leaf"):
                copy.deepcopy(self.module)
            return
        if how == "deepcopy":
            self.module = copy.deepcopy(self.module)
        else:
            self.module = pickle.loads(pickle.dumps(self.module))
            self.reference.pickled()

    @invariant()
    def matches_the_reference(self) -> None:
        assert observe(self.module) == self.reference.view()
        assert moved(self.module) == self.reference.moved()
        assert set(self.module.state_dict()) == self.reference.state_dict_keys()
        assert {name for name, _ in self.module.named_buffers()} == self.reference.buffers()


ContractMachine.TestCase.settings = settings(
    max_examples=600,
    stateful_step_count=25,
    deadline=None,
    derandomize=True,  # the same sequences in every run; CI must not flake
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_the_contract_matches_its_reference_model = ContractMachine.TestCase
