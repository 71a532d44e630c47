"""Rows 5 and 9: annotations declare buffers (and plain attributes), whenever assigned."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Optional

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


_IMPL = """\
from __future__ import annotations

import torch

import autoreg

Stats = autoreg.Persistent


class Model(autoreg.Module):
    __module__ = "{package}"  # its public path, as libraries give their classes
    stats: Stats

    def __init__(self):
        super().__init__()
        self.stats = torch.zeros(1)
"""


@pytest.mark.parametrize("factory", [False, True], ids=["class statement", "made by a function"])
def test_string_annotations_resolve_where_the_class_was_written_whatever_its_module_says(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, factory: bool
) -> None:
    """A class whose ``__module__`` names its package (which does not import what the annotation
    names): the annotation resolves in the namespace its class statement ran in. Before: it
    resolved in the package's, failed, and the persistent buffer was silently left out of
    ``state_dict``."""
    package = f"pub_{int(factory)}"
    source = _IMPL.format(package=package)
    if factory:  # the class statement inside a function, called once
        body = source[source.index("class Model") :]
        source = (
            source[: source.index("class Model")]
            + "def make():\n"
            + "".join(f"    {line}\n" if line else "\n" for line in body.splitlines())
            + "    return Model\n\n\nModel = make()\n"
        )
    (tmp_path / package).mkdir()
    (tmp_path / package / "_impl.py").write_text(source)
    (tmp_path / package / "__init__.py").write_text(f"from {package}._impl import Model\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = __import__(package).Model()
    assert module.state_dict().keys() == {"stats"}


def test_a_string_annotation_naming_a_local_of_the_function_with_the_class_resolves() -> None:
    """``import autoreg as ar`` inside the factory that defines the class: under ``from
    __future__ import annotations`` the annotation is the string ``"ar.Persistent"``, whose name
    is the function's. Before: only the function's globals were read, the annotation did not
    resolve, and the buffer was silently left out of ``state_dict`` (the twin saves it)."""
    import autoreg as ar

    class Local(ar.Module):
        running: ar.Persistent

        def __init__(self) -> None:
            super().__init__()
            self.running = torch.zeros(2)

    assert list(Local().state_dict()) == ["running"]


def test_string_annotations_of_a_class_types_new_class_made_resolve_where_it_was_called() -> None:
    """``types.new_class`` runs in Python's own module: the namespace is its caller's."""
    import types

    source = (
        "from __future__ import annotations\n"
        "import types, torch, autoreg\n"
        "Alias = autoreg.Persistent\n"
        "def body(ns):\n"
        "    ns['__annotations__'] = {'stats': 'Alias'}\n"
        "    def __init__(self):\n"
        "        autoreg.Module.__init__(self)\n"
        "        self.stats = torch.zeros(1)\n"
        "    ns['__init__'] = __init__\n"
        "Made = types.new_class('Made', (autoreg.Module,), exec_body=body)\n"
    )
    namespace: dict[str, object] = {"__name__": "not_a_module", "types": types}
    exec(source, namespace)
    assert namespace["Made"]().state_dict().keys() == {"stats"}  # type: ignore[operator]


def test_string_annotations_of_a_class_a_base_makes_in_its_own_init_resolve_there() -> None:
    """The class statement runs in the base's ``__init__`` (a per-instance subclass): that frame
    is where the annotation was written, though the base's code is in the new class's MRO."""
    source = (
        "from __future__ import annotations\n"
        "import torch, autoreg\n"
        "Kept = autoreg.Persistent\n"
        "class Maker(autoreg.Module):\n"
        "    def __init__(self, make=True):\n"
        "        super().__init__()\n"
        "        if make:\n"
        "            class Made(Maker):\n"
        "                stats: Kept\n"
        "                def __init__(self):\n"
        "                    super().__init__(make=False)\n"
        "                    self.stats = torch.zeros(1)\n"
        "            self.made = Made()\n"
    )
    namespace: dict[str, object] = {"__name__": "maker_module"}
    exec(source, namespace)
    assert namespace["Maker"]().made.state_dict().keys() == {"stats"}  # type: ignore[operator]


def test_string_annotations_resolve_past_a_python_metaclass_between_statement_and_hook() -> None:
    """A metaclass written in Python (``__new__`` and ``__call__`` frames of its own, here in a
    namespace of its own) stands between the class statement and ``__init_subclass__``."""
    meta_namespace: dict[str, object] = {"__name__": "meta_module"}
    exec(
        "import abc\n"
        "class Meta(abc.ABCMeta):\n"
        "    def __new__(mcls, name, bases, namespace, **kwargs):\n"
        "        return super().__new__(mcls, name, bases, namespace, **kwargs)\n",
        meta_namespace,
    )
    source = (
        "from __future__ import annotations\n"
        "import torch, autoreg\n"
        "Kept = autoreg.Persistent\n"
        "class Model(autoreg.Module, metaclass=Meta):\n"
        "    stats: Kept\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.stats = torch.zeros(1)\n"
    )
    namespace: dict[str, object] = {"__name__": "model_module", "Meta": meta_namespace["Meta"]}
    exec(source, namespace)
    assert namespace["Model"]().state_dict().keys() == {"stats"}  # type: ignore[operator]
