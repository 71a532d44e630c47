"""Warn and strict mode cost per assignment what the assignment holds, not the model's size.

Whether a container holds tensors "nothing registers" (row 8's concern) was answered by listing
every parameter and buffer of the assigning module's whole subtree, on every container assignment
in warn and strict mode (1,000 blocks: about 20 ms per step). The work is counted here, not timed:
how many modules an assignment visits, on a small and a large model.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from torch import nn

import autoreg


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.register_buffer("stat", torch.zeros(2))


def _model(blocks: int, **mode: bool) -> nn.Module:
    class Model(autoreg.Module, **mode):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn.ModuleList(Block() for _ in range(blocks))
            self.register_buffer("own", torch.ones(2))
            self.frozen = nn.Parameter(torch.ones(2), requires_grad=False)

    return Model()


@pytest.fixture
def visits(monkeypatch: pytest.MonkeyPatch) -> list[nn.Module]:
    """Every module whose ``named_modules`` runs: the walk of a subtree visits each once."""
    seen: list[nn.Module] = []
    original = nn.Module.named_modules

    def counting(self: nn.Module, *args: object, **kwargs: object) -> Iterator[object]:
        seen.append(self)
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(nn.Module, "named_modules", counting)
    return seen


def _visits_per_assignment(
    model: nn.Module, visits: list[nn.Module], make: object, times: int = 5
) -> int:
    """Visits of the last ``times`` assignments of ``make(model)`` to ``model.cache``."""
    model.cache = make(model)  # type: ignore[operator]  # the first: may warn, may walk
    visits.clear()
    for _ in range(times):
        model.cache = make(model)  # type: ignore[operator]
    return len(visits)


@pytest.mark.filterwarnings("ignore::autoreg.AutoRegisterWarning")
def test_warn_mode_after_its_warning_visits_no_module(visits: list[nn.Module]) -> None:
    """main: 5 assignments of a list of fresh tensors walked the whole model each time, after the
    one warning warn mode gives per class and name."""
    fresh = lambda model: [torch.zeros(2), torch.ones(2)]  # noqa: E731
    small = _visits_per_assignment(_model(4, warn=True), visits, fresh)
    large = _visits_per_assignment(_model(200, warn=True), visits, fresh)
    assert small == large == 0


@pytest.mark.parametrize("mode", [{"warn": True}, {"strict": True}], ids=["warn", "strict"])
@pytest.mark.parametrize(
    "held",
    [
        lambda model: [model.own, model.frozen],  # the module's own buffer, a frozen parameter
        lambda model: [model.blocks[0].lin.weight, {"bias": model.blocks[0].lin.bias}],
        lambda model: (model.frozen, 3, "text"),
    ],
    ids=["own-buffer", "parameters", "a-frozen-parameter"],
)
def test_a_container_of_registered_tensors_costs_the_same_on_any_model(
    visits: list[nn.Module], mode: dict[str, bool], held: object
) -> None:
    """Nothing to warn about or refuse, so every assignment looks again: main listed the whole
    subtree each time. Parameters are registered or meant to be (their type says so; autoreg
    never converts one it carries); a buffer is looked up from the module outwards, until found."""
    small = _visits_per_assignment(_model(4, **mode), visits, held)  # warnings are errors here
    large = _visits_per_assignment(_model(200, **mode), visits, held)
    assert small == large


def test_a_buffer_of_a_child_is_found_and_nothing_said(visits: list[nn.Module]) -> None:
    model = _model(3, strict=True)
    model.stats = [model.blocks[2].stat]  # registered in the subtree: strict accepts it
    model.double()
    # Another module's buffer carried here is converted as a buffer held by two modules: equal,
    # not the same tensor (the contract's identity is within one module).
    assert model.stats[0].dtype == model.blocks[2].stat.dtype == torch.float64
    assert torch.equal(model.stats[0], model.blocks[2].stat)


def test_a_fresh_tensor_is_still_refused_and_reported() -> None:
    model = _model(3, strict=True)
    with pytest.raises(autoreg.UnregisteredTensorError, match=r"holding 1 unregistered tensor"):
        model.cache = [model.own, torch.zeros(1)]
    warned = _model(3, warn=True)
    with pytest.warns(autoreg.AutoRegisterWarning, match=r"holding 1 unregistered tensor"):
        warned.cache = [warned.blocks[1].stat, torch.zeros(1)]
