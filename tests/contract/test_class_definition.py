"""Class keywords (README, Options): wrong use fails when the class is created; AUTOREG_MODE is
validated and applied."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import autoreg
from autoreg._config import Mode


def test_the_mixin_after_nn_module_is_refused() -> None:
    with pytest.raises(autoreg.ClassDefinitionError) as caught:

        class Wrong(nn.Linear, autoreg.AutoRegisterMixin):
            pass

    assert str(caught.value) == (
        "class Wrong lists nn.Module before autoreg.AutoRegisterMixin in its bases, so "
        "nn.Module.__setattr__ runs first and the mixin never sees an assignment.\n"
        "Put the mixin first:\n"
        "    class Wrong(autoreg.AutoRegisterMixin, torch.nn.modules.linear.Linear): ..."
    )
    assert isinstance(caught.value, TypeError)


def test_the_mixin_without_nn_module_is_refused() -> None:
    with pytest.raises(
        autoreg.ClassDefinitionError, match=r"class Lonely uses .* not an nn\.Module"
    ):

        class Lonely(autoreg.AutoRegisterMixin):
            pass


def test_unknown_class_keywords_are_refused() -> None:
    with pytest.raises(
        autoreg.ClassDefinitionError,
        match=r"class Typo got the unknown class keyword\(s\) strcit=\.\n"
        r"autoreg's class keywords are persistent=, strict= and warn=",
    ):

        class Typo(autoreg.Module, strcit=True):  # type: ignore[call-arg]
            pass


def test_keywords_of_other_bases_still_reach_them() -> None:
    class Tagged:
        def __init_subclass__(cls, *, tag: str = "", **kwargs: object) -> None:
            super().__init_subclass__(**kwargs)
            cls.tag = tag  # type: ignore[attr-defined]

    class Model(autoreg.AutoRegisterMixin, Tagged, nn.Module, tag="v2", persistent=True):
        pass

    assert Model.tag == "v2"  # type: ignore[attr-defined]
    assert Model.__autoreg__.persistent


def test_strict_and_warn_together_are_refused() -> None:
    with pytest.raises(autoreg.ClassDefinitionError, match=r"sets both strict=True and warn=True"):

        class Both(autoreg.Module, strict=True, warn=True):
            pass


@pytest.mark.parametrize("keyword", ["persistent", "strict", "warn"])
def test_keywords_must_be_booleans(keyword: str) -> None:
    with pytest.raises(
        autoreg.ClassDefinitionError,
        match=rf"class Bad: the class keyword {keyword}= must be True or False, got 'yes'",
    ):
        type("Bad", (autoreg.Module,), {}, **{keyword: "yes"})


@pytest.mark.parametrize(
    ("parent", "child", "expected"),
    [
        pytest.param({}, {}, Mode.REGISTER, id="default"),
        pytest.param({"strict": True}, {}, Mode.STRICT, id="inherit-strict"),
        pytest.param({"warn": True}, {}, Mode.WARN, id="inherit-warn"),
        pytest.param({"strict": True}, {"strict": False}, Mode.REGISTER, id="strict-off"),
        pytest.param({"warn": True}, {"warn": False}, Mode.REGISTER, id="warn-off"),
        pytest.param({"strict": True}, {"warn": True}, Mode.WARN, id="strict-to-warn"),
        pytest.param({"warn": True}, {"strict": False}, Mode.WARN, id="strict-off-keeps-warn"),
    ],
)
def test_modes_are_inherited_and_overridable(
    parent: dict[str, bool], child: dict[str, bool], expected: Mode
) -> None:
    Parent = type("Parent", (autoreg.Module,), {}, **parent)
    Child = type("Child", (Parent,), {}, **child)
    assert Child.__autoreg__.mode is expected


@pytest.mark.parametrize(
    ("environment", "keywords", "expected"),
    [
        pytest.param("strict", {}, Mode.STRICT, id="strict-over-default"),
        pytest.param("register", {"strict": True}, Mode.REGISTER, id="register-over-strict"),
        pytest.param("warn", {"strict": True}, Mode.WARN, id="warn-over-strict"),
        pytest.param("", {"warn": True}, Mode.WARN, id="empty-is-unset"),
    ],
)
def test_autoreg_mode_overrides_every_class(
    monkeypatch: pytest.MonkeyPatch, environment: str, keywords: dict[str, bool], expected: Mode
) -> None:
    monkeypatch.setenv("AUTOREG_MODE", environment)
    cls = type("Configured", (autoreg.Module,), {}, **keywords)
    assert cls.__autoreg__.mode is expected


def test_autoreg_mode_strict_names_the_variable_in_the_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AUTOREG_MODE", "strict")

    class Library(autoreg.Module):
        pass

    with pytest.raises(
        autoreg.UnregisteredTensorError, match=r"Library is strict \(AUTOREG_MODE=strict\)"
    ):
        Library().x = torch.zeros(1)


def test_a_bad_autoreg_mode_lists_the_valid_values_and_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AUTOREG_MODE", "Strict!")
    with pytest.raises(autoreg.ConfigurationError) as caught:

        class Any(autoreg.Module):
            pass

    assert str(caught.value) == (
        "AUTOREG_MODE='Strict!' is not a mode autoreg knows. "
        "Valid values: 'register', 'warn', 'strict'. Leave it unset (or empty) to use each class's "
        "own keywords; the default is 'register'."
    )
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, autoreg.AutoRegisterError)


class StrictBase(autoreg.Module, strict=True):
    pass


class PersistentBase(autoreg.Module, persistent=True):
    pass


class WarnBase(autoreg.Module, warn=True):
    pass


@pytest.mark.parametrize(
    "bases",
    [(StrictBase, PersistentBase), (PersistentBase, StrictBase)],
    ids=["strict-first", "persistent-first"],
)
def test_each_keyword_comes_from_the_nearest_base_that_set_it(bases: tuple[type, ...]) -> None:
    class Both(*bases):  # type: ignore[misc]
        pass

    assert Both.__autoreg__.mode is Mode.STRICT
    assert Both.__autoreg__.persistent


def test_between_two_bases_the_nearer_mode_wins_and_the_own_keyword_over_both() -> None:
    class StrictFirst(StrictBase, WarnBase):
        pass

    class WarnFirst(WarnBase, StrictBase):
        pass

    class Own(StrictBase, warn=True):
        pass

    assert StrictFirst.__autoreg__.mode is Mode.STRICT
    assert WarnFirst.__autoreg__.mode is Mode.WARN
    assert Own.__autoreg__.mode is Mode.WARN


def test_strict_errors_name_the_class_that_made_it_strict() -> None:
    class Child(PersistentBase, StrictBase):
        pass

    with pytest.raises(
        autoreg.UnregisteredTensorError, match=r"Child is strict \(class StrictBase\(\.\.\., strict"
    ):
        Child().table = torch.zeros(1)


def test_a_type_error_of_a_cooperating_base_is_its_own() -> None:
    class Versioned:
        def __init_subclass__(cls, *, version: int = 0, **kwargs: object) -> None:
            super().__init_subclass__(**kwargs)
            if version < 1:
                raise TypeError(f"{cls.__name__}: version must be >= 1, got {version}")

    with pytest.raises(TypeError, match=r"^Old: version must be >= 1, got 0$") as caught:

        class Old(autoreg.AutoRegisterMixin, Versioned, nn.Module, version=0):
            pass

    assert not isinstance(caught.value, autoreg.ClassDefinitionError)


class _Registry:
    """A plain mixin whose ``__init_subclass__`` forgets ``super().__init_subclass__()``: the
    registry idiom, harmless on nn.Module."""

    classes: list[type] = []

    def __init_subclass__(cls, **kwargs: object) -> None:
        _Registry.classes.append(cls)


class _Recorded(autoreg.Module):
    pass


@pytest.mark.parametrize(
    "after", [autoreg.Module, _Recorded], ids=["autoreg.Module", "a recorded autoreg class"]
)
def test_a_base_that_hides_the_class_statement_from_autoreg_is_refused_at_the_first_assignment(
    after: type[nn.Module],
) -> None:
    """Before: the class ran on its base's record: its annotations, class keywords and
    construction went unseen, and a tensor assigned in ``__init__`` was carried, silently."""

    class Net(_Registry, after):  # type: ignore[misc, valid-type]
        table: autoreg.Persistent

        def __init__(self) -> None:
            super().__init__()
            self.table = torch.ones(2)

    with pytest.raises(autoreg.ClassDefinitionError) as caught:
        Net()
    assert str(caught.value) == (
        "autoreg never saw the class statement of Net: _Registry.__init_subclass__ does not call "
        "super().__init_subclass__(**kwargs), so Net's annotations, class keywords and "
        "construction methods are unknown to autoreg.\n"
        "Call it at the end of _Registry.__init_subclass__:\n"
        "    super().__init_subclass__(**kwargs)"
    )


def test_a_base_that_calls_super_in_init_subclass_is_seen() -> None:
    class Chained:
        def __init_subclass__(cls, **kwargs: object) -> None:
            super().__init_subclass__(**kwargs)

    class Net(Chained, autoreg.Module):
        table: autoreg.Persistent

        def __init__(self) -> None:
            super().__init__()
            self.table = torch.ones(2)

    assert list(Net().state_dict()) == ["table"]
