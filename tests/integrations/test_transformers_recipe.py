"""transformers: the one-line recipe recomputes derived buffers wherever they live.

transformers 5 builds a ``from_pretrained`` model on the meta device and calls ``_init_weights``
only on modules it did not mark initialised: the top-level model, whose own weights were all
loaded, is usually skipped, while a layer holding a non-persistent buffer is not. A recipe that
resets buffers ``if module is self`` therefore left a rotary table living in a layer as
uninitialised memory (no error; garbage outputs). The recipe resets each module it is given::

    def _init_weights(self, module):
        super()._init_weights(module)
        autoreg.reset_buffers(module, recurse=False)

It is checked against a hand-written twin (transformers' own ``init.copy_`` per module), with the
buffers at the top, in a layer and in a nested layer, and loaded in the default dtype, float64,
bfloat16 and with ``device_map="cpu"``: outputs bitwise equal.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers")

import torch
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel
from transformers import initialization as init

import autoreg
from tests.integrations._support import rotary_inv_freq

pytestmark = pytest.mark.usefixtures("quiet_transformers")


class RecipeConfig(PretrainedConfig):
    model_type = "autoreg-recipe"

    def __init__(self, dim: int = 8, length: int = 6, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.dim = dim
        self.length = length


# --- autoreg: derived buffers in reset_buffers(), the recipe in _init_weights ---------------------


class AutoRotary(autoreg.Module):
    def __init__(self, dim: int, length: int) -> None:
        super().__init__()
        self.dim, self.length = dim, length
        self.reset_buffers()

    def reset_buffers(self) -> None:
        self.inv_freq = rotary_inv_freq(self.dim)
        self.positions = torch.arange(self.length)

    def forward(self) -> torch.Tensor:
        return (self.positions[:, None] * self.inv_freq).repeat(1, 2)


class AutoLayer(autoreg.Module):
    def __init__(self, config: RecipeConfig, nested: bool) -> None:
        super().__init__()
        self.proj = nn.Linear(config.dim, config.dim)
        self.inner = AutoLayer(config, nested=False) if nested else None
        self.rotary = AutoRotary(config.dim, config.length)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.proj(x) + self.rotary()
        return self.inner(x) if self.inner is not None else x


class AutoModel(autoreg.AutoRegisterMixin, PreTrainedModel):
    config_class = RecipeConfig

    def __init__(self, config: RecipeConfig) -> None:
        super().__init__(config)
        self.embed = nn.Linear(config.dim, config.dim)
        self.top = AutoRotary(config.dim, config.length)  # the buffers at the top level
        self.layer = AutoLayer(config, nested=True)  # in a layer, and in a nested layer
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)
        autoreg.reset_buffers(module, recurse=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(self.embed(x) + self.top())


# --- the twin: buffers registered by hand, transformers' own recipe -----------------------------


class TwinRotary(nn.Module):
    def __init__(self, dim: int, length: int) -> None:
        super().__init__()
        self.dim, self.length = dim, length
        self.register_buffer("inv_freq", rotary_inv_freq(dim), persistent=False)
        self.register_buffer("positions", torch.arange(length), persistent=False)

    forward = AutoRotary.forward


class TwinLayer(nn.Module):
    def __init__(self, config: RecipeConfig, nested: bool) -> None:
        super().__init__()
        self.proj = nn.Linear(config.dim, config.dim)
        self.inner = TwinLayer(config, nested=False) if nested else None
        self.rotary = TwinRotary(config.dim, config.length)

    forward = AutoLayer.forward


class TwinModel(PreTrainedModel):
    config_class = RecipeConfig

    def __init__(self, config: RecipeConfig) -> None:
        super().__init__(config)
        self.embed = nn.Linear(config.dim, config.dim)
        self.top = TwinRotary(config.dim, config.length)
        self.layer = TwinLayer(config, nested=True)
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)
        if isinstance(module, TwinRotary):
            init.copy_(module.inv_freq, rotary_inv_freq(module.dim))
            init.copy_(module.positions, torch.arange(module.length))

    forward = AutoModel.forward


LOADS = {
    "default": {},
    "float64": {"dtype": torch.float64},
    "bfloat16": {"dtype": torch.bfloat16},
    "device_map_cpu": {"device_map": "cpu"},
}


@pytest.mark.parametrize("kwargs", LOADS.values(), ids=LOADS.keys())
def test_the_recipe_restores_buffers_at_the_top_in_a_layer_and_in_a_nested_layer(
    kwargs: dict[str, Any], tmp_path: Path
) -> None:
    if "device_map" in kwargs and importlib.util.find_spec("accelerate") is None:
        pytest.skip("device_map needs accelerate, which is not installed")
    torch.manual_seed(0)
    AutoModel(RecipeConfig()).save_pretrained(tmp_path / "auto")
    torch.manual_seed(0)
    TwinModel(RecipeConfig()).save_pretrained(tmp_path / "twin")

    auto = AutoModel.from_pretrained(tmp_path / "auto", **kwargs)
    twin = TwinModel.from_pretrained(tmp_path / "twin", **kwargs)

    dtype = kwargs.get("dtype", torch.float32)
    for name in ("top", "layer.rotary", "layer.inner.rotary"):
        rotary = auto.get_submodule(name)
        assert torch.equal(rotary.inv_freq, rotary_inv_freq(8).to(dtype)), name
        assert rotary.inv_freq.dtype == dtype
        assert torch.equal(rotary.positions, torch.arange(6)), name
    assert [n for n, _ in auto.named_buffers()] == [n for n, _ in twin.named_buffers()]
    assert list(auto.state_dict()) == list(twin.state_dict())
    x = torch.randn(6, 8, dtype=dtype)
    assert torch.equal(auto(x), twin(x))
