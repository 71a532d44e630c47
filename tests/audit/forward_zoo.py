"""Models for tests/test_audit_forward.py: real stray patterns, each with the model written right.

Each stray line ends with a marker comment, ``# stray: device`` or ``# stray: device, dtype``: the
kinds of finding ``audit_forward`` must report at that line (a float32 stray both meets the device
and promotes a bfloat16 model; an integer one only meets the device). The test reads the expected
lines from these markers. A stray made before ``forward`` (a global, a closure, a config object, a
numpy array, a plain attribute) is expected where it entered ``forward``: the marker sits there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import torch
from torch import nn

import autoreg

DIM, VOCAB, MAX_LEN = 8, 11, 16


class _Linear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(DIM, DIM)


# --- positions from torch.arange(seq_len) ---------------------------------------------------------


class Positions(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tokens = nn.Embedding(VOCAB, DIM)
        self.positions = nn.Embedding(MAX_LEN, DIM)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1])  # stray: device
        return self.tokens(ids) + self.positions(positions)


class PositionsFixed(Positions):
    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)
        return self.tokens(ids) + self.positions(positions)


# --- a lookup from torch.tensor(list) -------------------------------------------------------------

ORDER = [3, 1, 2, 0, 7, 6, 5, 4]


class Lookup(_Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        order = torch.tensor(ORDER)  # stray: device
        return self.linear(x).index_select(-1, order)


class LookupFixed(_Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        order = torch.tensor(ORDER, device=x.device)
        return self.linear(x).index_select(-1, order)


# --- a cache created with torch.zeros -------------------------------------------------------------


class Cache(_Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cache = torch.zeros(x.shape[0], MAX_LEN, DIM)  # stray: device, dtype
        cache[:, : x.shape[1]] = self.linear(x)  # a copy into the CPU: CUDA allows it
        return x @ cache.transpose(1, 2)


class CacheFixed(_Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cache = x.new_zeros(x.shape[0], MAX_LEN, DIM)
        cache[:, : x.shape[1]] = self.linear(x)
        return x @ cache.transpose(1, 2)


# --- noise from torch.randn -----------------------------------------------------------------------


class Noise(_Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        noise = torch.randn(x.shape)  # stray: device, dtype
        return self.linear(x + 0.1 * noise)


class NoiseFixed(_Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        noise = torch.randn_like(x)
        return self.linear(x + 0.1 * noise)


# --- a numpy round trip ---------------------------------------------------------------------------


class Window(_Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        window = np.hanning(DIM).astype(np.float32)
        return self.linear(x * torch.from_numpy(window))  # stray: device, dtype


class WindowFixed(_Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        window = np.hanning(DIM).astype(np.float32)
        return self.linear(x * torch.from_numpy(window).to(x))


# --- a tensor in a dataclass config ---------------------------------------------------------------


@dataclasses.dataclass
class Config:
    scale: torch.Tensor = dataclasses.field(default_factory=lambda: torch.linspace(0.5, 1.5, DIM))


class Configured(_Linear):
    def __init__(self, config: Config | None = None) -> None:
        super().__init__()
        self.config = config or Config()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) * self.config.scale  # stray: device, dtype


class ConfiguredFixed(autoreg.Module):
    def __init__(self, config: Config | None = None) -> None:
        super().__init__()
        self.linear = nn.Linear(DIM, DIM)
        self.scale = (config or Config()).scale  # autoreg registers it: it moves

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) * self.scale


# --- a module-level global ------------------------------------------------------------------------

WINDOW = torch.hann_window(DIM)


class Global(_Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x * WINDOW)  # stray: device, dtype


class GlobalFixed(_Linear):
    def __init__(self) -> None:
        super().__init__()
        self.window = nn.Buffer(WINDOW.clone(), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x * self.window)


# --- a closure ------------------------------------------------------------------------------------


def shifted_relu(shift: float) -> Callable[[torch.Tensor], torch.Tensor]:
    threshold = torch.full((DIM,), shift)

    def activation(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x - threshold)  # stray: device, dtype

    return activation


def shifted_relu_fixed(shift: float) -> Callable[[torch.Tensor], torch.Tensor]:
    def activation(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x - shift)

    return activation


class Closure(_Linear):
    def __init__(self) -> None:
        super().__init__()
        self.activation = shifted_relu(0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.activation(self.linear(x))


class ClosureFixed(Closure):
    def __init__(self) -> None:
        super().__init__()
        self.activation = shifted_relu_fixed(0.5)


# --- a float32 constant on the right device: it upcasts a bfloat16 model --------------------------


class Constant(_Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gain = torch.full((DIM,), 2.0, device=x.device)  # stray: dtype
        return self.linear(x) * gain


class ConstantFixed(_Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gain = torch.full((DIM,), 2.0, device=x.device, dtype=x.dtype)
        return self.linear(x) * gain


# --- a plain tensor attribute, used in forward ----------------------------------------------------


class PlainAttribute(_Linear):
    def __init__(self) -> None:
        super().__init__()
        self.offset = torch.ones(DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) + self.offset  # stray: device, dtype


class PlainAttributeFixed(autoreg.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(DIM, DIM)
        self.offset = torch.ones(DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) + self.offset


# --- not strays: what CUDA accepts from the CPU ---------------------------------------------------


class NotStrays(_Linear):
    """Clean: CUDA takes each of these CPU tensors next to its own."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = torch.tensor(2.0)  # 0-dim: a scalar to CUDA
        rows = torch.tensor([0, 1])  # indices of x[rows]: CUDA moves them
        y = self.linear(x)[:, rows] * scale
        steps = torch.arange(3).tolist()  # stays on the CPU: it never meets the device
        out = y.new_zeros(y.shape)
        out.copy_(torch.ones(y.shape))  # a copy from the CPU: a transfer
        return out + y * len(steps)


# --- two strays, each used several times: one finding per line and kind ---------------------------


class Several(_Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mask = torch.ones(DIM)  # stray: device, dtype
        bias = torch.zeros(DIM)  # stray: device, dtype
        y = self.linear(x) * mask
        y = y + bias
        return y * mask + mask - bias


# --- a carried runtime tensor (autoreg), for the test that the model given is left as it was ------


class Carrier(autoreg.Module):
    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.Linear(DIM, DIM)
        self.state: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        state = self.state if self.state is not None else x.new_zeros(x.shape[-1])
        self.state = torch.tanh(self.cell(x) + state).detach()  # carried: moves with .to()
        return self.state


# --- a recurrent state and activations kept in plain attributes: left behind by .to() ------------


class Recurrent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.Linear(DIM, DIM)
        self.h: torch.Tensor | None = None
        self.activations: list[torch.Tensor] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.h if self.h is not None else x.new_zeros(x.shape)
        self.h = torch.tanh(self.cell(x) + h)  # stored: kept with its autograd history
        self.activations.append(self.h.sum(-1))  # stored: put into the list in place
        return self.h


def tokens() -> tuple[torch.Tensor]:
    return (torch.randint(0, VOCAB, (2, 5), generator=torch.Generator().manual_seed(0)),)


def activations() -> tuple[torch.Tensor]:
    return (torch.randn(2, 5, DIM, generator=torch.Generator().manual_seed(0)),)


# (name, the stray model, the same model written right, its inputs)
PATTERNS: list[tuple[str, type[nn.Module], type[nn.Module], Callable[[], tuple[torch.Tensor]]]] = [
    ("arange-positions", Positions, PositionsFixed, tokens),
    ("tensor-lookup", Lookup, LookupFixed, activations),
    ("zeros-cache", Cache, CacheFixed, activations),
    ("randn-noise", Noise, NoiseFixed, activations),
    ("numpy-round-trip", Window, WindowFixed, activations),
    ("dataclass-config", Configured, ConfiguredFixed, activations),
    ("module-global", Global, GlobalFixed, activations),
    ("closure", Closure, ClosureFixed, activations),
    ("float32-constant", Constant, ConstantFixed, activations),
    ("plain-attribute", PlainAttribute, PlainAttributeFixed, activations),
    ("several-uses", Several, NotStrays, activations),
]


# --- a Llama written by hand, the way a careful author writes it: clean ---------------------------


@dataclasses.dataclass(frozen=True)
class LlamaConfig:
    vocab: int = 32000
    dim: int = 4096
    layers: int = 32
    heads: int = 32
    kv_heads: int = 32
    hidden: int = 11008
    max_len: int = 4096


class RMSNorm(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        variance = x.float().pow(2).mean(-1, keepdim=True)
        return self.weight * (x.float() * torch.rsqrt(variance + 1e-6)).to(x.dtype)


class Attention(nn.Module):
    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.heads, self.kv_heads = config.heads, config.kv_heads
        self.head_dim = config.dim // config.heads
        self.q = nn.Linear(config.dim, config.heads * self.head_dim, bias=False)
        self.k = nn.Linear(config.dim, config.kv_heads * self.head_dim, bias=False)
        self.v = nn.Linear(config.dim, config.kv_heads * self.head_dim, bias=False)
        self.o = nn.Linear(config.heads * self.head_dim, config.dim, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        batch, length, _ = x.shape
        q = self.q(x).view(batch, length, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(x).view(batch, length, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v(x).view(batch, length, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        repeat = self.heads // self.kv_heads
        k, v = k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)
        out = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(out.transpose(1, 2).reshape(batch, length, -1))


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-second, first], dim=-1) * sin


class Block(nn.Module):
    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.attention_norm = RMSNorm(config.dim)
        self.attention = Attention(config)
        self.mlp_norm = RMSNorm(config.dim)
        self.gate = nn.Linear(config.dim, config.hidden, bias=False)
        self.up = nn.Linear(config.dim, config.hidden, bias=False)
        self.down = nn.Linear(config.hidden, config.dim, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x), cos, sin)
        h = self.mlp_norm(x)
        return x + self.down(nn.functional.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.embed = nn.Embedding(config.vocab, config.dim)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.layers))
        self.norm = RMSNorm(config.dim)
        self.head = nn.Linear(config.dim, config.vocab, bias=False)
        head_dim = config.dim // config.heads
        inv_freq = 1.0 / 10000 ** (torch.arange(0, head_dim, 2).float() / head_dim)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)
        angles = positions[:, None].float() * self.inv_freq.float()  # float32, on purpose
        angles = torch.cat([angles, angles], dim=-1)
        x = self.embed(ids)
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        for block in self.blocks:
            x = block(x, cos, sin)
        return self.head(self.norm(x))


class LlamaStray(Llama):
    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1])  # stray: device
        angles = positions[:, None].float() * self.inv_freq.float()
        angles = torch.cat([angles, angles], dim=-1)
        x = self.embed(ids)
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        for block in self.blocks:
            x = block(x, cos, sin)
        return self.head(self.norm(x))
