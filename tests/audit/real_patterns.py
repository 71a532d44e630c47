"""Models that reproduce patterns of real public code, written here from scratch (no third-party
code): the forward passes and training steps the audits must run and judge truthfully.

Each pattern names the kind of code it stands for. Lines the audits must report end with a
marker comment, ``# stray: KIND[, KIND]`` (``device``, ``dtype``, ``stored``), read by the tests;
a tensor made before ``forward`` is expected where it first enters the pass.
"""

from __future__ import annotations

import dataclasses
import math
import types

import numpy as np
import torch
from torch import nn
from torch.distributions import Normal
from torch.nn import functional as F  # noqa: N812

# --- an energy (Hamiltonian) network: torch.autograd.grad inside forward -------------------------


def symplectic(dim: int) -> torch.Tensor:
    """The canonical symplectic matrix [[0, I], [-I, 0]]."""
    eye = torch.eye(dim)
    return torch.cat([eye[dim // 2 :], -eye[: dim // 2]])


class Energy(nn.Module):
    """The vector field is the symplectic gradient of a learned scalar energy, as Hamiltonian
    neural networks compute it: ``forward`` differentiates the energy with respect to its input."""

    def __init__(self, dim: int = 2, hidden: int = 16) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, hidden), nn.Tanh(), nn.Linear(hidden, 1))
        self.J = symplectic(dim)  # a plain attribute: .to() leaves it behind

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        energy = self.net(x).sum()
        grad = torch.autograd.grad(energy, x, create_graph=True)[0]
        conservative = grad @ torch.eye(*self.J.shape)  # stray: device, dtype
        return conservative @ self.J.t()  # stray: device, dtype


def energy_inputs() -> tuple[torch.Tensor]:
    x = torch.randn(4, 2, generator=torch.Generator().manual_seed(0))
    return (x.requires_grad_(),)


# --- a reinforcement-learning policy: torch.distributions with argument validation ---------------


class GaussianActor(nn.Module):
    """A squashed Gaussian policy, as soft actor-critic writes it: ``Normal`` validates its
    arguments (reads their values), and the action bounds come from the environment."""

    def __init__(self, obs: int = 3, act: int = 2, low: np.ndarray | None = None) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(obs, 16), nn.ReLU())
        self.mean = nn.Linear(16, act)
        self.log_std = nn.Linear(16, act)
        if low is None:
            self.action_scale = torch.tensor(1.0)  # 0-dim: a scalar to CUDA
            self.action_bias = torch.tensor(0.0)
        else:
            high = -low
            self.action_scale = torch.as_tensor((high - low) / 2, dtype=torch.float32)
            self.action_bias = torch.as_tensor((high + low) / 2, dtype=torch.float32)

    def forward(self, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.body(state)
        mean, std = self.mean(h), self.log_std(h).clamp(-20, 2).exp()
        normal = Normal(mean, std)
        x = normal.rsample()
        y = torch.tanh(x)
        action = y * self.action_scale + self.action_bias  # stray: device, dtype
        log_prob = normal.log_prob(x) - torch.log(self.action_scale * (1 - y.pow(2)) + 1e-6)
        return action, log_prob.sum(-1, keepdim=True)


def bounded_actor() -> GaussianActor:
    return GaussianActor(low=np.array([-2.0, -1.0]))


def states() -> tuple[torch.Tensor]:
    return (torch.randn(5, 3, generator=torch.Generator().manual_seed(0)),)


# --- a neural ODE with an adaptive solver: data-dependent operations and loops on values ---------


def odeint_adaptive(
    func: nn.Module,
    y0: torch.Tensor,
    t: torch.Tensor,
    rtol: float = 1e-3,
    atol: float = 1e-4,
    max_steps: int = 100,
) -> torch.Tensor:
    """Heun's method with step-size control, as adaptive solvers write it: the times in float64
    (on purpose), the grid from ``unique`` (no meta kernel), loops that read values."""
    t = t.to(torch.float64)
    grid = torch.cat([t, t]).unique()
    y, now, dt = y0, grid[0], (grid[-1] - grid[0]) / 4
    trajectory, steps = [y0], 0
    for target in grid[1:]:
        while now < target:
            assert steps < max_steps, f"max_steps exceeded ({steps} >= {max_steps})"
            steps += 1
            h = torch.minimum(dt, target - now)
            k1 = func(now, y)
            k2 = func(now + h, y + h * k1)
            error = (h * (k2 - k1) / 2).abs().max()
            tolerance = atol + rtol * y.abs().max()
            if error <= tolerance:
                y, now = y + h * (k1 + k2) / 2, now + h
            ratio = float((tolerance / error.clamp_min(1e-12)).detach())
            dt = h * min(2.0, max(0.2, 0.9 * math.sqrt(ratio)))
        trajectory.append(y)
    return torch.stack(trajectory)


class Dynamics(nn.Module):
    def __init__(self, dim: int = 4) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, 16), nn.Tanh(), nn.Linear(16, dim))
        self.decay = torch.full((dim,), 0.1)  # a plain attribute: .to() leaves it behind

    def forward(self, t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.net(y) - self.decay * y  # stray: device, dtype


class ODEBlock(nn.Module):
    def __init__(self, dim: int = 4) -> None:
        super().__init__()
        self.func = Dynamics(dim)
        self.integration_time = torch.tensor([0, 1]).float()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.integration_time = self.integration_time.type_as(x)  # stray: stored
        return odeint_adaptive(self.func, x, self.integration_time)[-1]


def ode_inputs() -> tuple[torch.Tensor]:
    return (torch.randn(3, 4, generator=torch.Generator().manual_seed(0)),)


# --- an LLM reference implementation: float32 islands, a complex rotary table, a kv-cache -------


@dataclasses.dataclass
class LlamaArgs:
    dim: int = 32
    layers: int = 2
    heads: int = 4
    vocab: int = 50
    max_batch: int = 2
    max_seq: int = 16


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def _norm(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        output = self._norm(x.float()).type_as(x)  # float32 on purpose, cast back
        return output * self.weight


def rotary_table(dim: int, end: int, theta: float = 10000.0) -> torch.Tensor:
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim))
    angles = torch.outer(torch.arange(end, device=freqs.device), freqs).float()
    return torch.polar(torch.ones_like(angles), angles)  # complex64


def rotate(
    xq: torch.Tensor, xk: torch.Tensor, table: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    table = table.view(1, xq_.shape[1], 1, xq_.shape[-1])
    xq_out = torch.view_as_real(xq_ * table).flatten(3)
    xk_out = torch.view_as_real(xk_ * table).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


class Attention(nn.Module):
    def __init__(self, args: LlamaArgs) -> None:
        super().__init__()
        self.heads, self.head_dim = args.heads, args.dim // args.heads
        self.wq = nn.Linear(args.dim, args.dim, bias=False)
        self.wk = nn.Linear(args.dim, args.dim, bias=False)
        self.wv = nn.Linear(args.dim, args.dim, bias=False)
        self.wo = nn.Linear(args.dim, args.dim, bias=False)
        shape = (args.max_batch, args.max_seq, self.heads, self.head_dim)
        self.cache_k = torch.zeros(shape)
        self.cache_v = torch.zeros(shape)

    def forward(
        self, x: torch.Tensor, start: int, table: torch.Tensor, mask: torch.Tensor | None
    ) -> torch.Tensor:
        batch, length, _ = x.shape
        xq = self.wq(x).view(batch, length, self.heads, self.head_dim)
        xk = self.wk(x).view(batch, length, self.heads, self.head_dim)
        xv = self.wv(x).view(batch, length, self.heads, self.head_dim)
        xq, xk = rotate(xq, xk, table)
        self.cache_k = self.cache_k.to(xq)  # stray: stored
        self.cache_v = self.cache_v.to(xq)  # stray: stored
        self.cache_k[:batch, start : start + length] = xk
        self.cache_v[:batch, start : start + length] = xv
        keys = self.cache_k[:batch, : start + length].transpose(1, 2)
        values = self.cache_v[:batch, : start + length].transpose(1, 2)
        scores = xq.transpose(1, 2) @ keys.transpose(2, 3) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores + mask
        scores = F.softmax(scores.float(), dim=-1).type_as(xq)  # float32 on purpose
        out = (scores @ values).transpose(1, 2).reshape(batch, length, -1)
        return self.wo(out)


class Block(nn.Module):
    def __init__(self, args: LlamaArgs) -> None:
        super().__init__()
        self.attention_norm = RMSNorm(args.dim)
        self.attention = Attention(args)
        self.ffn_norm = RMSNorm(args.dim)
        self.w1 = nn.Linear(args.dim, 2 * args.dim, bias=False)
        self.w2 = nn.Linear(2 * args.dim, args.dim, bias=False)

    def forward(
        self, x: torch.Tensor, start: int, table: torch.Tensor, mask: torch.Tensor | None
    ) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x), start, table, mask)
        return h + self.w2(F.silu(self.w1(self.ffn_norm(h))))


class Llama(nn.Module):
    def __init__(self, args: LlamaArgs | None = None) -> None:
        super().__init__()
        args = args or LlamaArgs()
        self.embed = nn.Embedding(args.vocab, args.dim)
        self.layers = nn.ModuleList(Block(args) for _ in range(args.layers))
        self.norm = RMSNorm(args.dim)
        self.output = nn.Linear(args.dim, args.vocab, bias=False)
        self.freqs_cis = rotary_table(args.dim // args.heads, args.max_seq * 2)

    @torch.inference_mode()
    def forward(self, tokens: torch.Tensor, start: int = 0) -> torch.Tensor:
        _, length = tokens.shape
        h = self.embed(tokens)
        self.freqs_cis = self.freqs_cis.to(h.device)  # stray: stored
        table = self.freqs_cis[start : start + length]
        mask = None
        if length > 1:
            mask = torch.full((length, length), float("-inf"), device=tokens.device)
            mask = torch.triu(mask, diagonal=1)
            mask = torch.hstack([torch.zeros((length, start), device=tokens.device), mask])
            mask = mask.type_as(h)
        for layer in self.layers:
            h = layer(h, start, table, mask)
        return self.output(self.norm(h)).float()  # logits in float32 on purpose


def tokens() -> tuple[torch.Tensor]:
    return (torch.randint(0, 50, (2, 6), generator=torch.Generator().manual_seed(0)),)


# --- pytorch/examples' time_sequence_prediction: the code writes the dtype ----------------------


class Sequence(nn.Module):
    """Two LSTM cells whose states ``forward`` makes with ``dtype=torch.double``: right for the
    float64 model the example trains, wrong on the GPU, and wrong in float32 or bfloat16."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm1 = nn.LSTMCell(1, 8)
        self.lstm2 = nn.LSTMCell(8, 8)
        self.linear = nn.Linear(8, 1)

    def forward(self, input: torch.Tensor, future: int = 0) -> torch.Tensor:
        outputs = []
        h_t = torch.zeros(input.size(0), 8, dtype=torch.double)  # stray: device, dtype
        c_t = torch.zeros(input.size(0), 8, dtype=torch.double)  # stray: device, dtype
        h_t2 = torch.zeros(input.size(0), 8, dtype=torch.double)  # stray: device, dtype
        c_t2 = torch.zeros(input.size(0), 8, dtype=torch.double)  # stray: device, dtype
        output = input[:, :1]
        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs.append(output)
        for _ in range(future):
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs.append(output)
        return torch.cat(outputs, dim=1)


def sequence() -> Sequence:
    return Sequence().double()


def waves() -> tuple[torch.Tensor]:
    steps = torch.arange(10, dtype=torch.double)
    return (torch.sin(steps / 3 + torch.arange(3, dtype=torch.double)[:, None]),)


# --- a diffusion model's time embedding: .type(torch.float), and a device fixed when built ------


class TimeEmbedding(nn.Module):
    """The sinusoidal embedding of a diffusion U-Net: the integer timesteps become float32 by
    ``.type(torch.float)``, and the frequencies are made on ``self.device``, a device the class
    keeps from its constructor."""

    def __init__(self, channels: int = 4, time_dim: int = 8, device: str = "cpu") -> None:
        super().__init__()
        self.time_dim, self.device = time_dim, device
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.emb = nn.Sequential(nn.SiLU(), nn.Linear(time_dim, channels))

    def pos_encoding(self, t: torch.Tensor, channels: int) -> torch.Tensor:
        steps = torch.arange(0, channels, 2, device=self.device).float()  # stray: device, dtype
        inv_freq = 1.0 / (10000 ** (steps / channels))
        pos_enc_a = torch.sin(t.repeat(1, channels // 2) * inv_freq)
        pos_enc_b = torch.cos(t.repeat(1, channels // 2) * inv_freq)
        return torch.cat([pos_enc_a, pos_enc_b], dim=-1)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        t = t.unsqueeze(-1).type(torch.float)  # stray: dtype
        t = self.pos_encoding(t, self.time_dim)
        return self.conv(x) + self.emb(t)[:, :, None, None]


class Schedule(nn.Module):
    """A diffusion model's training forward: integer timesteps divided into a float32 fraction,
    fed to a layer."""

    def __init__(self, steps: int = 10) -> None:
        super().__init__()
        self.steps = steps
        self.time = nn.Linear(1, 4)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return x + self.time((t / self.steps)[:, None])  # stray: dtype


def diffusion_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return torch.randn(2, 4, 5, 5, generator=generator), torch.tensor([3, 7])


# --- a tensor in a config object, used by the loss: found only by auditing the step --------------


@dataclasses.dataclass
class LossConfig:
    class_weights: torch.Tensor
    smoothing: float = 0.0


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(4, 3)
        self.cfg = LossConfig(torch.tensor([1.0, 2.0, 0.5]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self(x), y, weight=self.cfg.class_weights)  # stray: device, dtype


def train_step(model: Classifier, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = model.loss(x, y)
    loss.backward()
    optimizer.step()
    return loss.detach()


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return torch.randn(6, 4, generator=generator), torch.tensor([0, 1, 2, 0, 1, 2])


# --- a table forward moves itself, when its device or dtype is not the input's -----------------


class LazyTable(nn.Module):
    """A relative positional table kept as a plain attribute, which forward moves to the input's
    device and dtype only when they differ (speech encoders do so): on a GPU the comparison is
    true and the table moves. Nothing in forward meets the model's tensors on another device;
    the store is reported, as every tensor forward stores where ``.to()`` leaves it (the
    attribute is a finding of the other audit, with the fix for both)."""

    def __init__(self, dim: int = 4, length: int = 8) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.table = torch.randn(length, dim, generator=torch.Generator().manual_seed(0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.table.device != x.device or self.table.dtype != x.dtype:
            self.table = self.table.to(device=x.device, dtype=x.dtype)  # stray: stored
        return x + self.proj(self.table[: x.shape[0]])


class SameDeviceTable(LazyTable):
    """The same, with the comparison the other way round."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        same = (self.table.device, self.table.dtype) == (x.device, x.dtype)
        table = self.table if same else self.table.to(x)
        return x + self.proj(table[: x.shape[0]])


class UnmovedTable(LazyTable):
    """Compares the devices, and moves the wrong tensor: the table stays where it was."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.table.device != x.device:
            x = x.to(self.table.device)  # stray: device
        return x + self.proj(self.table[: x.shape[0]])  # stray: device, dtype


class IndexedTable(LazyTable):
    """Rows of a table ``.to()`` left behind, picked by positions made on the CPU: CUDA takes
    the positions from the CPU, the table is the stray."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(x.shape[0])
        return self.proj(x) + self.table[positions]  # stray: device, dtype


class PlainFrequencies(nn.Module):
    """Rotary frequencies kept as a plain attribute, and positions made where they are and cast
    to their dtype: every tensor here stays on the CPU, and nothing is copied back from the
    model's device."""

    def __init__(self, dim: int = 4) -> None:
        super().__init__()
        self.inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = torch.arange(x.shape[0], device=self.inv_freq.device)  # stray: device
        freqs = torch.outer(t.type_as(self.inv_freq), self.inv_freq)  # stray: device, dtype
        return self.proj(x) * torch.cat((freqs, freqs), -1).cos()


class KeptDevice(nn.Module):
    """A device kept from the constructor (``self.device``), given with a dtype to a tensor made
    in forward: the fix names the attribute, whose device ``.to()`` does not change."""

    def __init__(self, dim: int = 4) -> None:
        super().__init__()
        self.device = torch.device("cpu")
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        steps = torch.arange(x.shape[0]).to(self.device, torch.float32)  # stray: device, dtype
        return self.proj(x) + steps.unsqueeze(-1)


class CudaOnlyBranch(nn.Module):
    """Asks whether it runs on CUDA: the audit, on the CPU, takes the CPU branch, so the stray
    only the CUDA branch makes is never made in the pass (docs/audits.md says so)."""

    def __init__(self, dim: int = 4) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.proj(x)
        if y.is_cuda or y.device.type == "cuda":
            scale = torch.ones(y.shape[-1])  # a stray on a GPU, never run in the audit
        else:
            scale = torch.ones(y.shape[-1], dtype=y.dtype, device=y.device)
        return y * scale


class WritesCpuZero(CudaOnlyBranch):
    """Writes ``"cpu:0"``, the device the audit gives the model's tensors: taken for it (a stray
    on a GPU, missed; docs/audits.md says so)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.proj(x)
        return y * torch.ones(y.shape[-1], dtype=y.dtype, device="cpu:0")


class DeviceCopies(nn.Module):
    """Devices passed on as copies of ``x.device``: a new ``torch.device`` of it, its string (code
    that logs or configures devices by name); and ``"cpu"`` written out, the default device."""

    def __init__(self, dim: int = 4) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        device = str(x.device)
        ones = torch.ones(x.shape[-1], dtype=x.dtype, device=torch.device(x.device))
        rows = torch.arange(x.shape[0], device=device).unsqueeze(-1)
        fixed = torch.full(x.shape, 2.0, device="cpu")  # stray: device, dtype
        return self.proj(x) * ones + rows + fixed


# --- 0-dim tensors made on the CPU: scalars to element-wise kernels, strays to the others --------


class ScaledCosineAttention(nn.Module):
    """Attention logits scaled by a learned temperature clamped from above, the bound a 0-dim
    tensor made on the CPU (as scaled-cosine vision transformers write it): CUDA's
    ``clamp.Tensor`` checks the devices of all its tensors, 0-dim or not, and raises. The
    0-dim factor of the product is a scalar to CUDA's ``mul``."""

    def __init__(self, heads: int = 2) -> None:
        super().__init__()
        self.logit_scale = nn.Parameter(torch.log(10 * torch.ones(heads, 1, 1)))
        self.null = nn.Embedding(3, 4)

    def forward(self, attn: torch.Tensor) -> torch.Tensor:
        limit = torch.log(torch.tensor(100.0))  # stray: device
        scale = torch.clamp(self.logit_scale, max=limit).exp()
        half = torch.tensor(0.5)
        null = self.null(torch.tensor(2))  # stray: device
        pooled = torch.stack([attn.mean(), torch.tensor(0.0)])  # stray: device
        return attn * scale * half + null.sum() + pooled.sum()


# --- complex values of the model's own: a diagonal state space kernel -----------------------------


class ComplexDiagonal(nn.Module):
    """A complex diagonal kept as a real parameter (``view_as_real``), as diagonal state space
    layers keep theirs, and a matrix made complex on purpose with ``dtype=A.dtype``: the model's
    dtype in complex form, not a stray."""

    def __init__(self, n: int = 4) -> None:
        super().__init__()
        diagonal = -0.5 + 1j * torch.arange(n, dtype=torch.float32)
        self.A = nn.Parameter(torch.view_as_real(diagonal))
        self.w = nn.Parameter(torch.eye(n) * 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        A = torch.view_as_complex(self.A)
        R = torch.eye(A.shape[0], dtype=A.dtype, device=A.device) + self.w
        return (torch.linalg.solve(R, A.unsqueeze(-1)).squeeze(-1) * x).real


class DoubleComplex(ComplexDiagonal):
    """The same matrix made in complex128, twice the model's precision: a stray of its dtype."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        A = torch.view_as_complex(self.A)
        R = torch.eye(A.shape[0], dtype=torch.complex128, device=A.device)  # stray: dtype
        R = R + self.w
        return (torch.linalg.solve(R, A.unsqueeze(-1)).squeeze(-1) * x).real


# --- inputs in a plain object: a padded batch and its mask --------------------------------------


class PaddedBatch:
    """A batch of padded tensors and the mask of their padding, as detection transformers pass
    their images: the caller moves it with the model (its own ``to()``)."""

    def __init__(self, tensors: torch.Tensor, mask: torch.Tensor) -> None:
        self.tensors, self.mask = tensors, mask

    def to(self, device: torch.device | str) -> PaddedBatch:
        return PaddedBatch(self.tensors.to(device), self.mask.to(device))


class BatchEncoder(nn.Module):
    def __init__(self, dim: int = 4) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, batch: PaddedBatch) -> torch.Tensor:
        padding = torch.ones(batch.tensors.shape[-1])  # stray: device, dtype
        out = self.proj(batch.tensors).masked_fill(batch.mask[..., None], 0.0)
        return out + padding


def padded_batch() -> tuple[PaddedBatch]:
    tensors = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(0))
    return (PaddedBatch(tensors, torch.zeros(2, 3, dtype=torch.bool)),)


# --- a GPT block: learned positions looked up with an index made in forward, and sdpa -------------


class PositionalAttention(nn.Module):
    """Positions made in forward as integers on the input's device, looked up in a learned
    table, then causal ``scaled_dot_product_attention`` (as minimal GPTs write it). sdpa's CPU
    kernel returns a float32 log-sum-exp beside its bfloat16 output, which its backward takes:
    torch's precision, not the index's dtype."""

    def __init__(self, dim: int = 16, heads: int = 2, length: int = 8) -> None:
        super().__init__()
        self.heads = heads
        self.positions = nn.Embedding(length, dim)
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, dim = x.shape
        positions = torch.arange(0, length, dtype=torch.long, device=x.device)
        x = x + self.positions(positions)
        qkv = self.qkv(x).view(batch, length, 3, self.heads, dim // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def attention_step(model: PositionalAttention, x: torch.Tensor) -> torch.Tensor:
    loss = model(x).square().mean()
    loss.backward()
    return loss


def sequence_batch() -> tuple[torch.Tensor]:
    return (torch.randn(2, 8, 16, generator=torch.Generator().manual_seed(0)),)


# --- random draws that only become a mask or an order: label dropout, token shuffling -------------


class DroppedLabels(nn.Module):
    """Class labels dropped at random for classifier-free guidance (as diffusion transformers
    write it): a float32 draw compared into a bool mask, which picks the labels looked up in a
    table, then sdpa. No floating value has the draw's dtype: not a dtype stray, and sdpa's
    float32 log-sum-exp, which its backward takes, is torch's."""

    def __init__(self, dim: int = 16, heads: int = 2, classes: int = 10) -> None:
        super().__init__()
        self.heads = heads
        self.classes = classes
        self.labels = nn.Embedding(classes + 1, dim)
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        batch, length, dim = x.shape
        drop = torch.rand(labels.shape[0], device=labels.device) < 0.1
        labels = torch.where(drop, self.classes, labels)
        x = x + self.labels(labels)[:, None]
        qkv = self.qkv(x).view(batch, length, 3, self.heads, dim // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v)


def labelled_batch() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return torch.randn(2, 8, 16, generator=generator), torch.tensor([3, 7])


def labelled_step(model: DroppedLabels, x: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    loss = model(x, labels).square().mean()
    loss.backward()
    return loss


class ShuffledTokens(nn.Module):
    """Tokens shuffled and kept at random (as masked autoencoders write it): noise drawn per
    token only orders them (``argsort``, ``topk``'s indices), a keep mask drawn without
    ``device=`` is a bool, and a loss mask of ones is made without ``dtype=``. The mask of ones
    promotes the bfloat16 loss; the keep mask stays on the default device; the noise's dtype
    reaches no floating value."""

    def __init__(self, dim: int = 4) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, dim = x.shape
        noise = torch.rand(batch, length, device=x.device)
        order = noise.argsort(dim=1)
        kept = noise.topk(length // 2, dim=1).indices
        keep = torch.rand(batch, length // 2) < 0.9  # stray: device
        mask = torch.ones(batch, length, device=x.device)  # stray: dtype
        mask = torch.gather(mask, 1, order)[:, : length // 2]
        h = torch.gather(self.proj(x), 1, kept[..., None].expand(-1, -1, dim))
        return (h.square().mean(-1) * mask * keep).mean()


# --- a selective scan: float32 on purpose and a state made without dtype= -------------------------


class SelectiveScan(nn.Module):
    """A decay computed in float32 from a log parameter, and a scan state made with the input's
    device but not its dtype (as minimal state space models write them): in a bfloat16 model
    both are float32; the state promotes the update, and with the state fixed the decay alone
    still reaches the output projection in float32, which raises. One run lists both."""

    def __init__(self, dim: int = 4) -> None:
        super().__init__()
        self.log_decay = nn.Parameter(torch.zeros(dim))
        self.out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        decay = -torch.exp(self.log_decay.float())  # stray: dtype
        state = torch.zeros(x.shape, device=x.device)  # stray: dtype
        state = decay * state + x
        return self.out(state)


# --- a normalizing flow: log-determinants that only meet each other, then leave in the output --


class AffineStep(nn.Module):
    def __init__(self, dim: int = 3) -> None:
        super().__init__()
        self.scale = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        log_det = torch.zeros(x.shape[0])  # stray: device, dtype
        s = self.scale(x)
        return x * torch.exp(s), log_det


class Flow(nn.Module):
    """Each step's log-determinant starts as a tensor made without ``device=`` (as flow libraries
    write it) and the flow sums them into one more: the strays only ever meet each other, and
    reach the caller in the output beside the model's tensors, where ``prior.log_prob(z) +
    log_det`` fails on a GPU. The indices and the 0-dim count it returns are the caller's to use
    as they are (an index, a scalar), and a copy back to the CPU is on purpose."""

    def __init__(self, dim: int = 3) -> None:
        super().__init__()
        self.steps = nn.ModuleList([AffineStep(dim), AffineStep(dim)])

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        total = torch.zeros(x.shape[0])  # stray: device, dtype
        for step in self.steps:
            x, log_det = step(x)
            total = total + log_det
        order = torch.arange(x.shape[0])
        count = torch.tensor(float(len(self.steps)))
        return x, total, order, count, x.detach().cpu()


# --- a policy that returns its distribution: a fixed std lifted from numpy ------------------------


class FixedStdPolicy(nn.Module):
    """A Gaussian policy with a fixed exploration noise, lifted from numpy in forward, that
    returns the distribution itself (as RL libraries' policies do): the caller samples from it,
    where the std meets the mean on the model's device and in its dtype."""

    def __init__(self, obs: int = 5, act: int = 3) -> None:
        super().__init__()
        self.mean = nn.Linear(obs, act)
        self.std = 0.5

    def forward(self, state: torch.Tensor) -> Normal:
        std = torch.from_numpy(np.array([self.std])).float()  # stray: device, dtype
        return Normal(self.mean(state), std)


# --- a kv-cache in the config's dtype, filled at positions made in forward ------------------------


class ConfiguredCache(nn.Module):
    """A cache made in the dtype a config names (float32), written at positions forward makes
    (as decoders' generate steps write their kv-cache): in bfloat16, index_copy_ rejects the
    float32 cache next to the bfloat16 keys. The positions are an index, in no floating dtype."""

    def __init__(self, dim: int = 4) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.cache_dtype = torch.float32

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(x.shape[1], device=x.device)
        shape = (1, 8, x.shape[-1])
        cache = torch.zeros(shape, device=x.device, dtype=self.cache_dtype)  # stray: dtype
        cache.index_copy_(1, positions, self.proj(x))
        return cache.sum(1)


class RoundedIndex(nn.Module):
    """An index computed from the model's values, which bfloat16 rounds out of the table's range:
    the model raises in bfloat16 with torch's own error, which the audit reports as it is."""

    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Parameter(torch.randn(300, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        index = (x.sum() * 0 + 299).long().view(1)
        return self.table[index]


# --- convolutions with a bias: the dtype check before any operation runs --------------------------


class NoisyConvolution(nn.Module):
    """Noise made with the input's device but not its dtype, into a 1-d convolution with a bias,
    then a float32 cast of the model's values into a 2-d one: torch's convolutions compare the
    input's dtype with the bias's before dispatching anything."""

    def __init__(self, channels: int = 4) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(channels, channels, 1)
        self.conv2 = nn.Conv2d(channels, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        noise = torch.randn(x.shape, device=x.device)  # stray: dtype
        y = x + self.conv1(noise)
        image = y.unsqueeze(-1).float()  # stray: dtype
        return self.conv2(image).squeeze(-1).type_as(x)


# --- one tensor given to several modules: a causal mask made once for every block -----------------


class MaskedEncoder(nn.Module):
    def __init__(self, mask: torch.Tensor, dim: int = 4) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.mask = mask

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x) + self.mask  # stray: device, dtype


class MaskedDecoder(MaskedEncoder):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x) * self.mask


class SharedMask(nn.Module):
    """Two classes hold one mask, made once and handed to both (as transformers that build one
    causal mask for all their blocks do). ``.to()`` leaves both references: each class is a
    finding of the attribute audit."""

    def __init__(self, dim: int = 4) -> None:
        super().__init__()
        mask = torch.ones(dim)
        self.encoder, self.decoder = MaskedEncoder(mask, dim), MaskedDecoder(mask, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encoder(x))


class HalfFixedEncoder(MaskedEncoder):
    """The encoder with its fix written: the mask is its buffer."""

    def __init__(self, mask: torch.Tensor, dim: int = 4) -> None:
        super().__init__(mask, dim)
        del self.mask
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x) + self.mask


class HalfFixedDecoder(MaskedEncoder):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x) * self.mask  # stray: device, dtype


class HalfFixedMask(nn.Module):
    """The same after the encoder alone was fixed: the decoder's reference is to the encoder's
    buffer, which ``.to()`` replaces in the encoder and leaves in the decoder."""

    def __init__(self, dim: int = 4) -> None:
        super().__init__()
        mask = torch.ones(dim)
        self.encoder, self.decoder = HalfFixedEncoder(mask, dim), HalfFixedDecoder(mask, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encoder(x))


# --- tensors held in plain objects: a namespace, a class with __slots__, numpy arrays -------------


class Slotted:
    __slots__ = ("name", "offsets")

    def __init__(self, offsets: torch.Tensor) -> None:
        self.offsets = offsets
        self.name = "slotted"


class Holders(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 3)
        self.stats = types.SimpleNamespace(mean=torch.zeros(3), std=torch.ones(3), count=2)
        self.slotted = Slotted(torch.arange(3))
        self.window = np.hanning(3)  # a numpy array: .to() never moves it


# --- a block whose MLP is a lambda over its own submodules (a GPT written in the minGPT way) -----

_SCALE = torch.full((8,), 2.0)  # a tensor of no module: .to() leaves it behind


class LambdaMLP(nn.Module):
    """``forward`` calls functions kept as attributes that reach the block's own modules through
    their closures (a cell holding the submodule, one holding ``self``, a default argument): the
    parameters they reach are the block's, which ``.to()`` converts. ``outside`` reaches a tensor
    of no module."""

    def __init__(self, dim: int = 8, outside: bool = False) -> None:
        super().__init__()
        self.mlp = nn.ModuleDict({"fc": nn.Linear(dim, 2 * dim), "proj": nn.Linear(2 * dim, dim)})
        m = self.mlp
        self.mlpf = lambda x: m["proj"](torch.relu(m["fc"](x)))
        self.gate = lambda x: x * self.mlp["proj"].bias
        self.norm = lambda x, m=m: x - m["proj"].bias
        self.outside = outside

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm(self.gate(x + self.mlpf(x)))
        if self.outside:
            y = y * _SCALE  # stray: device, dtype
        return y


# --- a parameterless sinusoidal embedding of integer timesteps (a denoising U-Net's) -------------


class SinusoidalSteps(nn.Module):
    """No parameter of its own, integer timesteps in: the floats it computes from them are
    float32 whatever the model's dtype, and it holds no floating tensor of the model to name."""

    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        half = self.dim // 2
        scale = -math.log(10000) / (half - 1)
        freq = torch.exp(torch.arange(half, device=t.device) * scale)  # stray: dtype
        angles = t[:, None] * freq[None, :]
        return torch.cat((angles.sin(), angles.cos()), dim=-1)


class StepConditioned(nn.Module):
    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.time = nn.Sequential(SinusoidalSteps(dim), nn.Linear(dim, dim))

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return x + self.time(t)


# --- a norm computed in float32 on purpose, its weights left in the model's dtype (whisper's) ----


class Float32Norm(nn.LayerNorm):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.float()).type(x.dtype)  # stray: dtype


class NormedBlock(nn.Module):
    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.norm = Float32Norm(dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.norm(x))


# --- a preconditioner rounding a noise level to its table, in float32 on purpose (edm's) ---------


class RoundedNoise(nn.Module):
    """The noise level, cast to float32 on purpose before a helper rounds it, meets a view of the
    model's table in ``cdist``; the module also holds a layer whose weight that line never
    touches."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(1, 4)
        self.register_buffer("levels", torch.linspace(0.0, 4.0, 9))

    def forward(self, sigma: torch.Tensor) -> torch.Tensor:
        sigma = sigma.to(torch.float32)
        return self.embed(self.levels[self.nearest(sigma)].reshape(-1, 1))

    def nearest(self, sigma: torch.Tensor) -> torch.Tensor:
        sigma = torch.as_tensor(sigma)
        near = torch.cdist(
            sigma.to(self.levels.device).to(torch.float32).reshape(1, -1, 1),  # stray: dtype
            self.levels.reshape(1, -1, 1),
        )
        return near.argmin(2).flatten()


# --- a denoiser that casts its timesteps to float32 itself, sampled with float timesteps (DDIM) --


def step_phases(t: torch.Tensor, dim: int) -> torch.Tensor:
    """Timesteps times frequencies, in float32 whatever dtype the timesteps come in."""
    half = dim // 2
    freqs = torch.exp(torch.arange(half, dtype=torch.float32) * -(math.log(1e4) / (half - 1)))
    return t.float()[:, None] * freqs.to(t.device)[None, :]  # stray: dtype


class FloatSteps(nn.Module):
    """A denoiser whose forward casts the timesteps to float32 itself (``timesteps.float()``):
    in a bfloat16 model the float32 embedding meets its Linear there, whatever the caller's
    timesteps are."""

    def __init__(self, dim: int = 16) -> None:
        super().__init__()
        self.dim = dim
        self.mlp = nn.Linear(dim, 4)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        phases = step_phases(t, self.dim)
        return x + self.mlp(torch.cat([phases.sin(), phases.cos()], dim=1))


def float_steps_sample(model: FloatSteps, x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """A sampler that passes its timesteps as floats made without ``dtype=`` (DDIM's
    ``(torch.ones(n) * i).to(x.device)``), and indexes a table with them: the forward's own cast
    decides their dtype, and made in bfloat16 the step 999 would be 1000, one past the table."""
    t = (torch.ones(x.shape[0]) * 999).to(x.device)
    return model(x, t) * table[t.long()][:, None]


class SplitPhases(nn.Module):
    """The frequencies moved on a line of their own (``freqs.to(device=t.device)``, DDIM's and
    guided-diffusion's embeddings), then multiplied by the timesteps cast to float32 on purpose:
    the cast decides the dtype of the phases, whatever the frequencies' is."""

    def __init__(self, dim: int = 16) -> None:
        super().__init__()
        self.mlp = nn.Linear(dim, 4)

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        half = self.mlp.in_features // 2
        freqs = torch.exp(torch.arange(half, dtype=torch.float32) * -(math.log(1e4) / (half - 1)))
        freqs = freqs.to(device=t.device)  # stray: dtype
        phases = t.float()[:, None] * freqs[None, :]  # stray: dtype
        return self.mlp(torch.cat([phases.sin(), phases.cos()], dim=1))
