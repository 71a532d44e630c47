"""The seeds' scenario: the two modules that started the project, moved to float64 and meta."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import autoreg


def reachable_tensors(module: nn.Module) -> dict[str, torch.Tensor]:
    """Every tensor reachable from the module tree: parameters, buffers and plain attributes."""
    found: dict[str, torch.Tensor] = {}
    for prefix, sub in module.named_modules():
        for name, value in vars(sub).items():
            if isinstance(value, torch.Tensor):
                found[f"{prefix}.{name}".lstrip(".")] = value
        for name, value in [*sub._parameters.items(), *sub._buffers.items()]:
            if value is not None:
                found[f"{prefix}.{name}".lstrip(".")] = value
    return found


def make_toy(base: type[nn.Module]) -> nn.Module:
    class ToyModule(base):  # type: ignore[misc, valid-type]
        in_features = 2

        def __init__(self) -> None:
            super().__init__()
            self.layer = nn.Linear(2, 2)
            self.expected_moved_cuda_tensor = torch.tensor([0, 2, 3])

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.layer(x) + self.expected_moved_cuda_tensor[:2].to(x.dtype)

    return ToyModule()


def make_net(base: type[nn.Module]) -> nn.Module:
    class Net(base):  # type: ignore[misc, valid-type]
        in_features = 3

        def __init__(self) -> None:
            super().__init__()
            self.w1 = nn.Parameter(torch.rand(2, 3))
            self.w2 = nn.Parameter(torch.rand(2, 3), requires_grad=False)
            self.w3 = torch.rand(2, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x @ (self.w1 + self.w2 + self.w3).T

    return Net()


FACTORIES = [pytest.param(make_toy, id="ToyModule"), pytest.param(make_net, id="Net")]


@pytest.mark.parametrize("factory", FACTORIES)
def test_float64_moves_every_floating_tensor_and_keeps_integer_dtypes(factory) -> None:
    module = factory(autoreg.Module)
    before = reachable_tensors(module)
    module.to(torch.float64)
    after = reachable_tensors(module)
    assert after.keys() == before.keys()
    for name, tensor in after.items():
        expected = torch.float64 if before[name].is_floating_point() else before[name].dtype
        assert tensor.dtype == expected, name
    x = torch.ones(1, module.in_features, dtype=torch.float64)
    assert module(x).dtype == torch.float64


@pytest.mark.parametrize("factory", FACTORIES)
def test_meta_moves_every_tensor(factory) -> None:
    module = factory(autoreg.Module).to("meta")
    devices = {name: t.device.type for name, t in reachable_tensors(module).items()}
    assert set(devices.values()) == {"meta"}, devices


@pytest.mark.parametrize("factory", FACTORIES)
def test_plain_nn_module_leaves_the_tensor_behind(factory) -> None:
    """The bug autoreg fixes, so that the test above is known to be able to fail."""
    module = factory(nn.Module).to("meta")
    devices = {t.device.type for t in reachable_tensors(module).values()}
    assert devices == {"meta", "cpu"}


@pytest.mark.parametrize("factory", FACTORIES)
def test_state_dict_keys_are_those_of_the_nn_module_version(factory) -> None:
    assert factory(autoreg.Module).state_dict().keys() == factory(nn.Module).state_dict().keys()


def test_the_assigned_tensors_became_non_persistent_buffers() -> None:
    toy, net = make_toy(autoreg.Module), make_net(autoreg.Module)
    assert dict(toy.named_buffers()).keys() == {"expected_moved_cuda_tensor"}
    assert dict(net.named_buffers()).keys() == {"w3"}
    assert dict(net.named_parameters()).keys() == {"w1", "w2"}
    assert not net.w2.requires_grad
