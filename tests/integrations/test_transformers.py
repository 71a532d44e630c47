"""transformers: a PreTrainedModel with the mixin saves, loads and recomputes its buffers.

transformers 5 builds the model of ``from_pretrained`` on the meta device and loads the weights
into it: non-persistent buffers computed in ``__init__`` are in no checkpoint and come back as
uninitialised memory, for nn.Module and autoreg alike. transformers' own fix is to recompute them
in ``_init_weights`` (``init.copy_``, what the twin does); the autoreg recipe computes them in a
``reset_buffers()`` method and calls ``autoreg.reset_buffers(module, recurse=False)`` from
``_init_weights`` (``test_transformers_recipe.py`` has the buffers in layers too). Both are
correct in every dtype; on main, ``from_pretrained(..., dtype=torch.float64)`` gave autoreg a
float32 ``inv_freq`` next to float64 weights (``reset_buffers`` lost the dtype).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers")

import torch
import transformers
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel
from transformers import initialization as init

import autoreg
from tests.integrations._support import rotary_inv_freq

pytestmark = pytest.mark.usefixtures("quiet_transformers")


class TinyConfig(PretrainedConfig):
    model_type = "autoreg-tiny"

    def __init__(self, dim: int = 8, max_len: int = 6, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.dim = dim
        self.max_len = max_len


class AutoTiny(autoreg.AutoRegisterMixin, PreTrainedModel):
    """The autoreg recipe: derived buffers in reset_buffers(), recomputed from _init_weights."""

    config_class = TinyConfig

    def __init__(self, config: TinyConfig) -> None:
        super().__init__(config)
        self.proj = nn.Linear(config.dim, config.dim)
        self.reset_buffers()
        self.post_init()

    def reset_buffers(self) -> None:
        self.inv_freq = rotary_inv_freq(self.config.dim)
        self.positions = torch.arange(self.config.max_len)

    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)
        autoreg.reset_buffers(module, recurse=False)  # in the buffers' dtype, on their device

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        angles = self.positions[:, None] * self.inv_freq
        return self.proj(x) + angles.repeat(1, 2)


class TwinTiny(PreTrainedModel):
    """transformers' recipe: buffers registered by hand, recomputed with init.copy_."""

    config_class = TinyConfig
    forward = AutoTiny.forward

    def __init__(self, config: TinyConfig) -> None:
        super().__init__(config)
        self.proj = nn.Linear(config.dim, config.dim)
        self.register_buffer("inv_freq", rotary_inv_freq(config.dim), persistent=False)
        self.register_buffer("positions", torch.arange(config.max_len), persistent=False)
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)
        if module is self:
            init.copy_(self.inv_freq, rotary_inv_freq(self.config.dim))
            init.copy_(self.positions, torch.arange(self.config.max_len))


class NaiveAuto(autoreg.AutoRegisterMixin, PreTrainedModel):
    """Buffers computed in __init__ only: what transformers 5 loads as uninitialised memory."""

    config_class = TinyConfig

    def __init__(self, config: TinyConfig) -> None:
        super().__init__(config)
        self.proj = nn.Linear(config.dim, config.dim)
        self.inv_freq = rotary_inv_freq(config.dim)
        self.post_init()


class NaiveTwin(PreTrainedModel):
    config_class = TinyConfig

    def __init__(self, config: TinyConfig) -> None:
        super().__init__(config)
        self.proj = nn.Linear(config.dim, config.dim)
        self.register_buffer("inv_freq", rotary_inv_freq(config.dim), persistent=False)
        self.post_init()


# from_pretrained(device_map=...) goes through accelerate, which transformers does not require:
# without it, that case skips (AUTOREG_REQUIRE_INTEGRATIONS=1 makes a missing accelerate an error).
NEEDS_ACCELERATE = pytest.mark.skipif(
    not transformers.utils.is_accelerate_available(),
    reason="from_pretrained(device_map=...) needs accelerate, which is not installed",
)
LOADS = [
    pytest.param({}, id="default"),
    pytest.param({"dtype": torch.float64}, id="float64"),
    pytest.param({"device_map": "cpu"}, id="device_map_cpu", marks=NEEDS_ACCELERATE),
]


@pytest.mark.parametrize("cls", [AutoTiny, TwinTiny], ids=["autoreg", "twin"])
@pytest.mark.parametrize("kwargs", LOADS)
def test_save_and_load_pretrained_recompute_the_buffers_in_the_models_dtype(
    cls: type[PreTrainedModel], kwargs: dict[str, Any], tmp_path: Path
) -> None:
    torch.manual_seed(0)
    model = cls(TinyConfig())
    model.save_pretrained(tmp_path)

    loaded = cls.from_pretrained(tmp_path, **kwargs)

    dtype = kwargs.get("dtype", torch.float32)
    assert [n for n, _ in loaded.named_buffers()] == ["inv_freq", "positions"]
    assert list(loaded.state_dict()) == ["proj.weight", "proj.bias"]
    assert loaded.proj.weight.dtype == dtype
    assert loaded.inv_freq.dtype == dtype  # main: float32 on autoreg with dtype=torch.float64
    assert loaded.positions.dtype == torch.long
    assert torch.equal(loaded.inv_freq, rotary_inv_freq(8).to(dtype))
    assert torch.equal(loaded.positions, torch.arange(6))
    x = torch.randn(6, 8, dtype=dtype)
    torch.testing.assert_close(loaded(x), model.to(dtype)(x), rtol=0, atol=0)


@pytest.mark.parametrize("cls", [NaiveAuto, NaiveTwin], ids=["autoreg", "twin"])
def test_buffers_computed_only_in_init_are_not_restored_for_either(
    cls: type[PreTrainedModel], tmp_path: Path
) -> None:
    """The caveat the recipe answers: from_pretrained builds on meta, to_empty gives memory."""
    cls(TinyConfig()).save_pretrained(tmp_path)

    loaded = cls.from_pretrained(tmp_path)

    assert loaded.inv_freq.device.type == "cpu"
    assert not torch.equal(loaded.inv_freq, rotary_inv_freq(8))  # uninitialised memory


# --- stock models: nothing for autoreg to do ---------------------------------------------------


def _stock_models() -> dict[str, tuple[Any, dict[str, torch.Tensor]]]:
    ids = torch.tensor([[1, 2, 3, 4]])
    return {
        "llama": (
            transformers.LlamaConfig(
                vocab_size=32,
                hidden_size=16,
                intermediate_size=32,
                num_hidden_layers=1,
                num_attention_heads=2,
                num_key_value_heads=1,
                max_position_embeddings=16,
            ),
            {"input_ids": ids},
        ),
        "gpt2": (
            transformers.GPT2Config(vocab_size=32, n_embd=16, n_layer=1, n_head=2, n_positions=16),
            {"input_ids": ids},
        ),
        "bert": (
            transformers.BertConfig(
                vocab_size=32,
                hidden_size=16,
                num_hidden_layers=1,
                num_attention_heads=2,
                intermediate_size=32,
                max_position_embeddings=16,
            ),
            {"input_ids": ids},
        ),
        "t5": (
            transformers.T5Config(
                vocab_size=32, d_model=16, d_ff=32, d_kv=8, num_layers=1, num_heads=2
            ),
            {"input_ids": ids, "decoder_input_ids": ids},
        ),
    }


STOCK = _stock_models()


@pytest.mark.parametrize(("config", "inputs"), STOCK.values(), ids=STOCK.keys())
def test_stock_models_are_clean_and_register_tensors_changes_nothing(
    config: Any, inputs: dict[str, torch.Tensor]
) -> None:
    torch.manual_seed(0)
    model = transformers.AutoModel.from_config(config).eval()
    with torch.no_grad():
        model(**inputs)  # caches and runtime state a forward may leave
    buffers = [n for n, _ in model.named_buffers()]
    keys = list(model.state_dict())

    assert autoreg.find_unregistered(model) == []
    assert autoreg.register_tensors(model) == []
    assert [n for n, _ in model.named_buffers()] == buffers
    assert list(model.state_dict()) == keys
