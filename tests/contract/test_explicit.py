"""Rows 1 and 3: Parameters, nn.Buffers, modules and registered names take nn.Module's own path."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch import nn

import autoreg


class Twin(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(2))
        self.child = nn.Linear(1, 1)
        self.register_buffer("explicit", torch.zeros(2))


class AutoTwin(autoreg.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(2))
        self.child = nn.Linear(1, 1)
        self.register_buffer("explicit", torch.zeros(2))


def outcome(cls: type[nn.Module], action: Callable[[nn.Module], None]) -> object:
    """What ``action`` does to a fresh instance: the exception, or the resulting registries."""
    module = cls()
    try:
        action(module)
    except Exception as error:  # noqa: BLE001 - the point is to compare whatever happens
        return type(error), str(error)
    return (
        sorted(module._parameters),
        sorted(module._buffers),
        sorted(module._non_persistent_buffers_set),
        sorted(module._modules),
        sorted(module.state_dict()),
    )


ACTIONS: dict[str, Callable[[nn.Module], None]] = {
    "parameter": lambda m: setattr(m, "p", nn.Parameter(torch.ones(1))),
    "buffer-non-persistent": lambda m: setattr(m, "b", nn.Buffer(torch.ones(1), persistent=False)),
    "buffer-persistent": lambda m: setattr(m, "b", nn.Buffer(torch.ones(1), persistent=True)),
    "module": lambda m: setattr(m, "sub", nn.ReLU()),
    "tensor-to-buffer": lambda m: setattr(m, "explicit", torch.ones(3)),
    "none-to-buffer": lambda m: setattr(m, "explicit", None),
    "int-to-buffer": lambda m: setattr(m, "explicit", 3),
    "tensor-to-parameter": lambda m: setattr(m, "weight", torch.ones(2)),
    "int-to-parameter": lambda m: setattr(m, "weight", 1),
    "none-to-parameter": lambda m: setattr(m, "weight", None),
    "tensor-to-module": lambda m: setattr(m, "child", torch.ones(1)),
    "none-to-module": lambda m: setattr(m, "child", None),
    "parameter-over-buffer": lambda m: setattr(m, "explicit", nn.Parameter(torch.ones(1))),
    "module-over-parameter": lambda m: setattr(m, "weight", nn.ReLU()),
    "buffer-over-plain-attribute": lambda m: [
        setattr(m, "plain", 1),
        setattr(m, "plain", nn.Buffer(torch.ones(1))),
    ],
    "register-buffer-over-buffer": lambda m: m.register_buffer("explicit", torch.ones(1), False),
    "delete-buffer": lambda m: delattr(m, "explicit"),
    "delete-parameter": lambda m: delattr(m, "weight"),
}


@pytest.mark.parametrize("action", ACTIONS.values(), ids=ACTIONS.keys())
def test_same_outcome_as_nn_module(action: Callable[[nn.Module], None]) -> None:
    assert outcome(AutoTwin, action) == outcome(Twin, action)


def test_the_outcomes_differ_between_actions() -> None:
    """The comparison above is not vacuous: the actions do different things."""
    outcomes = {repr(outcome(Twin, action)) for action in ACTIONS.values()}
    assert len(outcomes) > len(ACTIONS) // 2


def test_parameter_before_module_init_raises_as_in_nn_module() -> None:
    class TooEarly(autoreg.Module):
        def __init__(self) -> None:
            self.w = nn.Parameter(torch.zeros(1))
            super().__init__()

    with pytest.raises(AttributeError, match=r"cannot assign parameters before Module.__init__"):
        TooEarly()


@pytest.mark.parametrize(
    "explicit",
    [
        pytest.param(lambda: nn.Parameter(torch.ones(1)), id="parameter"),
        pytest.param(lambda: nn.Buffer(torch.ones(1), persistent=False), id="buffer"),
        pytest.param(nn.ReLU, id="module"),
    ],
)
def test_an_explicit_value_takes_over_a_carried_name(explicit: Callable[[], object]) -> None:
    module = autoreg.Module()
    module.state = torch.zeros(1)  # carried
    module.state = explicit()
    assert "state" not in vars(module)
    registries = (module._parameters, module._buffers, module._modules)
    assert sum("state" in registry for registry in registries) == 1


def test_an_explicit_buffer_is_no_longer_autoregs_to_forget() -> None:
    class M(autoreg.Module):
        def __init__(self) -> None:
            super().__init__()
            self.table = torch.zeros(1)
            self.table = nn.Buffer(torch.ones(1), persistent=True)

    module = M()
    assert module.state_dict().keys() == {"table"}
    with pytest.raises(TypeError, match=r"cannot assign 'int' as buffer 'table'"):
        module.table = 5


def _getattr_p(self: nn.Module, name: str) -> object:
    return 0 if name == "p" else nn.Module.__getattr__(self, name)


def _getattribute_p(self: nn.Module, name: str) -> object:
    return 0 if name == "p" else object.__getattribute__(self, name)


def _non_leaf() -> nn.Parameter:
    return (nn.Parameter(torch.ones(1)) * 1).as_subclass(nn.Parameter)  # type: ignore[return-value]


# A new parameter is registered by autoreg itself only where register_parameter's checks cannot
# fail (_execute._add_parameter): each of these makes one of them fail, as on the twin.
REGISTER_PARAMETER_CHECKS: dict[str, tuple[dict[str, object], Callable[[nn.Module], None]]] = {
    "method-under-the-name": (
        {"p": lambda self: 1},
        lambda m: setattr(m, "p", nn.Parameter(torch.ones(1))),
    ),
    "getattr-override": (
        {"__getattr__": _getattr_p},
        lambda m: setattr(m, "p", nn.Parameter(torch.ones(1))),
    ),
    "getattribute-override": (
        {"__getattribute__": _getattribute_p},
        lambda m: setattr(m, "p", nn.Parameter(torch.ones(1))),
    ),
    "non-leaf": ({}, lambda m: setattr(m, "p", _non_leaf())),
    "dotted": ({}, lambda m: setattr(m, "a.b", nn.Parameter(torch.ones(1)))),
    "empty": ({}, lambda m: setattr(m, "", nn.Parameter(torch.ones(1)))),
}


@pytest.mark.parametrize(
    ("namespace", "action"),
    REGISTER_PARAMETER_CHECKS.values(),
    ids=REGISTER_PARAMETER_CHECKS.keys(),
)
def test_a_new_parameter_fails_register_parameter_s_checks_as_on_the_twin(
    namespace: dict[str, object], action: Callable[[nn.Module], None]
) -> None:
    twin = type("Twin", (nn.Module,), dict(namespace))
    auto = type("Auto", (autoreg.Module,), dict(namespace))
    expected = outcome(twin, action)
    assert isinstance(expected[0], type)  # the twin raised: the check is not vacuous
    assert issubclass(expected[0], Exception)
    assert outcome(auto, action) == expected


def test_global_parameter_registration_hooks_see_and_may_replace_the_parameter() -> None:
    from torch.nn.modules.module import register_module_parameter_registration_hook

    replacement = nn.Parameter(torch.full((1,), 7.0))
    seen: list[tuple[str, str]] = []

    def hook(module: nn.Module, name: str, param: nn.Parameter) -> nn.Parameter:
        seen.append((type(module).__name__, name))
        return replacement

    module = autoreg.Module()
    handle = register_module_parameter_registration_hook(hook)
    try:
        module.p = nn.Parameter(torch.ones(1))
    finally:
        handle.remove()
    assert seen == [("Module", "p")]
    assert module.p is replacement


@pytest.mark.parametrize("when", ["built", "constructing"])
def test_global_module_registration_hooks_see_and_may_replace_a_new_submodule(when: str) -> None:
    """A submodule under a new name (row 1, replayed without its situation) goes through
    torch's global module registration hooks, as on the twin, in construction and after."""
    from torch.nn.modules.module import register_module_module_registration_hook

    def run(base: type[nn.Module]) -> tuple[list[tuple[str, str]], nn.Module, nn.Module]:
        seen: list[tuple[str, str]] = []
        replacement = nn.Identity()

        def hook(module: nn.Module, name: str, submodule: nn.Module) -> nn.Module:
            seen.append((type(module).__name__, name))
            return replacement

        class Holder(base):  # type: ignore[valid-type, misc]
            def __init__(self) -> None:
                super().__init__()
                if when == "constructing":
                    self.child = nn.Linear(1, 1)

        Holder()  # the class is final: its next instance's submodule takes the replay
        handle = register_module_module_registration_hook(hook)
        try:
            module = Holder()
            if when == "built":
                module.child = nn.Linear(1, 1)
        finally:
            handle.remove()
        return seen, module.child, replacement

    twin_seen, twin_child, twin_replacement = run(nn.Module)
    seen, child, replacement = run(autoreg.Module)
    assert twin_seen == [("Holder", "child")]
    assert twin_child is twin_replacement
    assert seen == twin_seen
    assert child is replacement


def test_a_register_parameter_override_added_after_the_first_instance_is_called() -> None:
    calls: list[str] = []

    class M(autoreg.Module):
        pass

    M().p = nn.Parameter(torch.ones(1))  # the first instance

    def register_parameter(self: nn.Module, name: str, param: nn.Parameter | None) -> None:
        calls.append(name)
        nn.Module.register_parameter(self, name, param)

    M.register_parameter = register_parameter  # type: ignore[method-assign]
    module = M()
    module.q = nn.Parameter(torch.ones(1))
    assert calls == ["q"]
    assert "q" in module._parameters
