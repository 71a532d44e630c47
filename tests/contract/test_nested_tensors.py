"""A nested tensor (``torch.nested``, strided layout) has no single shape: every message that
describes it, and the audit, must still work."""

from __future__ import annotations

import pytest
import torch

import autoreg

# torch's own notice that the strided layout is a prototype, raised when one is built.
pytestmark = pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors:UserWarning")


def nested() -> torch.Tensor:
    return torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)])


def test_warn_mode_describes_a_nested_tensor() -> None:
    class Loud(autoreg.Module, warn=True):
        pass

    module = Loud()
    with pytest.warns(
        autoreg.AutoRegisterWarning,
        match=r"Loud\.ragged = NestedTensor\(2 tensors, dtype=torch\.float32, device='cpu'\)",
    ):
        module.ragged = nested()


def test_strict_mode_describes_a_nested_tensor() -> None:
    class Strict(autoreg.Module, strict=True):
        pass

    with pytest.raises(autoreg.UnregisteredTensorError, match=r"NestedTensor\(2 tensors"):
        Strict().ragged = nested()


def test_the_audit_reports_a_nested_tensor() -> None:
    module = torch.nn.Module()
    module.ragged = nested()
    [finding] = autoreg.find_unregistered(module)
    assert finding.path == "ragged"
    assert "NestedTensor(2 tensors" in repr(finding)
