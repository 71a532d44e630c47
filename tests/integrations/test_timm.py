"""timm: models wrapped in an autoreg module, the mixin before a timm class, and the audit.

timm keeps its constants in buffers already; an autoreg module that holds a timm model moves its
own tensors (here the input normalisation) and leaves timm's as they are. levit and
efficientformerv2 keep ``attention_bias_cache``, a dict keyed by device name that an eval forward
fills; their ``_apply`` empties it, so ``.to()`` leaves nothing behind, and the audit does not
report it (on main it reported every entry, with the fix ``autoreg.BufferDict``).

timm imports torchvision: where no torchvision matches the installed torch (the CPU build of
torch 2.13 has none on the registry), ``import timm`` fails and this file is skipped.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("timm")

import timm
import torch
from timm.models.vision_transformer import VisionTransformer
from torch import nn

import autoreg

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)

# name, create_model keywords, input size: tiny inputs, random weights.
MODELS = {
    "resnet10t": ({}, 32),
    "vit_tiny_patch16_224": ({"img_size": 32}, 32),
    "levit_128s": ({"img_size": 64}, 64),
    "efficientformerv2_s0": ({"img_size": 64}, 64),
}
PARAMS = pytest.mark.parametrize(
    ("name", "kwargs", "size"), [(n, *v) for n, v in MODELS.items()], ids=MODELS.keys()
)


def _create(name: str, kwargs: dict[str, Any]) -> nn.Module:
    torch.manual_seed(0)
    return timm.create_model(name, pretrained=False, num_classes=3, **kwargs)


class AutoClassifier(autoreg.Module):
    def __init__(self, backbone: nn.Module) -> None:
        super().__init__()
        self.backbone = backbone
        self.mean = torch.tensor(MEAN).view(1, 3, 1, 1)
        self.std = torch.tensor(STD).view(1, 3, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.backbone((x - self.mean) / self.std)


class TwinClassifier(nn.Module):
    forward = AutoClassifier.forward

    def __init__(self, backbone: nn.Module) -> None:
        super().__init__()
        self.backbone = backbone
        self.register_buffer("mean", torch.tensor(MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(STD).view(1, 3, 1, 1), persistent=False)


@PARAMS
def test_a_timm_model_wrapped_in_an_autoreg_module_moves_as_the_twin(
    name: str, kwargs: dict[str, Any], size: int
) -> None:
    auto = AutoClassifier(_create(name, kwargs)).eval()
    twin = TwinClassifier(_create(name, kwargs)).eval()
    x = torch.rand(1, 3, size, size)
    with torch.no_grad():
        torch.testing.assert_close(auto(x), twin(x), rtol=0, atol=0)  # fills levit's caches

    auto.to(torch.float64)
    twin.to(torch.float64)

    assert [n for n, _ in auto.named_buffers()] == [n for n, _ in twin.named_buffers()]
    assert auto.state_dict().keys() == twin.state_dict().keys()
    assert auto.mean.dtype == torch.float64
    with torch.no_grad():
        output = auto(x.double())
        torch.testing.assert_close(output, twin(x.double()), rtol=0, atol=0)
    assert output.dtype == torch.float64
    assert autoreg.find_unregistered(auto) == []


class AutoViT(autoreg.AutoRegisterMixin, VisionTransformer):
    """The mixin before a timm class: timm's own code keeps nn.Module's behaviour."""


def test_the_mixin_before_a_timm_class_changes_nothing_of_timms() -> None:
    kwargs = {"img_size": 32, "patch_size": 16, "embed_dim": 32, "depth": 1, "num_heads": 2}
    torch.manual_seed(0)
    auto = AutoViT(num_classes=3, **kwargs).eval()
    torch.manual_seed(0)
    twin = VisionTransformer(num_classes=3, **kwargs).eval()

    assert [n for n, _ in auto.named_buffers()] == [n for n, _ in twin.named_buffers()]
    assert auto.state_dict().keys() == twin.state_dict().keys()
    auto.double()
    twin.double()
    x = torch.rand(2, 3, 32, 32, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(auto(x), twin(x), rtol=0, atol=0)


@pytest.mark.parametrize("name", ["levit_128s", "efficientformerv2_s0"])
def test_the_audit_does_not_report_a_per_device_cache_that_apply_empties(name: str) -> None:
    kwargs, size = MODELS[name]
    model = _create(name, kwargs).eval()
    with torch.no_grad():
        model(torch.rand(1, 3, size, size))
    caches = [m for m in model.modules() if getattr(m, "attention_bias_cache", None)]
    assert caches, "an eval forward fills the per-device caches"
    assert all(list(m.attention_bias_cache) == ["cpu"] for m in caches)

    assert autoreg.find_unregistered(model) == []  # main: one finding per cache

    # Why: timm's _apply empties the caches, and the next eval forward refills them.
    model.to(torch.float64)
    assert all(m.attention_bias_cache == {} for m in caches)
    with torch.no_grad():
        assert model(torch.rand(1, 3, size, size, dtype=torch.float64)).dtype == torch.float64
    assert all(m.attention_bias_cache["cpu"].dtype == torch.float64 for m in caches)
