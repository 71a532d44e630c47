"""DDP, FSDP1, FSDP2 and torch.distributed.checkpoint on CPU: gloo, 2 processes on 127.0.0.1.

Spawning workers costs seconds (each imports torch), so the scenarios run in one pair of
processes, in order (``tests/gloo.py``), and each test checks its scenario's outcome. Everything
is bounded in time: collectives time out after ``gloo.COLLECTIVE_TIMEOUT``, and the workers are
killed after ``DEADLINE``, which fails the tests of every scenario that did not finish.

A scenario that fails on a rank stops that rank (the other rank then fails on its next collective
after the timeout): later scenarios are reported as not run, naming the failed one.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torch import nn

import autoreg
from tests import gloo

pytestmark = pytest.mark.slow

DEADLINE = 120.0  # seconds for the whole run, imports included
# FSDP2 on CPU / gloo: torch 2.5 has no public fully_shard, 2.6 fails (Stream.record_event), and
# 2.7 and 2.8 give parameter gradients that differ from the unsharded model's (the loss is equal).
FSDP2_ON_CPU = "2.9"
REQUIRES_FSDP2 = pytest.mark.requires_torch(
    FSDP2_ON_CPU, reason="FSDP2 (fully_shard) does not run correctly on CPU / gloo before 2.9"
)


# --- models --------------------------------------------------------------------------------------


class AutoRunning(autoreg.Module):
    """A construction-time buffer updated in forward, as BatchNorm's running stats are."""

    def __init__(self, rank: int) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.running = torch.full((4,), float(rank))  # differs per rank until DDP syncs it

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.seen = self.running.clone()  # what this forward saw: carried
        self.running.mul_(0.5).add_(x.mean(0))
        return self.lin(x)


class TwinRunning(nn.Module):
    forward = AutoRunning.forward

    def __init__(self, rank: int) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("running", torch.full((4,), float(rank)), persistent=False)


class AutoHistory(autoreg.Module):
    """Per-rank runtime state shaped by the local batch, next to a buffer DDP broadcasts."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 1)
        self.scale = torch.ones(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if hasattr(self, "history"):
            self.history = torch.cat([self.history, x.detach()])
        else:
            self.history = x.detach().clone()
        return self.lin(x * self.scale)


class AutoLate(autoreg.Module):
    """No buffer at wrap time: a declared buffer and a runtime tensor appear in forward."""

    count: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not hasattr(self, "count"):
            self.count = torch.zeros((), dtype=torch.long)
        self.count = self.count + x.shape[0]
        self.cache = x.detach()
        return self.lin(x)


class TwinLate(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not hasattr(self, "count"):
            self.register_buffer("count", torch.zeros((), dtype=torch.long), persistent=False)
        self.count = self.count + x.shape[0]
        self.cache = x.detach()
        return self.lin(x)


class AutoBlock(autoreg.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.scale = torch.linspace(0.5, 1.5, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.last = x.detach()  # carried
        return torch.relu(self.lin(x)) * self.scale


class AutoStack(autoreg.Module):
    stats: autoreg.Persistent  # saved by torch.distributed.checkpoint

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([AutoBlock(), AutoBlock()])
        self.head = nn.Linear(8, 1)
        self.mask = torch.tensor([1.0, 0.0] * 4)
        self.stats = torch.arange(8.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(x * self.mask + self.stats)


class StrictPositions(autoreg.Module, strict=True):
    """A parameter of the model's own beside a layer's, and a declared buffer: FSDP1
    (``FullyShardedDataParallel``) sets a view of its flat parameter under each name."""

    table: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.pos = nn.Parameter(torch.linspace(-1.0, 1.0, 4))
        self.table = torch.arange(4.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x + self.pos) * self.table


# --- scenarios (run in each worker) --------------------------------------------------------------


def _gather(tensor: torch.Tensor) -> list[torch.Tensor]:
    gathered = [torch.empty_like(tensor) for _ in range(gloo.WORLD)]
    dist.all_gather(gathered, tensor.contiguous())
    return gathered


def _assert_same_on_all_ranks(tensor: torch.Tensor, what: str) -> None:
    first, *others = _gather(tensor)
    for other in others:
        assert torch.equal(first, other), f"{what} differs across ranks: {first} vs {other}"


def _ddp_broadcasts_construction_buffers(rank: int, _: Path) -> None:
    from torch.nn.parallel import DistributedDataParallel

    for cls in (AutoRunning, TwinRunning):
        torch.manual_seed(0)
        model = cls(rank)
        assert "running" in model._buffers, cls.__name__
        ddp = DistributedDataParallel(model, broadcast_buffers=True)
        assert torch.equal(model.running, torch.zeros(4)), "wrapping syncs rank 0's buffers"
        for step in range(3):
            x = torch.full((2, 4), float(rank + 1 + step))
            ddp(x).sum().backward()
            _assert_same_on_all_ranks(model.seen, f"{cls.__name__}: buffer seen at step {step}")
            mine, other = _gather(model.running)[rank], _gather(model.running)[1 - rank]
            assert not torch.equal(mine, other), "the local update differs: the check is real"
        assert "seen" not in model._buffers


def _runtime_state_stays_per_rank(rank: int, _: Path) -> None:
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(0)
    model = AutoHistory()
    ddp = DistributedDataParallel(model, broadcast_buffers=True)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
    inputs = []
    for step in range(3):
        x = torch.full((2 + rank, 4), float(10 * rank + step))  # uneven batches per rank
        inputs.append(x)
        optimizer.zero_grad()
        ddp(x).sum().backward()
        optimizer.step()
        assert ddp.will_sync_module_buffers(), "DDP broadcasts buffers at every forward"

    assert "history" not in model._buffers
    assert model.history.shape == (3 * (2 + rank), 4)
    assert torch.equal(model.history, torch.cat(inputs)), "the runtime state is this rank's own"
    for name, parameter in model.named_parameters():
        _assert_same_on_all_ranks(parameter.detach(), f"parameter {name}")


def _no_buffers_at_wrap_time(rank: int, _: Path) -> None:
    from torch.nn.parallel import DistributedDataParallel

    for cls in (AutoLate, TwinLate):
        torch.manual_seed(0)
        model = cls()
        assert not list(model.buffers())
        ddp = DistributedDataParallel(model, broadcast_buffers=True)
        for step in range(3):
            ddp(torch.full((2 + rank, 4), float(step))).sum().backward()
        assert not ddp.will_sync_module_buffers(), cls.__name__
        assert list(model._buffers) == ["count"], cls.__name__
        assert model.count.item() == 3 * (2 + rank), f"{cls.__name__}: never synced, as nn.Module"
        assert model.cache.shape == (2 + rank, 4)
        for name, parameter in model.named_parameters():
            _assert_same_on_all_ranks(parameter.detach(), f"{cls.__name__} parameter {name}")


def _shard(model: AutoStack) -> AutoStack:
    from torch.distributed.fsdp import fully_shard

    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    return model


def _fsdp2_forward_and_backward(rank: int, _: Path) -> None:
    from torch.distributed.tensor import DTensor

    torch.manual_seed(0)
    reference = AutoStack()
    torch.manual_seed(0)
    model = _shard(AutoStack())
    x = torch.randn(3 + rank, 8, generator=torch.Generator().manual_seed(rank))

    loss = model(x).sum()
    loss.backward()
    reference_loss = reference(x).sum()
    reference_loss.backward()

    torch.testing.assert_close(loss, reference_loss)
    assert [n for n, _ in model.named_buffers()] == [n for n, _ in reference.named_buffers()]
    for name, buffer in model.named_buffers():
        assert type(buffer) is torch.Tensor, f"buffer {name} is neither sharded nor wrapped"
    assert model.blocks[1].last.shape == (3 + rank, 8)  # carried, per rank
    assert "last" not in model.blocks[1]._buffers
    for (name, parameter), (_, expected) in zip(
        model.named_parameters(), reference.named_parameters(), strict=True
    ):
        assert isinstance(parameter, DTensor), name
        grad = expected.grad.clone()
        dist.all_reduce(grad)
        torch.testing.assert_close(parameter.grad.full_tensor(), grad / gloo.WORLD, msg=name)


class PlainBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.mask = torch.ones(8)  # a stray


def _fsdp2_audit(rank: int, _: Path) -> None:
    """The audit of a sharded model reports its strays with nn.Module's fix: FSDP's own
    ``_apply`` reshards and converts no plain tensor, and a deep copy of an FSDP module raises
    (before: each fix said the class's ``_apply`` might move it, the copy having failed)."""
    from torch.distributed.fsdp import fully_shard

    model = nn.Sequential(PlainBlock(), PlainBlock())
    for block in model:
        fully_shard(block)
    fully_shard(model)
    findings = autoreg.find_unregistered(model)
    assert [finding.path for finding in findings] == ["0.mask", "1.mask"]
    assert all("_apply" not in finding.fix for finding in findings), findings[0].fix


def _checkpoint_round_trip(rank: int, directory: Path) -> None:
    import torch.distributed.checkpoint as dcp

    torch.manual_seed(0)
    model = _shard(AutoStack())
    with torch.no_grad():
        model.stats.mul_(3.0).add_(0.25)
    saved = {key: _full(value) for key, value in model.state_dict().items()}
    assert "stats" in saved
    assert "mask" not in saved  # non-persistent, as by default
    dcp.save(model.state_dict(), checkpoint_id=directory / "ckpt")

    torch.manual_seed(1)
    fresh = _shard(AutoStack())
    state = fresh.state_dict()
    dcp.load(state, checkpoint_id=directory / "ckpt")
    fresh.load_state_dict(state)

    loaded = {key: _full(value) for key, value in fresh.state_dict().items()}
    assert list(loaded) == list(saved)
    for key in saved:
        assert torch.equal(loaded[key], saved[key]), key
    assert fresh._buffers["stats"] is fresh.stats


def _fsdp1_forward_and_backward(rank: int, _: Path) -> None:
    """FSDP1's views of its flat parameter are torch's assignments (row 4): a strict model can be
    wrapped, and computes what it computes unwrapped."""
    from torch.distributed.fsdp import FullyShardedDataParallel

    torch.manual_seed(0)
    reference = StrictPositions()
    torch.manual_seed(0)
    model = FullyShardedDataParallel(StrictPositions(), device_id=torch.device("cpu"))
    x = torch.randn(3 + rank, 4, generator=torch.Generator().manual_seed(rank))
    loss = model(x).sum()
    loss.backward()
    torch.testing.assert_close(loss, reference(x).sum())
    assert [n for n, _ in model.module.named_buffers()] == ["table"]


def _full(tensor: torch.Tensor) -> torch.Tensor:
    from torch.distributed.tensor import DTensor

    return tensor.full_tensor() if isinstance(tensor, DTensor) else tensor.detach().clone()


SCENARIOS: dict[str, Callable[[int, Path], None]] = {
    "ddp_broadcast": _ddp_broadcasts_construction_buffers,
    "ddp_runtime_state": _runtime_state_stays_per_rank,
    "ddp_no_buffers_at_wrap": _no_buffers_at_wrap_time,
    "fsdp2": _fsdp2_forward_and_backward,
    "dcp": _checkpoint_round_trip,
    "fsdp1_strict": _fsdp1_forward_and_backward,
    "fsdp2_audit": _fsdp2_audit,
}
if torch.__version__ < FSDP2_ON_CPU:  # their tests skip (REQUIRES_FSDP2); the workers skip them too
    del SCENARIOS["fsdp2"], SCENARIOS["fsdp2_audit"], SCENARIOS["dcp"]


def _worker(rank: int, port: int, directory: str) -> None:
    """Run every scenario in order; report each outcome as it finishes, and stop at a failure."""
    outcomes: dict[str, str | None] = {}
    with gloo.process_group(rank, port):
        for name, scenario in SCENARIOS.items():
            try:
                scenario(rank, Path(directory))
                dist.barrier()
            except Exception:
                outcomes[name] = traceback.format_exc()
                gloo.report(directory, rank, outcomes)
                raise  # leaves the group without waiting for the other rank
            outcomes[name] = None
            gloo.report(directory, rank, outcomes)


# --- the tests (in the pytest process) -----------------------------------------------------------


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[int, dict[str, str | None]]:
    """Run the scenarios in 2 spawned workers; per rank, each finished scenario's traceback."""
    reports = gloo.run(_worker, tmp_path_factory.mktemp("distributed"), DEADLINE)
    return {rank: report or {} for rank, report in reports.items()}


def _check(outcomes: dict[int, dict[str, str | None]], scenario: str) -> None:
    for rank, finished in outcomes.items():
        if scenario not in finished:
            failed = [name for name, error in finished.items() if error]
            why = f"{failed[0]} failed first" if failed else f"timed out after {DEADLINE:.0f} s"
            pytest.fail(f"rank {rank} did not run scenario {scenario!r}: {why}")
        if finished[scenario] is not None:
            pytest.fail(f"rank {rank}, scenario {scenario!r}:\n{finished[scenario]}")


def test_ddp_broadcasts_construction_time_buffers_from_rank_0(outcomes: dict) -> None:
    _check(outcomes, "ddp_broadcast")


def test_ddp_never_overwrites_per_rank_runtime_state(outcomes: dict) -> None:
    _check(outcomes, "ddp_runtime_state")


def test_ddp_module_without_buffers_at_wrap_time(outcomes: dict) -> None:
    _check(outcomes, "ddp_no_buffers_at_wrap")


@REQUIRES_FSDP2
def test_fsdp2_fully_shard_forward_and_backward(outcomes: dict) -> None:
    _check(outcomes, "fsdp2")


@REQUIRES_FSDP2
def test_the_audit_of_an_fsdp2_model_reports_its_strays_with_nn_modules_fix(outcomes: dict) -> None:
    _check(outcomes, "fsdp2_audit")


@REQUIRES_FSDP2
def test_distributed_checkpoint_round_trips_auto_registered_buffers(outcomes: dict) -> None:
    _check(outcomes, "dcp")


def test_fsdp1_sets_its_parameter_views_on_a_strict_model(outcomes: dict) -> None:
    _check(outcomes, "fsdp1_strict")


def test_a_failing_scenario_is_reported() -> None:
    """The harness can fail: a missing or failed scenario fails its test with the reason."""
    with pytest.raises(pytest.fail.Exception, match="did not run scenario 'x': y failed first"):
        _check({0: {"y": "Traceback ..."}}, "x")
    with pytest.raises(pytest.fail.Exception, match="scenario 'y':\nTraceback"):
        _check({0: {"y": "Traceback ..."}}, "y")
