"""accelerate: build empty, load a checkpoint, recompute the buffers, dispatch; and prepare.

``init_empty_weights()`` puts parameters on the meta device (and buffers too with
``include_buffers=True``, by patching ``register_buffer``: autoreg registers through it, so its
buffers go there as well). After ``load_checkpoint_in_model`` the non-persistent buffers are not
restored - they are in no checkpoint - so the recipe recomputes them with
``autoreg.reset_buffers`` (the ``reset_buffers()`` convention, which works on the twin too) before
``dispatch_model``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("accelerate")

import torch
from accelerate import Accelerator, dispatch_model, init_empty_weights, load_checkpoint_in_model
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import autoreg


class AutoNet(autoreg.Module):
    stats: autoreg.Persistent  # in the checkpoint

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.stats = torch.zeros(4)
        self.reset_buffers()

    def reset_buffers(self) -> None:
        self.scale = torch.linspace(0.5, 1.5, 4)
        self.index = torch.tensor([3, 2, 1, 0])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.last = x.detach()  # runtime state: carried on autoreg, plain on the twin
        return self.lin(x)[:, self.index] * self.scale + self.stats


class TwinNet(nn.Module):
    forward = AutoNet.forward

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("stats", torch.zeros(4))
        self.register_buffer("scale", torch.empty(4), persistent=False)
        self.register_buffer("index", torch.empty(4, dtype=torch.long), persistent=False)
        self.reset_buffers()

    def reset_buffers(self) -> None:
        self.scale = torch.linspace(0.5, 1.5, 4)
        self.index = torch.tensor([3, 2, 1, 0])


CLASSES = pytest.mark.parametrize("cls", [AutoNet, TwinNet], ids=["autoreg", "twin"])


def _trained(cls: type[nn.Module]) -> nn.Module:
    torch.manual_seed(0)
    model = cls()
    with torch.no_grad():
        model.stats.copy_(torch.arange(4.0))
    return model


@CLASSES
@pytest.mark.parametrize("include_buffers", [False, True], ids=["params", "params_and_buffers"])
def test_empty_weights_checkpoint_reset_buffers_dispatch(
    cls: type[nn.Module], include_buffers: bool, tmp_path: Path
) -> None:
    reference = _trained(cls)
    torch.save(reference.state_dict(), tmp_path / "model.bin")

    with init_empty_weights(include_buffers=include_buffers):
        model = cls()
    assert model.lin.weight.is_meta
    assert model.scale.is_meta is include_buffers
    # With a device map: without one, accelerate hands a model wholly on meta to torch's
    # set_model_state_dict, which needs a process group (the twin fails the same way).
    load_checkpoint_in_model(model, str(tmp_path / "model.bin"), device_map={"": "cpu"})
    assert model.scale.is_meta is include_buffers  # non-persistent: not in the checkpoint
    autoreg.reset_buffers(model)
    model = dispatch_model(model, device_map={"": "cpu"})

    assert [n for n, _ in model.named_buffers()] == ["stats", "scale", "index"]
    for name, buffer in reference.named_buffers():
        assert torch.equal(model.get_buffer(name), buffer), name
    x = torch.randn(3, 4)
    torch.testing.assert_close(model(x), reference(x), rtol=0, atol=0)


@CLASSES
def test_accelerator_prepare_and_train(cls: type[nn.Module]) -> None:
    torch.manual_seed(0)
    model = cls()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    generator = torch.Generator().manual_seed(0)
    data = DataLoader(TensorDataset(torch.randn(8, 4, generator=generator)), batch_size=4)
    accelerator = Accelerator(cpu=True)

    model, optimizer, data = accelerator.prepare(model, optimizer, data)
    for (x,) in data:
        optimizer.zero_grad()
        accelerator.backward(model(x).square().mean())
        optimizer.step()

    assert [n for n, _ in model.named_buffers()] == ["stats", "scale", "index"]
    assert model.last.shape == (4, 4)
    model.double()
    assert model.scale.dtype == torch.float64
    # The runtime tensor from forward: carried by autoreg; the twin leaves it behind.
    assert model.last.dtype == (torch.float64 if cls is AutoNet else torch.float32)


def test_accelerator_training_matches_the_twin() -> None:
    weights = {}
    for cls in (AutoNet, TwinNet):
        torch.manual_seed(0)
        model = cls()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        model, optimizer = Accelerator(cpu=True).prepare(model, optimizer)
        for step in range(3):
            optimizer.zero_grad()
            model(torch.full((2, 4), float(step))).square().mean().backward()
            optimizer.step()
        weights[cls] = model.state_dict()
    for key, value in weights[TwinNet].items():
        torch.testing.assert_close(weights[AutoNet][key], value, rtol=0, atol=0, msg=key)
