"""The model zoo: ten small models and a transformer layer, each written once, built three ways.

The classes are in one function, ``_classes(bases, store)`` (the transformer layer, sized, in
``_transformer``): one class body each, parametrised by its base classes and by how it stores a
tensor. ``variants`` builds the three variants the benchmarks compare:

- ``plain``: ``nn.Module``, tensors stored with ``setattr`` (``self.mask = t``): the bug autoreg
  fixes (``.to()`` leaves them behind);
- ``hand``: ``nn.Module``, ``register_buffer(name, t, persistent=False)`` (``REGISTER``; autoreg's
  default persistence);
- ``auto``: ``autoreg.Module``, tensors stored with ``setattr``: the one-line migration.

Both ways of storing are C callables (the builtin ``setattr`` and a ``functools.partial`` of
``nn.Module.register_buffer``), so neither variant runs a Python frame the other does not. Every
random draw happens in the same order in all three, so the same seed gives identical weights (the
move test in ``tests/benchmarks`` checks it).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

import autoreg

__all__ = ["LARGE", "MODELS", "REGISTER", "SPECS", "VARIANTS", "ModelSpec", "variants"]

Inputs = tuple[torch.Tensor, ...]
MakeInputs = Callable[[int], Inputs]  # batch size -> inputs
Store = Callable[[nn.Module, str, Any], None]
Bases = tuple[type[nn.Module], ...]
Factory = Callable[[Bases, Store], type[nn.Module]]

REGISTER: Store = functools.partial(nn.Module.register_buffer, persistent=False)
VARIANTS = ("plain", "hand", "auto")
# The models' sizes (their input batches use them too).
VOCAB, SEQ_DIM = 100, 32
FEATURES, GRID, STRIDE, CLASSES = 32, 8, 16, 5  # the detection heads
ANCHOR_SIZES = (32.0, 64.0, 128.0)
PYRAMID = ((8, 8), (4, 16), (2, 32))  # (grid, stride) per level
BOX = ("mean", "std")
RNN_INPUT, RNN_HIDDEN = 32, 64
MIX_DIM, MIX_GROUPS = 32, 8
NEST_DIM = 32


def variants(factory: Factory, base: type[nn.Module] = nn.Module) -> dict[str, type[nn.Module]]:
    """The three variants of ``factory``'s class on ``base`` (autoreg's mixin goes first)."""
    auto = (autoreg.Module,) if base is nn.Module else (autoreg.AutoRegisterMixin, base)
    ways = {"plain": ((base,), setattr), "hand": ((base,), REGISTER), "auto": (auto, setattr)}
    return {variant: factory(bases, store) for variant, (bases, store) in ways.items()}


def _store_items(module: nn.Module, store: Store, name: str, items: list[Any] | dict[str, Any]):
    """A list or dict of tensors: one attribute as it is, or (``hand``) one buffer per entry."""
    if store is not REGISTER:
        store(module, name, items)
        return
    for key, tensor in items.items() if isinstance(items, dict) else enumerate(items):
        store(module, f"{name}_{key}", tensor)


@dataclass(frozen=True)
class ModelSpec:
    """One zoo model: what it holds, how to make an input batch for it, and its classes."""

    name: str
    make_inputs: MakeInputs
    hand_note: str = ""  # where ``hand`` holds its tensors otherwise than one buffer each
    # reduce-overhead: kept outside the CUDA-graph pool (forward._StateOutsideGraph says why)
    state_written_in_forward: tuple[str, ...] = ()
    factory: Factory | None = None  # None: the class of that name in ``_classes``

    @functools.cached_property
    def classes(self) -> dict[str, type[nn.Module]]:
        return variants(self.factory or (lambda bases, store: _classes(bases, store)[self.name]))

    @property
    def about(self) -> str:
        """What the model holds: its class's docstring."""
        return " ".join((self.classes["hand"].__doc__ or "").split())

    def build(self, variant: str) -> nn.Module:
        """A fresh instance of ``variant`` in eval mode, its random draws seeded alike."""
        torch.manual_seed(0)
        return self.classes[variant]().eval()


def _inputs(*shape: int, draw: Callable[..., torch.Tensor] = torch.randn) -> MakeInputs:
    """Inputs of ``(batch, *shape)`` drawn by ``draw``, the same numbers on every call."""
    return lambda batch: (draw((batch, *shape), generator=torch.Generator().manual_seed(1234)),)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-second, first], dim=-1) * sin


def _anchors(grid: int, stride: int, sizes: tuple[float, ...]) -> torch.Tensor:
    """``(grid * grid * len(sizes), 4)`` anchors as (cx, cy, w, h), in image pixels."""
    centres = (torch.arange(grid) + 0.5) * stride
    cy, cx = torch.meshgrid(centres, centres, indexing="ij")
    xy = torch.stack([cx, cy], dim=-1).reshape(-1, 1, 2).expand(-1, len(sizes), 2)
    wh = torch.tensor(sizes).view(1, -1, 1).expand(grid * grid, len(sizes), 2)
    return torch.cat([xy, wh], dim=-1).reshape(-1, 4)


def _decode(anchors: torch.Tensor, deltas: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Box centres and sizes from anchors and regressed deltas."""
    centres = anchors[:, :2] + deltas[..., :2] * anchors[:, 2:]
    return centres, anchors[:, 2:] * deltas[..., 2:].exp()


def _transformer(dim: int, heads: int, max_len: int) -> Factory:
    """A pre-norm decoder layer ``dim`` wide: SDPA with a causal mask and rotary cos/sin tables."""
    head_dim = dim // heads

    def factory(bases: Bases, store: Store) -> type[nn.Module]:
        class TransformerBlock(*bases):
            """Pre-norm decoder layer: SDPA with a causal mask (bool) and rotary cos/sin tables."""

            def __init__(self) -> None:
                super().__init__()
                self.heads = heads
                self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
                self.qkv = nn.Linear(dim, 3 * dim, bias=False)
                self.proj = nn.Linear(dim, dim, bias=False)
                self.mlp = nn.Sequential(
                    nn.Linear(dim, 4 * dim), nn.GELU(approximate="tanh"), nn.Linear(4 * dim, dim)
                )
                store(self, "causal_mask", torch.ones(max_len, max_len, dtype=torch.bool).tril())
                inv_freq = 1.0 / 10000 ** (torch.arange(0, head_dim, 2) / head_dim)
                angles = torch.arange(max_len)[:, None] * inv_freq
                store(self, "cos", torch.cat([angles, angles], dim=-1).cos())
                store(self, "sin", torch.cat([angles, angles], dim=-1).sin())

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                batch, length, width = x.shape
                qkv = self.qkv(self.norm1(x)).view(batch, length, 3, self.heads, -1)
                q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
                cos, sin = self.cos[:length], self.sin[:length]
                q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
                mask = self.causal_mask[:length, :length]
                attended = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
                x = x + self.proj(attended.transpose(1, 2).reshape(batch, length, width))
                return x + self.mlp(self.norm2(x))

        return TransformerBlock

    return factory


@functools.cache
def _classes(bases: Bases, store: Store) -> dict[str, type[nn.Module]]:
    """Every zoo class but the transformer layer, on ``bases``, storing tensors with ``store``."""

    class ToyModule(*bases):
        """``nn.Linear(2, 2)`` and ``expected_moved_cuda_tensor = torch.tensor([0, 2, 3])``."""

        def __init__(self) -> None:
            super().__init__()
            self.layer = nn.Linear(2, 2)
            store(self, "expected_moved_cuda_tensor", torch.tensor([0, 2, 3]))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.layer(x).sum(-1, keepdim=True) * self.expected_moved_cuda_tensor

    class Net(*bases):
        """Parameters ``w1`` and ``w2`` (``requires_grad=False``), a tensor ``w3``."""

        def __init__(self) -> None:
            super().__init__()
            self.w1 = nn.Parameter(torch.rand(2, 3))
            self.w2 = nn.Parameter(torch.rand(2, 3), requires_grad=False)
            store(self, "w3", torch.rand(2, 3))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return (x @ self.w1 + x @ self.w2) * self.w3.sum(0)

    class SequenceModel(*bases):
        """``positions = torch.arange(seqlen)`` and ``inv_freq`` for sinusoidal encodings."""

        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(VOCAB, SEQ_DIM)
            self.head = nn.Linear(SEQ_DIM, VOCAB)
            store(self, "positions", torch.arange(64))
            store(self, "inv_freq", 1.0 / 10000 ** (torch.arange(0, SEQ_DIM, 2) / SEQ_DIM))

        def forward(self, tokens: torch.Tensor) -> torch.Tensor:
            angles = self.positions[: tokens.shape[1], None] * self.inv_freq
            encoding = torch.cat([angles.sin(), angles.cos()], dim=-1)
            return self.head(self.embed(tokens) + encoding)

    class NormalizedCNN(*bases):
        """Input normalisation mean/std of shape (1, 3, 1, 1)."""

        def __init__(self) -> None:
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
            )  # fmt: skip
            self.classifier = nn.Linear(32, 10)
            store(self, "mean", torch.tensor((0.485, 0.456, 0.406)).view(1, 3, 1, 1))
            store(self, "std", torch.tensor((0.229, 0.224, 0.225)).view(1, 3, 1, 1))

        def forward(self, images: torch.Tensor) -> torch.Tensor:
            images = (images - self.mean) / self.std
            return self.classifier(self.features(images).flatten(1))

    class DetectionHead(*bases):
        """Anchor boxes (192, 4) and box-coding variances."""

        def __init__(self) -> None:
            super().__init__()
            count = len(ANCHOR_SIZES)
            self.classify = nn.Conv2d(FEATURES, count * CLASSES, 3, padding=1)
            self.regress = nn.Conv2d(FEATURES, count * 4, 3, padding=1)
            store(self, "anchors", _anchors(GRID, STRIDE, ANCHOR_SIZES))
            store(self, "variances", torch.tensor([0.1, 0.1, 0.2, 0.2]))

        def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            batch = features.shape[0]
            deltas = self.regress(features).permute(0, 2, 3, 1).reshape(batch, -1, 4)
            scores = self.classify(features).permute(0, 2, 3, 1).reshape(batch, -1, CLASSES)
            centres, sizes = _decode(self.anchors, deltas * self.variances)
            boxes = torch.cat([centres - sizes / 2, centres + sizes / 2], dim=-1)
            return boxes, scores.sigmoid()

    class AnchorPyramid(*bases):
        """Anchors per pyramid level in a list, box-coder mean/std in a dict."""

        if store is REGISTER:  # one buffer per entry, read back as the list and the dict
            anchors = property(
                lambda self: [getattr(self, f"anchors_{i}") for i in range(len(PYRAMID))]
            )
            box_coder = property(lambda self: {k: getattr(self, f"box_coder_{k}") for k in BOX})

        def __init__(self) -> None:
            super().__init__()
            self.regress = nn.Conv2d(FEATURES, 4, 3, padding=1)
            levels = [_anchors(grid, stride, (4.0 * stride,)) for grid, stride in PYRAMID]
            _store_items(self, store, "anchors", levels)
            coder = {"mean": torch.zeros(4), "std": torch.tensor([0.1, 0.1, 0.2, 0.2])}
            _store_items(self, store, "box_coder", coder)

        def forward(self, *features: torch.Tensor) -> torch.Tensor:
            boxes = []
            for level, anchors in zip(features, self.anchors, strict=True):
                deltas = self.regress(level).permute(0, 2, 3, 1).reshape(level.shape[0], -1, 4)
                deltas = deltas * self.box_coder["std"] + self.box_coder["mean"]
                boxes.append(torch.cat(_decode(anchors, deltas), dim=-1))
            return torch.cat(boxes, dim=1)

    class RecurrentCell(*bases):
        """GRU-style cell; its hidden state is first written in forward."""

        def __init__(self) -> None:
            super().__init__()
            self.inp = nn.Linear(RNN_INPUT, 3 * RNN_HIDDEN)
            self.rec = nn.Linear(RNN_HIDDEN, 3 * RNN_HIDDEN)
            store(self, "state", None)  # first written in forward: autoreg carries it

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            state = self.state if self.state is not None else x.new_zeros(x.shape[0], RNN_HIDDEN)
            zi, ri, ni = self.inp(x).chunk(3, dim=-1)
            zh, rh, nh = self.rec(state).chunk(3, dim=-1)
            z, r = torch.sigmoid(zi + zh), torch.sigmoid(ri + rh)
            h = (1 - z) * torch.tanh(ni + r * nh) + z * state
            self.state = h.detach()
            return h

    class IndexMixer(*bases):
        """Integer index tensors: a channel permutation and a channel-to-group map."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(MIX_GROUPS, MIX_DIM)
            store(self, "permutation", torch.randperm(MIX_DIM))
            store(self, "group_of_channel", torch.arange(MIX_DIM) % MIX_GROUPS)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = x.index_select(-1, self.permutation)
            pooled = x.new_zeros(x.shape[0], MIX_GROUPS).index_add_(1, self.group_of_channel, x)
            return self.proj(pooled) + x

    class Leaf(*bases):
        def __init__(self) -> None:
            super().__init__()
            store(self, "gain", torch.linspace(0.5, 1.5, NEST_DIM))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * self.gain

    class Block(*bases):
        def __init__(self) -> None:
            super().__init__()
            self.leaf, self.linear = Leaf(), nn.Linear(NEST_DIM, NEST_DIM)
            store(self, "residual_scale", torch.full((NEST_DIM,), 0.5))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.residual_scale * torch.relu(self.linear(self.leaf(x)))

    class Stage(*bases):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn.ModuleList([Block(), Block()])
            store(self, "bias", torch.linspace(-0.1, 0.1, NEST_DIM))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for block in self.blocks:
                x = block(x)
            return x + self.bias

    class NestedModel(*bases):
        """3 stages x 2 blocks x leaf, 5 module levels (ModuleList included), a tensor at each."""

        def __init__(self) -> None:
            super().__init__()
            self.stages = nn.ModuleList([Stage(), Stage(), Stage()])
            store(self, "output_scale", torch.full((NEST_DIM,), 0.1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for stage in self.stages:
                x = stage(x)
            return x * self.output_scale

    models = (ToyModule, Net, SequenceModel, NormalizedCNN, DetectionHead, AnchorPyramid)
    return {cls.__name__: cls for cls in (*models, RecurrentCell, IndexMixer, NestedModel)}


MODELS = (
    ModelSpec("ToyModule", _inputs(2)),
    ModelSpec("Net", _inputs(2)),
    ModelSpec("SequenceModel", _inputs(32, draw=functools.partial(torch.randint, 0, VOCAB))),
    ModelSpec("TransformerBlock", _inputs(32, 64), factory=_transformer(64, 4, 64)),  # 32 tokens
    ModelSpec("NormalizedCNN", _inputs(3, 32, 32, draw=torch.rand)),
    ModelSpec("DetectionHead", _inputs(FEATURES, GRID, GRID)),
    ModelSpec(
        "AnchorPyramid",
        lambda batch: tuple(_inputs(FEATURES, grid, grid)(batch)[0] for grid, _ in PYRAMID),
        hand_note="(b) holds one buffer per list or dict entry (anchors_0, box_coder_std, ...) and "
        "rebuilds the list and the dict through properties on every read; (c) reads its carried "
        "list and dict from __dict__",
    ),
    ModelSpec(
        "RecurrentCell",
        _inputs(RNN_INPUT),
        hand_note="(b) registers register_buffer('state', None, persistent=False) in __init__: "
        "every read in forward goes through nn.Module.__getattr__, every write through "
        "nn.Module.__setattr__; (c) carries it in __dict__",
        state_written_in_forward=("state",),
    ),
    ModelSpec("IndexMixer", _inputs(MIX_DIM)),
    ModelSpec("NestedModel", _inputs(NEST_DIM)),
)

LARGE = ModelSpec("TransformerBlock4096", _inputs(512, 4096), factory=_transformer(4096, 32, 2048))
"""The GPU plan's layer, 201 M parameters, inputs of 512 tokens: the small models are launch
overhead on a GPU; this one is kernels."""

SPECS = {spec.name: spec for spec in (*MODELS, LARGE)}  # every model by name
