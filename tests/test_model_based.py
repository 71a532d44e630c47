"""The contract, checked against a small reference model of it by a hypothesis state machine.

Random sequences of assignments (at construction and after), deletions, explicit register_buffer
calls, dtype moves, state_dict round trips into fresh instances, deepcopy and pickle run on an
autoreg module and on ``Reference``, a few dozen lines that restate the README's table. After every
step the module's registries, autoreg's own bookkeeping and every tensor's dtype must match.
"""

from __future__ import annotations

import copy
import pickle
import warnings
from dataclasses import dataclass, replace

import pytest
import torch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from torch import nn

import autoreg

NAMES = ["a", "b", "p", "n", "t", "pl"]  # a, b undeclared; the others annotated below
DECLARED = {"p": True, "n": False, "t": None}  # persistence; None follows the class keyword
TENSORS = ["float", "long", "grad_leaf", "grad_result"]
VALUES = [*TENSORS, "none", "int", "param", "buffer_persistent", "buffer_non_persistent", "module"]
DTYPES = [torch.float64, torch.float16, torch.float32]


def make_value(kind: str) -> object:
    return {
        "float": lambda: torch.zeros(2),
        "long": lambda: torch.arange(2),
        "grad_leaf": lambda: torch.zeros(2, requires_grad=True),
        "grad_result": lambda: torch.zeros(2, requires_grad=True) * 2,
        "none": lambda: None,
        "int": lambda: 3,
        "param": lambda: nn.Parameter(torch.zeros(2)),
        "buffer_persistent": lambda: nn.Buffer(torch.zeros(2), persistent=True),
        "buffer_non_persistent": lambda: nn.Buffer(torch.zeros(2), persistent=False),
        "module": nn.Identity,
    }[kind]()


Op = tuple[str, ...]  # ("assign", name, kind) | ("delete", name) | ("register", name, kind, p)


def apply(module: nn.Module, op: Op) -> str | None:
    """Run ``op``; return the name of the exception it raised, if any."""
    try:
        if op[0] == "assign":
            setattr(module, op[1], make_value(op[2]))
        elif op[0] == "delete":
            delattr(module, op[1])
        else:
            module.register_buffer(op[1], make_value(op[2]), op[3] == "persistent")  # type: ignore[arg-type]
    except (TypeError, KeyError, AttributeError) as error:
        return type(error).__name__
    return None


class Subject(autoreg.Module):
    p: autoreg.Persistent
    n: autoreg.NonPersistent
    t: torch.Tensor
    pl: autoreg.Plain

    def __init__(self, ops: list[Op]) -> None:
        super().__init__()
        self.outcomes = [apply(self, op) for op in ops]


class PersistentSubject(Subject, persistent=True):
    pass


# --- the reference model ------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    kind: str  # "param" | "buffer" | "module" | "carried" | "plain"
    dtype: torch.dtype | None = None  # None: holds no tensor
    persistent: bool = False  # buffers
    auto: bool = False  # buffers autoreg registered


def value_dtype(kind: str) -> torch.dtype | None:
    if kind in ("float", "grad_leaf", "grad_result", "param") or kind.startswith("buffer"):
        return torch.float32
    return torch.int64 if kind == "long" else None


class Reference:
    """The README's table, restated: what each operation does to each name."""

    def __init__(self, class_persistent: bool) -> None:
        self.class_persistent = class_persistent
        self.state: dict[str, Entry] = {}

    def apply(self, op: Op, constructing: bool) -> str | None:
        name, current = op[1], self.state.get(op[1])
        if op[0] == "delete":
            if current is None:
                return "AttributeError"
            del self.state[name]
            return None
        if op[0] == "register":
            if current is not None and current.kind in ("param", "module", "plain"):
                return "KeyError"  # nn.Module: "attribute ... already exists"
            self.state[name] = Entry("buffer", value_dtype(op[2]), op[3] == "persistent")
            return None
        outcome, entry = self.assign(name, op[2], current, constructing)
        if entry is not None:
            self.state[name] = entry
        return outcome

    def assign(
        self, name: str, kind: str, current: Entry | None, constructing: bool
    ) -> tuple[str | None, Entry | None]:
        dtype = value_dtype(kind)
        held = current.kind if current else None
        if kind == "module" and held == "param":  # nn.Module: a parameter takes only a Parameter
            return "TypeError", None
        if kind in ("param", "module"):
            return None, Entry(kind, dtype)
        if held in ("param", "module"):  # nn.Module: only None or its own kind
            return ("TypeError", None) if kind != "none" else (None, replace(current, dtype=None))
        if kind.startswith("buffer"):
            if held == "plain":  # nn.Module: "attribute ... already exists"
                return "KeyError", None
            return None, Entry("buffer", dtype, persistent=kind == "buffer_persistent")
        if held == "buffer":
            if kind == "int":  # rule 8 for autoreg's buffers, nn.Module's TypeError otherwise
                return ("TypeError", None) if not current.auto else (None, Entry("plain"))
            return None, replace(current, dtype=dtype)
        if kind == "none":
            return None, Entry("carried" if held == "carried" else "plain")
        if kind == "int" or name == "pl" or kind.startswith("grad"):
            return None, Entry("plain", dtype)
        if held == "carried":
            return None, Entry("carried", dtype)
        if name in DECLARED or constructing:
            persistent = DECLARED.get(name)
            persistent = self.class_persistent if persistent is None else persistent
            return None, Entry("buffer", dtype, persistent, auto=True)
        return None, Entry("carried", dtype)

    def to(self, dtype: torch.dtype) -> None:
        for name, entry in self.state.items():
            moves = entry.kind in ("param", "buffer", "carried")
            if moves and entry.dtype is not None and entry.dtype.is_floating_point:
                self.state[name] = replace(entry, dtype=dtype)

    def state_dict_keys(self) -> set[str]:
        return {
            name
            for name, entry in self.state.items()
            if entry.dtype is not None
            and (entry.kind == "param" or (entry.kind == "buffer" and entry.persistent))
        }


def observe(module: nn.Module) -> dict[str, Entry]:
    """What the module holds, in the reference's terms."""
    owned = vars(module).get("_autoreg_owned", {})
    found: dict[str, Entry] = {}
    for name in NAMES:
        if name in module._parameters:
            value = module._parameters[name]
            found[name] = Entry("param", None if value is None else value.dtype)
        elif name in module._buffers:
            value = module._buffers[name]
            found[name] = Entry(
                "buffer",
                None if value is None else value.dtype,
                persistent=name not in module._non_persistent_buffers_set,
                auto=owned.get(name) == "buffer",
            )
        elif name in module._modules:
            found[name] = Entry("module")
        elif name in vars(module):
            value = vars(module)[name]
            kind = "carried" if owned.get(name) == "carried" else "plain"
            found[name] = Entry(kind, value.dtype if isinstance(value, torch.Tensor) else None)
    return found


# --- the machine --------------------------------------------------------------------------------

names = st.sampled_from(NAMES)
ops = st.one_of(
    st.tuples(st.just("assign"), names, st.sampled_from(VALUES)),
    st.tuples(st.just("delete"), names),
    st.tuples(
        st.just("register"),
        names,
        st.sampled_from(["float", "long", "none"]),
        st.sampled_from(["persistent", "non_persistent"]),
    ),
)


class ContractMachine(RuleBasedStateMachine):
    module: Subject
    reference: Reference

    def __init__(self) -> None:
        super().__init__()
        self._warnings = warnings.catch_warnings()
        self._warnings.__enter__()
        # Rule 6 warns once per class and name; the warning itself is tested in test_grad.py.
        warnings.simplefilter("ignore", autoreg.AutoRegisterWarning)

    def teardown(self) -> None:
        self._warnings.__exit__(None, None, None)

    def build(self) -> tuple[Subject, Reference]:
        cls = PersistentSubject if self.class_persistent else Subject
        reference = Reference(self.class_persistent)
        expected = [reference.apply(op, constructing=True) for op in self.construction]
        module = cls(self.construction)
        assert module.outcomes == expected
        return module, reference

    @initialize(persistent=st.booleans(), construction=st.lists(ops, max_size=6))
    def construct(self, persistent: bool, construction: list[Op]) -> None:
        self.class_persistent = persistent
        self.construction = construction
        self.module, self.reference = self.build()

    @rule(op=ops)
    def operate(self, op: Op) -> None:
        assert apply(self.module, op) == self.reference.apply(op, constructing=False)

    @rule(dtype=st.sampled_from(DTYPES))
    def move(self, dtype: torch.dtype) -> None:
        self.module.to(dtype)
        self.reference.to(dtype)

    @rule()
    def load_into_fresh_instance(self) -> None:
        fresh, fresh_reference = self.build()
        result = fresh.load_state_dict(self.module.state_dict(), strict=False)
        ours, theirs = self.reference.state_dict_keys(), fresh_reference.state_dict_keys()
        assert set(result.missing_keys) == theirs - ours
        assert set(result.unexpected_keys) == ours - theirs

    @rule(how=st.sampled_from(["deepcopy", "pickle"]))
    def copy(self, how: str) -> None:
        held = [*vars(self.module).values(), *self.module._buffers.values()]
        if how == "deepcopy" and any(
            isinstance(value, torch.Tensor) and not value.is_leaf for value in held
        ):
            # torch refuses to deepcopy an autograd result, for nn.Module alike.
            with pytest.raises(RuntimeError, match=r"graph leaves|non-leaf"):
                self.copied(how)
            return
        self.module = self.copied(how)

    def copied(self, how: str) -> Subject:
        if how == "deepcopy":
            return copy.deepcopy(self.module)
        return pickle.loads(pickle.dumps(self.module))  # type: ignore[no-any-return]

    @invariant()
    def matches_the_reference(self) -> None:
        assert observe(self.module) == self.reference.state
        assert set(self.module.state_dict()) == self.reference.state_dict_keys()


ContractMachine.TestCase.settings = settings(
    max_examples=2000,
    stateful_step_count=12,
    deadline=None,
    derandomize=True,  # the same 2,000 sequences in every run; CI must not flake
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_the_contract_matches_its_reference_model = ContractMachine.TestCase
