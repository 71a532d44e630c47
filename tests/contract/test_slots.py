"""Row 7: a name that cannot hold a buffer behaves as in nn.Module; strict raises, warn warns."""

from __future__ import annotations

import pytest
import torch

import autoreg
from tests.support import role


def make(**keywords: bool) -> autoreg.Module:
    class Shadowed(autoreg.Module, **keywords):
        scale = 1.0  # a class-level default
        _limit: torch.Tensor

        def __init__(self) -> None:
            super().__init__()
            self._limit = torch.zeros(1)

        @property
        def limit(self) -> torch.Tensor:
            return self._limit

        @limit.setter
        def limit(self, value: torch.Tensor) -> None:
            self._limit = value

        def helper(self) -> None:
            pass

    return Shadowed()


@pytest.mark.parametrize("keywords", [{}, {"strict": True}], ids=["default", "strict"])
def test_a_property_setter_runs(keywords: dict[str, bool]) -> None:
    """Row 7: a property decides what assigning it means, in every mode; what its setter
    assigns follows the contract (`_limit` is declared: it stays a buffer)."""
    module = make(**keywords)
    module.limit = torch.ones(1)
    assert torch.equal(module._limit, torch.ones(1))
    assert module._buffers.keys() == {"_limit"}


@pytest.mark.parametrize("name", ["scale", "helper", "training"])
def test_a_class_level_name_or_module_internal_stays_a_plain_attribute(name: str) -> None:
    module = make()
    setattr(module, name, torch.ones(1))
    assert name not in module._buffers
    assert role(module, name) == "plain"


@pytest.mark.parametrize("name", ["", "a.b"], ids=["empty", "dotted"])
def test_empty_or_dotted_names_stay_plain(name: str) -> None:
    module = make()
    setattr(module, name, torch.ones(1))
    assert vars(module)[name] is getattr(module, name)
    assert name not in module._buffers


@pytest.mark.parametrize(
    ("name", "where"),
    [
        ("scale", r"is defined on the class \(a class-level float\)"),
        ("helper", r"is defined on the class \(a class-level function\)"),
        ("training", r"is one of nn.Module's internal attributes"),
        ("a.b", r"contains a '\.'"),
    ],
)
def test_strict_raises_and_says_why(name: str, where: str) -> None:
    module = make(strict=True)
    pattern = rf"Tensor\(shape=\(1,\).*\) assigned to Shadowed\.{name} cannot become a buffer: "
    with pytest.raises(autoreg.UnregisteredTensorError, match=pattern + f"'{name}' " + where):
        setattr(module, name, torch.ones(1))


def test_strict_leaves_the_attribute_untouched_when_it_raises() -> None:
    module = make(strict=True)
    with pytest.raises(autoreg.UnregisteredTensorError):
        module.scale = torch.ones(1)
    assert module.scale == 1.0


def test_warn_mode_warns_once_and_points_at_the_fix() -> None:
    module = make(warn=True)
    with pytest.warns(autoreg.AutoRegisterWarning, match=r"Rename the attribute"):
        module.scale = torch.ones(1)
    module.scale = torch.ones(2)  # once per class and name: silent
    assert torch.equal(module.scale, torch.ones(2))


def test_plain_annotation_lets_strict_code_keep_it() -> None:
    class Strict(autoreg.Module, strict=True):
        scale: autoreg.Plain = 1.0  # type: ignore[assignment]

    module = Strict()
    module.scale = torch.ones(1)
    assert "scale" in vars(module)
