"""How the forward audit tells the model's device from the default one while both are the CPU.

The code says it: ``device=x.device``, ``x.new_zeros``, ``.to(x)``, ``.type_as(x)``, ``.cuda()``
and ``device="cuda"`` put a tensor where the model is; no ``device=``, ``device="cpu"``, a device
a module keeps from its constructor, ``.cpu()`` and ``.numpy()`` leave it on (or bring it to) the
CPU. Autocast regions, checkpointed blocks run again by backward, parametrizations and a class's
own ``to()`` run as they do without the audit.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

import autoreg
from tests.audit.support import line_of

DIM = 4


class Base(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(DIM, DIM)


class Followers(Base):
    """Every way of making a tensor where the model is: clean."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        y = y + torch.ones(DIM, device=x.device, dtype=x.dtype)
        y = y + x.new_zeros(DIM) + torch.zeros_like(x)
        y = y + torch.arange(DIM).to(x) + torch.arange(DIM).to(x.device).to(x.dtype)
        y = y + torch.full((DIM,), 2.0).type_as(x)
        y = y + torch.tensor([1.0] * DIM, device=y.device, dtype=y.dtype)
        device = x.device  # kept in a local, passed on
        return y + torch.linspace(0, 1, DIM, device=device, dtype=y.dtype)


class Accelerators(Base):
    """Code written for a GPU: where the model is on a GPU, its tensors are too."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x) + torch.ones(DIM, device="cuda", dtype=x.dtype)
        return y + torch.ones(DIM, dtype=x.dtype).cuda()


def test_every_way_of_making_a_tensor_where_the_model_is_is_clean() -> None:
    assert autoreg.audit_forward(Followers(), torch.ones(2, DIM)) == []


def test_code_written_for_a_gpu_runs_and_is_clean() -> None:
    assert autoreg.audit_forward(Accelerators(), torch.ones(2, DIM)) == []


class LeftBehind(Base):
    def __init__(self) -> None:
        super().__init__()
        self.device = torch.device("cpu")  # the device it was built on

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        a = torch.ones(DIM, device="cpu")
        b = torch.ones(DIM, device=self.device)
        c = y.cpu() * 2
        d = torch.from_numpy(y.detach().cpu().numpy())
        e = y.to(self.device)
        f = torch.ones(DIM).to(self.device)
        return y + a + b + c + d + e + f


LINES = {
    text: line_of(LeftBehind, text)
    for text in (
        'a = torch.ones(DIM, device="cpu")',
        "b = torch.ones(DIM, device=self.device)",
        "c = y.cpu() * 2",
        "d = torch.from_numpy(y.detach().cpu().numpy())",
        "e = y.to(self.device)",
        "f = torch.ones(DIM).to(self.device)",
    )
}


def test_the_cpu_said_in_the_code_is_the_default_device_with_the_fix_for_each() -> None:
    findings = autoreg.audit_forward(LeftBehind(), torch.ones(2, DIM), low_precision=None)
    by_line = {f.lineno: f for f in findings}
    assert sorted(by_line) == sorted(LINES.values())
    assert [f.kind for f in findings] == ["device"] * 6
    fixes = [by_line[line].fix for line in LINES.values()]
    assert fixes[0] == "device=y.device (or .to(y))"
    assert fixes[1] == (
        "LeftBehind.device is the device the model was built on, which .to() does not change: "
        "device=x.device"
    )
    assert (
        fixes[2]
        == fixes[3]
        == ("keep it on the model's device: no .cpu() / .numpy() round trip, or .to(x)")
    )


class Numpy(Base):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        peak = float(np.abs(y.detach().numpy()).max())  # CUDA raises: .cpu() first
        return y / peak


def test_numpy_of_a_tensor_on_the_models_device_is_a_device_finding() -> None:
    [finding] = autoreg.audit_forward(Numpy(), torch.ones(2, DIM), low_precision=None)
    assert (finding.kind, finding.lineno) == ("device", line_of(Numpy, "peak = float(np.abs("))
    assert finding.op == "numpy"
    assert finding.fix == ".cpu() before .numpy(): .numpy() refuses a tensor on a GPU"


class Autocast(Base):
    """A float32 island as transformers' rotary embeddings write it, and an autocast region."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type=x.device.type, enabled=False):
            angles = x.float() * torch.arange(DIM, device=x.device).float()
        with torch.autocast(device_type=x.device.type, dtype=torch.bfloat16):
            y = self.linear(x)
        return y.to(x.dtype) + angles.cos().to(x.dtype)


def test_autocast_regions_run_as_they_do_without_the_audit() -> None:
    assert autoreg.audit_forward(Autocast(), torch.ones(2, DIM)) == []


class Checkpointed(Base):
    def block(self, x: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(DIM, device=x.device)
        return self.linear(x) * positions

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return checkpoint(self.block, x, use_reentrant=False)


def backward_step(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    loss = model(x).sum()
    loss.backward()
    return loss


def test_a_checkpointed_block_run_again_by_backward_is_judged_as_in_forward() -> None:
    inputs = torch.ones(2, DIM, requires_grad=True)
    assert autoreg.audit_forward(Checkpointed(), inputs, step=backward_step) == []


class Normalized(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.utils.parametrizations.weight_norm(nn.Linear(DIM, DIM))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


def test_a_parametrized_weight_follows_the_model() -> None:
    assert autoreg.audit_forward(Normalized(), torch.ones(2, DIM)) == []


class OwnTo(Base):
    """Soft actor-critic's policies move their plain tensors in a to() of their own."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.full((DIM,), 2.0)

    def to(self, device):  # type: ignore[no-untyped-def, override]
        self.scale = self.scale.to(device)
        return super().to(device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) * self.scale


def test_a_to_of_the_class_own_that_takes_one_argument_is_honoured() -> None:
    findings = autoreg.audit_forward(OwnTo(), torch.ones(2, DIM))
    # .cuda() and .half() leave it behind: a device finding; its own to(bfloat16) converts it.
    assert [(f.kind, f.attribute) for f in findings] == [("device", "scale")]


class MovedHeads(Base):
    """A module made in forward and moved by nn.Module.to(tensor), which takes that tensor's
    device and dtype: the model's for x, the default device for a tensor made without one."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = nn.Linear(DIM, DIM).to(x)(self.linear(x))
        y = nn.Linear(DIM, DIM).to(tensor=x)(y)
        return nn.Linear(DIM, DIM).to(torch.ones(1))(y)


def test_a_module_moved_to_a_tensor_goes_to_that_tensors_device() -> None:
    findings = autoreg.audit_forward(MovedHeads(), torch.ones(2, DIM), low_precision=None)
    line = line_of(MovedHeads, ".to(torch.ones(1))")
    assert [(f.kind, f.lineno) for f in findings] == [("device", line)]


class Energy(Base):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        energy = self.linear(x).sum()
        return torch.autograd.grad(energy, x, create_graph=True)[0]


def test_the_forward_runs_in_the_callers_grad_mode() -> None:
    x = torch.ones(2, DIM, requires_grad=True)
    assert autoreg.audit_forward(Energy(), x) == []
    with torch.no_grad(), pytest.raises(autoreg.ForwardAuditError, match="without the audit too"):
        autoreg.audit_forward(Energy(), x)  # as the forward itself: no graph under no_grad


def _positions(x: torch.Tensor) -> torch.Tensor:
    return x + torch.arange(x.shape[-1], device=x.device)


with warnings.catch_warnings():  # torch.jit.script is deprecated from torch 2.13 on
    warnings.simplefilter("ignore", DeprecationWarning)
    warnings.simplefilter("ignore", FutureWarning)
    scripted_positions = torch.jit.script(_positions)


class Scripted(Base):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return scripted_positions(self.linear(x))


class Legacy(Base):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) + torch.FloatTensor([1.0, 2.0, 3.0, 4.0])


def test_torchscript_is_not_blamed_and_data_lifted_by_a_legacy_constructor_is_found() -> None:
    """TorchScript passes its devices unseen: what it makes counts as the model's (no finding
    it cannot establish); torch.FloatTensor(data) lifts data onto the CPU: a finding."""
    assert autoreg.audit_forward(Scripted(), torch.ones(2, DIM)) == []
    [device] = autoreg.audit_forward(Legacy(), torch.ones(2, DIM), low_precision=None)
    assert device.lineno == line_of(Legacy, "torch.FloatTensor([1.0, 2.0, 3.0, 4.0])")


class MetaMask(Base):
    """A plain attribute made elsewhere than on the CPU (here on meta; on a GPU machine, one
    made with device="cuda"): .to() leaves it there; the audit runs it on the CPU."""

    def __init__(self) -> None:
        super().__init__()
        self.mask = torch.ones(DIM, device="meta")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) * self.mask


def test_a_plain_attribute_elsewhere_than_on_the_cpu_is_run_on_the_cpu_and_found() -> None:
    [device] = autoreg.audit_forward(MetaMask(), torch.ones(2, DIM), low_precision=None)
    assert (device.kind, device.attribute) == ("device", "mask")


class Gated(nn.Module):
    """StarGAN v2's CoordConv: a value moved to the device of a tensor made from a grid kept as
    a plain attribute, which ``.to()`` leaves behind."""

    def __init__(self, register: bool = False) -> None:
        super().__init__()
        self.linear = nn.Linear(DIM, DIM)
        grid = torch.linspace(-1, 1, DIM)
        if register:
            self.register_buffer("grid", grid)
        else:
            self.grid = grid

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        zero = torch.zeros_like(self.grid)
        gated = torch.where(x > 0, self.grid, zero).to(zero.device)
        return self.linear(x) + gated


def test_a_move_to_the_device_of_a_tensor_left_behind_is_that_tensors_stray() -> None:
    """Before: the moved value was a stray of its own, with the fix "no .cpu() / .numpy() round
    trip" (the code has none), and ``fix`` counted it as forward code it would not rewrite. Its
    one cause is the grid: registered, nothing is found."""
    findings = autoreg.audit_forward(Gated(), torch.randn(2, DIM), low_precision=None)
    assert [(f.kind, f.attribute) for f in findings] == [("device", "grid")]
    assert not any("round trip" in f.fix for f in findings)
    assert autoreg.audit_forward(Gated(register=True), torch.randn(2, DIM)) == []


class Bins:
    """A plain object that makes its bins on the device it is handed (a distribution's)."""

    def __init__(self, logits: torch.Tensor, device: str) -> None:
        self.bins = torch.linspace(-1.0, 1.0, logits.shape[-1], device=device)
        self.mean = (logits.softmax(-1) * self.bins).sum(-1)


class Recurrent(nn.Module):
    def __init__(self, device: str) -> None:
        super().__init__()
        self.device_name = device
        self.cell = nn.GRUCell(DIM, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.cell(x)


class BinnedHead(nn.Module):
    def __init__(self, device: str) -> None:
        super().__init__()
        self.device_name = device
        self.linear = nn.Linear(DIM, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return Bins(self.linear(x), device=self.device_name).mean


class WorldModel(nn.Module):
    """Each part keeps the device of one config (dreamerv3-torch's ``self._device``): the same
    string object in each of them."""

    def __init__(self, device: str = "cpu") -> None:
        super().__init__()
        self.recurrent = Recurrent(device)
        self.head = BinnedHead(device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.recurrent(x))


def test_a_kept_device_is_named_in_the_module_whose_code_used_it() -> None:
    """Before: the fix named ``Recurrent.device_name``, the first module that keeps the same
    string, where the bins are made on ``BinnedHead``'s (through a plain object it calls)."""
    [finding] = autoreg.audit_forward(WorldModel(), torch.ones(2, DIM), low_precision=None)
    assert finding.source.startswith("self.bins = torch.linspace(")
    assert finding.fix.startswith("BinnedHead.device_name is the device the model was built on")
