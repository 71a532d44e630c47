"""torch.fx: ``symbolic_trace`` of autoreg modules gives the twin's graph module.

Tracing runs ``forward`` with ``Proxy`` objects: a forward that reassigns a buffer assigns a
``Proxy`` to it. A Proxy is not a tensor but has ``__torch_function__``, and nn.Module keeps the
buffer for such a value; so must autoreg (on main the Proxy counted as "a non-tensor assigned to a
name autoreg registered", and the buffer silently left ``state_dict``).
"""

from __future__ import annotations

import pytest
import torch
import torch.fx
from torch import nn

import autoreg
from tests.support import role


class AutoRunning(autoreg.Module):
    running: autoreg.Persistent  # saved: what a checkpoint must keep

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.running = torch.zeros(3)
        self.mask = torch.tensor([1.0, 0.0, 1.0])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.running = self.running * 0.9 + x.mean(0) * 0.1  # reassigned: a Proxy while tracing
        return self.lin(x) * self.mask + self.running


class TwinRunning(nn.Module):
    forward = AutoRunning.forward

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.register_buffer("running", torch.zeros(3))
        self.register_buffer("mask", torch.tensor([1.0, 0.0, 1.0]), persistent=False)


class AutoReader(autoreg.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.mask = torch.tensor([1.0, 0.0, 1.0])
        self.positions = torch.arange(3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x)[:, self.positions] * self.mask


class TwinReader(nn.Module):
    forward = AutoReader.forward

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.register_buffer("mask", torch.tensor([1.0, 0.0, 1.0]), persistent=False)
        self.register_buffer("positions", torch.arange(3), persistent=False)


def _pair(auto_cls: type[nn.Module], twin_cls: type[nn.Module]) -> tuple[nn.Module, nn.Module]:
    torch.manual_seed(0)
    auto = auto_cls()
    torch.manual_seed(0)
    return auto, twin_cls()


# nn.Module takes a value with __torch_function__ (a Proxy) for a buffer only in newer torch;
# read from its code, as autoreg's row 3 leaves such a value to it.
TAKES_PROXIES = "__torch_function__" in nn.Module.__setattr__.__code__.co_consts


def test_tracing_a_forward_that_reassigns_a_buffer_keeps_the_buffer() -> None:
    auto, twin = _pair(AutoRunning, TwinRunning)
    if not TAKES_PROXIES:
        # Older torch's nn.Module refuses the Proxy for a buffer: both raise its TypeError, and
        # autoreg never drops the buffer instead (row 3).
        for module in (auto, twin):
            with pytest.raises(TypeError, match=r"cannot assign 'torch\.fx\.proxy\.Proxy"):
                torch.fx.symbolic_trace(module)
        assert "running" in auto.state_dict()
        return

    traced = {"auto": torch.fx.symbolic_trace(auto), "twin": torch.fx.symbolic_trace(twin)}

    # Both modules now hold the tracing Proxy in the buffer, as nn.Module does.
    assert isinstance(twin._buffers["running"], torch.fx.Proxy)
    assert isinstance(auto._buffers.get("running"), torch.fx.Proxy)  # main: a plain attribute
    assert list(auto.state_dict()) == list(twin.state_dict())  # main: 'running' is gone
    assert [n for n, _ in auto.named_buffers()] == [n for n, _ in twin.named_buffers()]
    assert "running" in auto.state_dict()
    assert list(traced["auto"].state_dict()) == list(traced["twin"].state_dict())
    x = torch.randn(2, 3)
    torch.testing.assert_close(traced["auto"](x), traced["twin"](x), rtol=0, atol=0)


def test_a_traced_autoreg_module_equals_the_twins_and_moves() -> None:
    auto, twin = _pair(AutoReader, TwinReader)

    traced_auto, traced_twin = torch.fx.symbolic_trace(auto), torch.fx.symbolic_trace(twin)

    assert dict(traced_auto.named_buffers()).keys() == dict(traced_twin.named_buffers()).keys()
    assert traced_auto.state_dict().keys() == traced_twin.state_dict().keys()
    assert traced_auto.code == traced_twin.code
    traced_auto.double()
    traced_twin.double()
    x = torch.randn(2, 3, dtype=torch.float64)
    torch.testing.assert_close(traced_auto(x), traced_twin(x), rtol=0, atol=0)
    assert traced_auto.mask.dtype == torch.float64
    assert traced_auto.positions.dtype == torch.long


@pytest.mark.parametrize(
    "mode", [{"strict": True}, {"warn": True}, {}], ids=["strict", "warn", "register"]
)
def test_the_constants_the_tracer_sets_on_the_root_are_stored_as_on_the_twin(
    mode: dict[str, bool],
) -> None:
    """fx's tracer keeps a tensor the forward makes from a literal as ``_tensor_constant0`` on
    the module it traces: torch's assignment, a plain attribute on nn.Module (row 4). Until
    autoreg knew fx's code, strict mode refused it (UnregisteredTensorError, for a name the model
    never wrote), warn mode warned, and the original module carried it (warnings are errors in
    this suite)."""

    class Constant(autoreg.Module, **mode):
        scale: torch.Tensor

        def __init__(self) -> None:
            super().__init__()
            self.scale = torch.ones(2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * self.scale + torch.tensor([1.0, 2.0])

    class TwinConstant(nn.Module):
        forward = Constant.forward

        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("scale", torch.ones(2), persistent=False)

    auto, twin = Constant(), TwinConstant()
    traced_auto, traced_twin = torch.fx.symbolic_trace(auto), torch.fx.symbolic_trace(twin)
    assert traced_auto.code == traced_twin.code
    assert role(auto, "_tensor_constant0") == role(twin, "_tensor_constant0") == "plain"
    assert auto.double()._tensor_constant0.dtype == torch.float32  # left, as nn.Module leaves it
    x = torch.randn(3, 2)
    torch.testing.assert_close(traced_auto(x), traced_twin(x), rtol=0, atol=0)
