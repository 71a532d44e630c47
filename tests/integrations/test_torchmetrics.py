"""torchmetrics: a Metric held by an autoreg module, and a Metric subclass with the mixin.

A ``Metric`` keeps its states (``add_state``) as plain attributes that it converts, resets and
syncs across processes itself. The rule (docs/contract.md, row 4): what a base class that does
not use autoreg assigns - ``Metric.add_state`` - keeps nn.Module's behaviour, so the states stay
Metric's, exactly as on the twin. On main they became buffers: a parent's ``.half()`` converted
them past Metric's dtype guard, and ``DDP(broadcast_buffers=True)`` overwrote each rank's
accumulators with rank 0's at every forward.
"""

from __future__ import annotations

import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torchmetrics")

import torch
from torch import nn
from torchmetrics import Metric
from torchmetrics.regression import MeanSquaredError

import autoreg
from tests import gloo

# --- a Metric held as a submodule ----------------------------------------------------------------


class AutoModel(autoreg.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 1)
        self.mse = MeanSquaredError()
        self.offset = torch.full((1,), 0.5)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = self.lin(x) + self.offset
        self.mse.update(out.detach(), y)
        self.last = out.detach()  # runtime state: carried on autoreg, plain on the twin
        return out


class TwinModel(nn.Module):
    forward = AutoModel.forward

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 1)
        self.mse = MeanSquaredError()
        self.register_buffer("offset", torch.full((1,), 0.5), persistent=False)


def _metric_states(metric: Metric) -> dict[str, tuple[torch.dtype, torch.device]]:
    return {
        name: (getattr(metric, name).dtype, getattr(metric, name).device)
        for name in metric._defaults
    }


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16], ids=["float64", "float16"])
def test_a_metric_held_by_an_autoreg_module_behaves_as_in_the_twin(dtype: torch.dtype) -> None:
    models = {}
    for cls in (AutoModel, TwinModel):
        torch.manual_seed(0)
        model = cls()
        model(torch.randn(3, 4), torch.randn(3, 1))
        model.to(dtype)
        models[cls] = model
    auto, twin = models[AutoModel], models[TwinModel]

    assert (
        [n for n, _ in auto.named_buffers()] == [n for n, _ in twin.named_buffers()] == ["offset"]
    )
    assert auto.state_dict().keys() == twin.state_dict().keys()
    assert _metric_states(auto.mse) == _metric_states(twin.mse)
    assert auto.offset.dtype == twin.offset.dtype == dtype
    assert auto.last.dtype == dtype  # carried; the twin leaves it behind:
    assert twin.last.dtype == torch.float32
    torch.testing.assert_close(auto.mse.compute(), twin.mse.compute(), rtol=0, atol=0)


# --- a Metric subclass with the mixin ------------------------------------------------------------


class AutoSum(autoreg.AutoRegisterMixin, Metric):
    def __init__(self) -> None:
        super().__init__()
        self.add_state("total", default=torch.tensor(0.0), dist_reduce_fx="sum")
        self.add_state("values", default=[], dist_reduce_fx="cat")
        self.scale = torch.tensor(2.0)  # the subclass's own tensor: a buffer

    def update(self, x: torch.Tensor) -> None:
        self.total += x.sum()
        self.values.append(x)

    def compute(self) -> torch.Tensor:
        return self.total * self.scale


class LoggedSum(AutoSum):
    """A model class that overrides __setattr__ (logging, validation): Metric's states, added
    through it, stay Metric's (row 4 is judged by the code that makes the assignment)."""

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)


class TwinSum(Metric):
    update = AutoSum.update
    compute = AutoSum.compute

    def __init__(self) -> None:
        super().__init__()
        self.add_state("total", default=torch.tensor(0.0), dist_reduce_fx="sum")
        self.add_state("values", default=[], dist_reduce_fx="cat")
        self.register_buffer("scale", torch.tensor(2.0), persistent=False)


@pytest.mark.parametrize("auto_cls", [AutoSum, LoggedSum], ids=["mixin", "mixin, __setattr__"])
def test_metric_states_are_not_buffers(auto_cls: type[AutoSum]) -> None:
    auto, twin = auto_cls(), TwinSum()

    assert [n for n, _ in auto.named_buffers()] == [n for n, _ in twin.named_buffers()] == ["scale"]
    assert auto.state_dict().keys() == twin.state_dict().keys()  # main: buffers, but not persistent


@pytest.mark.parametrize(
    ("move", "guarded"),
    [(nn.Module.half, True), (nn.Module.double, True), (lambda m: m.to(torch.float64), False)],
    ids=["half", "double", "to_float64"],
)
@pytest.mark.parametrize("auto_cls", [AutoSum, LoggedSum], ids=["mixin", "mixin, __setattr__"])
def test_a_parents_dtype_move_leaves_the_states_as_the_twin(
    move: Callable[[nn.Module], nn.Module], guarded: bool, auto_cls: type[AutoSum]
) -> None:
    metrics = {}
    for cls in (auto_cls, TwinSum):
        parent = nn.Sequential(cls())
        parent[0].update(torch.ones(3))
        move(parent)
        metrics[cls] = parent[0]
    auto, twin = metrics[auto_cls], metrics[TwinSum]

    # Metric's own guard keeps the states' dtype on .half() / .double(), not on .to(dtype).
    assert (twin.total.dtype == torch.float32) is guarded
    assert auto.total.dtype == twin.total.dtype  # main: converted by .half() / .double()
    assert auto.values[0].dtype == twin.values[0].dtype
    assert auto._defaults["total"].dtype == twin._defaults["total"].dtype
    assert auto.scale.dtype == twin.scale.dtype != torch.float32
    torch.testing.assert_close(auto.compute(), twin.compute(), rtol=0, atol=0)


# --- DDP(broadcast_buffers=True), 2 gloo processes on 127.0.0.1 -----------------------------------

STEPS = 3
DEADLINE = 90.0  # seconds for the whole run, imports included


class Holder(nn.Module):
    def __init__(self, metric: Metric) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 1)
        self.metric = metric

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.metric.update(x)
        return self.lin(x)


def _contribution(rank: int, step: int) -> float:
    return float(10 * rank + step + 1)


def _worker(rank: int, port: int, directory: str) -> None:
    """Accumulate per-rank values through a DDP forward; record what compute() syncs to."""
    from torch.nn.parallel import DistributedDataParallel

    warnings.filterwarnings("ignore", "`broadcast_buffers` is deprecated", FutureWarning)
    result: dict[str, object] = {}
    with gloo.process_group(rank, port):
        try:
            for cls in (AutoSum, TwinSum):
                torch.manual_seed(0)
                ddp = DistributedDataParallel(Holder(cls()), broadcast_buffers=True)
                for step in range(STEPS):
                    ddp(torch.full((1, 4), _contribution(rank, step))).sum().backward()
                result[cls.__name__] = ddp.module.metric.compute().item()
        except Exception:  # noqa: BLE001 - reported to the parent, which fails the test
            result["error"] = traceback.format_exc()
        gloo.report(directory, rank, result)


@pytest.mark.slow
def test_ddp_does_not_overwrite_per_rank_metric_states(tmp_path: Path) -> None:
    reports = gloo.run(_worker, tmp_path, DEADLINE)
    # Each step adds 4 * value on each rank; torchmetrics sums the ranks' totals in compute().
    expected = 2.0 * sum(4 * _contribution(r, s) for r in range(gloo.WORLD) for s in range(STEPS))
    for rank, result in reports.items():
        assert result is not None, f"rank {rank} did not report within {DEADLINE:.0f} s"
        assert "error" not in result, f"rank {rank}:\n{result['error']}"
        assert result["TwinSum"] == expected, f"rank {rank}"
        assert result["AutoSum"] == expected, f"rank {rank}"  # main: rank 0's states broadcast


# --- the attribute audit -------------------------------------------------------------------------


def test_the_states_a_metrics_own_apply_moves_are_not_findings() -> None:
    """Before: a metric's states and their defaults were reported as left behind by .to(),
    though ``Metric._apply`` moves them; the model's own stray next to it still is."""
    model = AutoModel()
    model.mse.update(torch.ones(2), torch.zeros(2))
    assert autoreg.find_unregistered(MeanSquaredError()) == []
    plain = nn.Sequential(MeanSquaredError())
    plain.stray = torch.ones(1)  # a plain attribute of the plain root: left by .to()
    assert [finding.path for finding in autoreg.find_unregistered(plain)] == ["stray"]


class Scored(nn.Module):
    """A metric updated in forward with the model's output, which requires grad (a training
    step's ``self.auroc(logits.softmax(-1), y)``): its list states hold autograd results."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 3)
        from torchmetrics.classification import MulticlassAUROC

        self.auroc = MulticlassAUROC(num_classes=3)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = self.linear(x)
        self.auroc(out.softmax(-1), y)
        return out


def test_a_metric_fed_a_tensor_that_requires_grad_has_no_findings() -> None:
    """``Metric._apply`` moves its states however they were made. Before: the copy that reads
    what it moves refused the states with autograd history (deepcopy does), and both audits
    reported them: ``find_unregistered`` with "could not tell", ``audit_forward`` as state
    stored by torchmetrics' own code, fixed by subclassing autoreg.Module."""
    x, y = torch.randn(6, 4), torch.tensor([0, 1, 2, 0, 1, 2])
    assert autoreg.audit_forward(Scored(), x, y) == []
    model = Scored()
    model(x, y)
    assert model.auroc.preds[0].grad_fn is not None  # guard: the case the copy refused
    assert autoreg.find_unregistered(model) == []
    model.to("meta")  # what the audits say
    assert model.auroc.preds[0].is_meta
    assert model.auroc._forward_cache.is_meta
