"""Persistence (README, Options; rows 9 and 10): annotation > class keyword ``persistent=`` >
default non-persistent."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import autoreg


def persistent_names(module: nn.Module) -> set[str]:
    return set(module.state_dict())


def build(base: type[nn.Module], **keywords: bool) -> nn.Module:
    class Model(base, **keywords):  # type: ignore[misc, valid-type]
        kept: autoreg.Persistent
        dropped: autoreg.NonPersistent
        follows: torch.Tensor

        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(2, 2)
            self.undeclared = torch.zeros(1)
            self.kept = torch.zeros(1)
            self.dropped = torch.zeros(1)
            self.follows = torch.zeros(1)

    return Model()


@pytest.mark.parametrize(
    ("keywords", "expected"),
    [
        pytest.param({}, {"kept"}, id="default"),
        pytest.param({"persistent": False}, {"kept"}, id="persistent=False"),
        pytest.param({"persistent": True}, {"kept", "undeclared", "follows"}, id="persistent=True"),
    ],
)
def test_annotation_beats_keyword_beats_default(
    keywords: dict[str, bool], expected: set[str]
) -> None:
    module = build(autoreg.Module, **keywords)
    assert persistent_names(module) - {"linear.weight", "linear.bias"} == expected
    assert dict(module.named_buffers()).keys() == {"undeclared", "kept", "dropped", "follows"}


def test_the_keyword_is_inherited_and_overridable() -> None:
    class Saved(autoreg.Module, persistent=True):
        pass

    class StillSaved(Saved):
        def __init__(self) -> None:
            super().__init__()
            self.x = torch.zeros(1)

    class NotSaved(Saved, persistent=False):
        def __init__(self) -> None:
            super().__init__()
            self.x = torch.zeros(1)

    assert persistent_names(StillSaved()) == {"x"}
    assert persistent_names(NotSaved()) == set()


def test_migrating_does_not_change_the_checkpoint_format() -> None:
    class Legacy(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(2, 2)
            self.register_buffer("running", torch.zeros(2))  # explicit: stays persistent
            self.mask = torch.ones(2)  # bare attribute: was never saved

    class Migrated(autoreg.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(2, 2)
            self.register_buffer("running", torch.zeros(2))
            self.mask = torch.ones(2)

    old, new = Legacy(), Migrated()
    assert old.state_dict().keys() == new.state_dict().keys()
    new.load_state_dict(old.state_dict(), strict=True)
    old.load_state_dict(new.state_dict(), strict=True)


def test_reassigning_a_buffer_keeps_its_persistence() -> None:
    class M(autoreg.Module, persistent=True):
        quiet: autoreg.NonPersistent

        def __init__(self) -> None:
            super().__init__()
            self.loud = torch.zeros(1)
            self.quiet = torch.zeros(1)

        def forward(self) -> None:
            self.loud = self.loud + 1
            self.quiet = self.quiet + 1

    module = M()
    module()
    assert persistent_names(module) == {"loud"}
    assert torch.equal(module.state_dict()["loud"], torch.ones(1))
