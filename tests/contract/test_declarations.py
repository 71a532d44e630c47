"""Rows 5 and 9: annotations declare buffers (and plain attributes), whenever assigned."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Optional

import pytest
import torch
from torch import nn

import autoreg
from tests.contract.annotated_models import Eager
from tests.support import role

if TYPE_CHECKING:
    from collections import OrderedDict as OnlyForTypeCheckers


class Lazy(autoreg.Module):
    """The declarations of ``Eager``, read from strings (``from __future__ import annotations``)."""

    mask: torch.Tensor
    maybe: Optional[torch.Tensor]  # noqa: UP045 - the spelling under test
    union: torch.Tensor | None
    stats: autoreg.Persistent
    scratch: autoreg.NonPersistent
    pinned: autoreg.Plain
    counter: ClassVar[int] = 0
    forward_ref: autoreg.Persistent
    later: LaterAlias
    unresolvable: OnlyForTypeCheckers  # a name that exists only for type checkers


LaterAlias = autoreg.Persistent

CLASSES = [pytest.param(Eager, id="real-annotations"), pytest.param(Lazy, id="string-annotations")]
ROLES = {
    "mask": "non-persistent buffer",
    "maybe": "non-persistent buffer",
    "union": "non-persistent buffer",
    "stats": "persistent buffer",
    "scratch": "non-persistent buffer",
    "forward_ref": "persistent buffer",
    "later": "persistent buffer",
}


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("name", list(ROLES))
def test_declared_names_become_buffers_when_first_assigned_at_runtime(
    cls: type[nn.Module], name: str
) -> None:
    module = cls()  # nothing assigned during construction
    setattr(module, name, torch.zeros(2))
    assert role(module, name) == ROLES[name]


@pytest.mark.parametrize("cls", CLASSES)
def test_plain_is_never_registered_or_moved(cls: type[nn.Module]) -> None:
    module = cls()
    module.pinned = torch.zeros(2)
    module.double()
    assert role(module, "pinned") == "plain"
    assert module.pinned.dtype == torch.float32


def test_plain_is_not_registered_during_construction_either() -> None:
    class Pinned(autoreg.Module):
        lookup: autoreg.Plain

        def __init__(self) -> None:
            super().__init__()
            self.lookup = torch.arange(3)

    module = Pinned().to("meta")
    assert module.lookup.device.type == "cpu"
    assert dict(module.named_buffers()) == {}


@pytest.mark.parametrize("cls", CLASSES)
def test_a_class_var_is_not_a_declaration(cls: type[nn.Module]) -> None:
    module = cls()
    assert "counter" not in type(module).__autoreg__.declarations


def test_an_unresolvable_annotation_is_ignored() -> None:
    module = Lazy()
    module.unresolvable = torch.zeros(1)  # unknown type: an undeclared runtime tensor
    assert role(module, "unresolvable") == "carried"


def test_declarations_are_inherited_and_can_be_undeclared() -> None:
    class Base(autoreg.Module):
        table: torch.Tensor
        other: torch.Tensor

    class Child(Base):
        other: int  # re-annotated with a non-tensor type: no longer declared

    child = Child()
    child.table = torch.zeros(1)
    child.other = torch.zeros(1)
    assert (role(child, "table"), role(child, "other")) == ("non-persistent buffer", "carried")


def test_plain_mixins_declare_but_ordinary_module_bases_do_not() -> None:
    class HasStats:
        stats: autoreg.Persistent

    class Legacy(nn.Module):
        weight_cache: torch.Tensor  # written for TorchScript, describes a plain nn.Module

    class Migrated(autoreg.AutoRegisterMixin, HasStats, Legacy):
        pass

    module = Migrated()
    module.stats = torch.zeros(1)
    module.weight_cache = torch.zeros(1)
    assert role(module, "stats") == "persistent buffer"
    assert role(module, "weight_cache") == "carried"


def test_builtin_annotations_do_not_declare_parameters_as_buffers() -> None:
    class MyLinear(autoreg.AutoRegisterMixin, nn.Linear):
        pass

    assert "weight" not in MyLinear.__autoreg__.declarations
    module = MyLinear(2, 2)
    del module.weight
    with torch.no_grad():  # what prune's forward pre-hook does under no_grad
        module.weight = module.bias.new_ones(2, 2)
    assert "weight" not in module._buffers


def test_an_annotation_is_overridden_by_an_explicit_parameter() -> None:
    class M(autoreg.Module):
        mask: torch.Tensor

    module = M()
    module.mask = nn.Parameter(torch.zeros(1))
    assert dict(module.named_parameters()).keys() == {"mask"}
    assert dict(module.named_buffers()) == {}


def test_a_declared_buffer_registered_in_forward_moves_and_is_saved() -> None:
    class Running(autoreg.Module):
        total: autoreg.Persistent

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.total = x.sum(0) if not hasattr(self, "total") else self.total + x.sum(0)
            return x

    module = Running()
    module(torch.ones(2, 3))
    assert module.state_dict().keys() == {"total"}
    assert module.double().total.dtype == torch.float64


def test_string_annotations_of_a_class_created_by_exec_resolve_in_its_namespace() -> None:
    source = (
        "from __future__ import annotations\n"
        "import torch, autoreg\n"
        "Alias = autoreg.Persistent\n"
        "class Notebook(autoreg.Module):\n"
        "    stats: Alias\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.stats = torch.zeros(1)\n"
    )
    namespace: dict[str, object] = {"__name__": "not_a_module"}
    exec(source, namespace)
    assert namespace["Notebook"]().state_dict().keys() == {"stats"}  # type: ignore[operator]
