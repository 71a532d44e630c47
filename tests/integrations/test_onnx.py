"""ONNX: ``torch.onnx.export(..., dynamo=True)`` and onnxruntime, also after ``.to(float64)``.

Buffers export as the twin's do. A tensor first stored after construction (here by a
``calibrate`` step) is carried by autoreg and moves with ``.to(torch.float64)``; on the twin it is
a plain attribute, left in float32, and the float64 model fails: in eager mode, and in
onnxruntime, which refuses the exported graph (a float64 x float32 MatMul).
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("onnxscript")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

import onnxruntime as ort
import torch
from onnxruntime.capi.onnxruntime_pybind11_state import Fail as OnnxRuntimeFailure
from torch import nn

import autoreg

pytestmark = [
    # torch.onnx's own use of torch.utils._pytree, deprecated in torch 2.13.
    pytest.mark.filterwarnings(r"ignore:`isinstance\(treespec, LeafSpec\)` is deprecated"),
]


class AutoNet(autoreg.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.mask = torch.tensor([1.0, 0.0, 1.0, 0.0])
        self.index = torch.tensor([3, 2, 1, 0])

    def calibrate(self, x: torch.Tensor) -> None:
        self.projection = torch.linalg.qr(x.T @ x).Q  # runtime state, before export

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.lin(x)[:, self.index] * self.mask) @ self.projection


class TwinNet(nn.Module):
    calibrate = AutoNet.calibrate
    forward = AutoNet.forward

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("mask", torch.tensor([1.0, 0.0, 1.0, 0.0]), persistent=False)
        self.register_buffer("index", torch.tensor([3, 2, 1, 0]), persistent=False)


def _calibrated(cls: type[nn.Module]) -> nn.Module:
    torch.manual_seed(0)
    model = cls().eval()
    model.calibrate(torch.randn(8, 4))
    return model


def _run_onnx(model: nn.Module, x: torch.Tensor, path: Path) -> torch.Tensor:
    program = torch.onnx.export(model, (x,), dynamo=True)
    assert program is not None
    program.save(str(path))
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (output,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    return torch.from_numpy(output)


@pytest.mark.parametrize("cls", [AutoNet, TwinNet], ids=["autoreg", "twin"])
def test_export_and_onnxruntime_match_eager(cls: type[nn.Module], tmp_path: Path) -> None:
    model = _calibrated(cls)
    x = torch.randn(2, 4)

    output = _run_onnx(model, x, tmp_path / "model.onnx")

    torch.testing.assert_close(output, model(x))


def test_export_after_a_move_to_float64(tmp_path: Path) -> None:
    auto, twin = _calibrated(AutoNet).to(torch.float64), _calibrated(TwinNet).to(torch.float64)
    x = torch.randn(2, 4, dtype=torch.float64)

    output = _run_onnx(auto, x, tmp_path / "model.onnx")

    assert output.dtype == torch.float64
    torch.testing.assert_close(output, auto(x))
    # The twin left its runtime tensor in float32: eager fails, the exported graph is invalid.
    assert twin.projection.dtype == torch.float32
    with pytest.raises(RuntimeError, match="same dtype"):
        twin(x)
    with pytest.raises(OnnxRuntimeFailure, match="bound to different types"):
        _run_onnx(twin, x, tmp_path / "twin.onnx")
