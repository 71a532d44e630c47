"""The model zoo: ten small models and a transformer layer at two sizes, each written three ways.

Each model is written three ways with the same math and the same weights:

(a) ``plain``: ``nn.Module`` with bare tensor attributes - the bug autoreg fixes.
(b) ``hand``:  ``nn.Module`` with every tensor registered by hand (``register_buffer`` /
    ``nn.Buffer``, non-persistent, as autoreg's default).
(c) ``auto``:  ``autoreg.Module`` with bare tensor attributes.

(a) and (c) come from one class statement whose base is the only difference (``_toy(nn.Module)`` and
``_toy(autoreg.Module)``): the migration is a one-line change, and the two cannot drift apart. The
math is one ``forward`` function per model, shared by all three. Every random draw happens in the
same order in all three, so building each under the same seed gives identical weights (checked by
``benchmarks.move``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

import autoreg

__all__ = ["LAYERS", "MODELS", "VARIANTS", "ModelSpec", "by_name"]

VARIANTS = ("plain", "hand", "auto")
"""(a), (b), (c), in that order."""

Inputs = tuple[torch.Tensor, ...]


@dataclass(frozen=True)
class ModelSpec:
    """One zoo model: its three variants and how to make an input batch for it."""

    name: str
    about: str
    plain: type[nn.Module]
    hand: type[nn.Module]
    auto: type[nn.Module]
    make_inputs: Callable[[int], Inputs]
    hand_note: str = ""  # how (b) holds its tensors, where it is not one register_buffer each
    # Tensors forward writes to the module. Under mode="reduce-overhead" they are CUDA-graph
    # outputs, which the next replay overwrites: the caller must keep them outside the graph.
    state_written_in_forward: tuple[str, ...] = ()
    # The move check's inputs, where a batch of 2 from make_inputs would be needlessly large.
    check_inputs: Callable[[], Inputs] | None = None

    def inputs_for_check(self) -> Inputs:
        """A small batch for the move check."""
        return self.check_inputs() if self.check_inputs else self.make_inputs(2)

    def build(self, variant: str, seed: int = 0) -> nn.Module:
        """A fresh instance of ``variant`` in eval mode, its random draws seeded with ``seed``."""
        cls = {"plain": self.plain, "hand": self.hand, "auto": self.auto}[variant]
        torch.manual_seed(seed)
        return cls().eval()


def _generator() -> torch.Generator:
    return torch.Generator().manual_seed(1234)


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=_generator())


# --- 1. ToyModule: the seeds' first example ------------------------------------------------------


def _toy_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    return self.layer(x).sum(-1, keepdim=True) * self.expected_moved_cuda_tensor


def _toy(base: type[nn.Module]) -> type[nn.Module]:
    class ToyModule(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            self.layer = nn.Linear(2, 2)
            self.expected_moved_cuda_tensor = torch.tensor([0, 2, 3])

        forward = _toy_forward

    return ToyModule


class ToyModuleHand(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(2, 2)
        expected = torch.tensor([0, 2, 3])
        self.register_buffer("expected_moved_cuda_tensor", expected, persistent=False)

    forward = _toy_forward


# --- 2. Net: a Parameter, a Parameter without grad, and a plain tensor ---------------------------


def _net_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    return (x @ self.w1 + x @ self.w2) * self.w3.sum(0)


def _net(base: type[nn.Module]) -> type[nn.Module]:
    class Net(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            self.w1 = nn.Parameter(torch.rand(2, 3))
            self.w2 = nn.Parameter(torch.rand(2, 3), requires_grad=False)
            self.w3 = torch.rand(2, 3)

        forward = _net_forward

    return Net


class NetHand(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w1 = nn.Parameter(torch.rand(2, 3))
        self.w2 = nn.Parameter(torch.rand(2, 3), requires_grad=False)
        self.w3 = nn.Buffer(torch.rand(2, 3), persistent=False)

    forward = _net_forward


# --- 3. A sequence model that keeps torch.arange(seqlen) positions --------------------------------

VOCAB, SEQLEN, SEQ_DIM = 100, 64, 32


def _sequence_forward(self: Any, tokens: torch.Tensor) -> torch.Tensor:
    angles = self.positions[: tokens.shape[1], None] * self.inv_freq
    encoding = torch.cat([angles.sin(), angles.cos()], dim=-1)
    return self.head(self.embed(tokens) + encoding)


def _sequence(base: type[nn.Module]) -> type[nn.Module]:
    class SequenceModel(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(VOCAB, SEQ_DIM)
            self.head = nn.Linear(SEQ_DIM, VOCAB)
            self.positions = torch.arange(SEQLEN)
            self.inv_freq = 1.0 / 10000 ** (torch.arange(0, SEQ_DIM, 2) / SEQ_DIM)

        forward = _sequence_forward

    return SequenceModel


class SequenceModelHand(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, SEQ_DIM)
        self.head = nn.Linear(SEQ_DIM, VOCAB)
        self.register_buffer("positions", torch.arange(SEQLEN), persistent=False)
        inv_freq = 1.0 / 10000 ** (torch.arange(0, SEQ_DIM, 2) / SEQ_DIM)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    forward = _sequence_forward


def _sequence_inputs(batch: int) -> Inputs:
    return (torch.randint(0, VOCAB, (batch, 32), generator=_generator()),)


# --- 4. A transformer block with a causal mask and rotary cos/sin tables -------------------------

HEADS, HEAD_DIM, MAX_LEN = 4, 16, 64
MODEL_DIM = HEADS * HEAD_DIM


def _rotary_tables() -> tuple[torch.Tensor, torch.Tensor]:
    inv_freq = 1.0 / 10000 ** (torch.arange(0, HEAD_DIM, 2) / HEAD_DIM)
    angles = torch.arange(MAX_LEN)[:, None] * inv_freq
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-second, first], dim=-1) * sin


def _transformer_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    batch, length, _ = x.shape
    qkv = self.qkv(self.norm1(x)).view(batch, length, 3, self.heads, HEAD_DIM)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
    cos, sin = self.cos[:length], self.sin[:length]
    q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
    scores = (q @ k.transpose(-2, -1)) * HEAD_DIM**-0.5
    scores = scores.masked_fill(~self.causal_mask[:length, :length], float("-inf"))
    attended = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(batch, length, MODEL_DIM)
    x = x + self.proj(attended)
    return x + self.mlp(self.norm2(x))


def _mlp() -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(MODEL_DIM, 4 * MODEL_DIM), nn.GELU(), nn.Linear(4 * MODEL_DIM, MODEL_DIM)
    )


def _transformer(base: type[nn.Module]) -> type[nn.Module]:
    class TransformerBlock(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            self.heads = HEADS
            self.norm1 = nn.LayerNorm(MODEL_DIM)
            self.qkv = nn.Linear(MODEL_DIM, 3 * MODEL_DIM)
            self.proj = nn.Linear(MODEL_DIM, MODEL_DIM)
            self.norm2 = nn.LayerNorm(MODEL_DIM)
            self.mlp = _mlp()
            self.causal_mask = torch.ones(MAX_LEN, MAX_LEN, dtype=torch.bool).tril()
            self.cos, self.sin = _rotary_tables()

        forward = _transformer_forward

    return TransformerBlock


class TransformerBlockHand(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.heads = HEADS
        self.norm1 = nn.LayerNorm(MODEL_DIM)
        self.qkv = nn.Linear(MODEL_DIM, 3 * MODEL_DIM)
        self.proj = nn.Linear(MODEL_DIM, MODEL_DIM)
        self.norm2 = nn.LayerNorm(MODEL_DIM)
        self.mlp = _mlp()
        mask = torch.ones(MAX_LEN, MAX_LEN, dtype=torch.bool).tril()
        self.register_buffer("causal_mask", mask, persistent=False)
        cos, sin = _rotary_tables()
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    forward = _transformer_forward


# --- 5. A CNN with input normalisation mean/std ------------------------------------------------

IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def _cnn_forward(self: Any, images: torch.Tensor) -> torch.Tensor:
    images = (images - self.mean) / self.std
    return self.classifier(self.features(images).flatten(1))


def _features() -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
    )


def _cnn(base: type[nn.Module]) -> type[nn.Module]:
    class NormalizedCNN(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            self.features = _features()
            self.classifier = nn.Linear(32, 10)
            self.mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
            self.std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)

        forward = _cnn_forward

    return NormalizedCNN


class NormalizedCNNHand(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = _features()
        self.classifier = nn.Linear(32, 10)
        self.mean = nn.Buffer(torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), persistent=False)
        self.std = nn.Buffer(torch.tensor(IMAGENET_STD).view(1, 3, 1, 1), persistent=False)

    forward = _cnn_forward


# --- 6. A detection head with anchor boxes -------------------------------------------------------

FEATURE_CHANNELS, GRID, STRIDE, CLASSES = 32, 8, 16, 5
ANCHOR_SIZES = (32.0, 64.0, 128.0)


def _anchors() -> torch.Tensor:
    """(GRID * GRID * len(ANCHOR_SIZES), 4) anchors as (cx, cy, w, h), in image pixels."""
    centres = (torch.arange(GRID) + 0.5) * STRIDE
    cy, cx = torch.meshgrid(centres, centres, indexing="ij")
    sizes = torch.tensor(ANCHOR_SIZES)
    count = len(ANCHOR_SIZES)
    xy = torch.stack([cx, cy], dim=-1).reshape(-1, 1, 2).expand(-1, count, 2)
    wh = sizes.view(1, count, 1).expand(GRID * GRID, count, 2)
    return torch.cat([xy, wh], dim=-1).reshape(-1, 4)


def _detection_forward(self: Any, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    batch = features.shape[0]
    deltas = self.regress(features).permute(0, 2, 3, 1).reshape(batch, -1, 4) * self.variances
    scores = self.classify(features).permute(0, 2, 3, 1).reshape(batch, -1, CLASSES).sigmoid()
    centres = self.anchors[:, :2] + deltas[..., :2] * self.anchors[:, 2:]
    sizes = self.anchors[:, 2:] * deltas[..., 2:].exp()
    return torch.cat([centres - sizes / 2, centres + sizes / 2], dim=-1), scores


def _detection(base: type[nn.Module]) -> type[nn.Module]:
    class DetectionHead(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            count = len(ANCHOR_SIZES)
            self.classify = nn.Conv2d(FEATURE_CHANNELS, count * CLASSES, 3, padding=1)
            self.regress = nn.Conv2d(FEATURE_CHANNELS, count * 4, 3, padding=1)
            self.anchors = _anchors()
            self.variances = torch.tensor([0.1, 0.1, 0.2, 0.2])

        forward = _detection_forward

    return DetectionHead


class DetectionHeadHand(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        count = len(ANCHOR_SIZES)
        self.classify = nn.Conv2d(FEATURE_CHANNELS, count * CLASSES, 3, padding=1)
        self.regress = nn.Conv2d(FEATURE_CHANNELS, count * 4, 3, padding=1)
        self.register_buffer("anchors", _anchors(), persistent=False)
        self.register_buffer("variances", torch.tensor([0.1, 0.1, 0.2, 0.2]), persistent=False)

    forward = _detection_forward


# --- 7. Anchors per pyramid level, in a list and a dict ----------------------------------------
# torchvision's AnchorGenerator kept its cell anchors in a plain list and moved them by hand in
# forward; here the list and the dict are attributes, and .to() has to reach into them.

PYRAMID = ((8, 8), (4, 16), (2, 32))  # (grid, stride) per level


def _pyramid_anchors() -> list[torch.Tensor]:
    levels = []
    for grid, stride in PYRAMID:
        centres = (torch.arange(grid) + 0.5) * stride
        cy, cx = torch.meshgrid(centres, centres, indexing="ij")
        wh = torch.full((grid * grid, 2), 4.0 * stride)
        levels.append(torch.cat([torch.stack([cx, cy], dim=-1).reshape(-1, 2), wh], dim=-1))
    return levels


def _box_coder() -> dict[str, torch.Tensor]:
    return {"mean": torch.zeros(4), "std": torch.tensor([0.1, 0.1, 0.2, 0.2])}


def _pyramid_forward(self: Any, *features: torch.Tensor) -> torch.Tensor:
    boxes = []
    for level, anchors in zip(features, self.anchors, strict=True):
        deltas = self.regress(level).permute(0, 2, 3, 1).reshape(level.shape[0], -1, 4)
        deltas = deltas * self.box_coder["std"] + self.box_coder["mean"]
        centres = anchors[:, :2] + deltas[..., :2] * anchors[:, 2:]
        boxes.append(torch.cat([centres, anchors[:, 2:] * deltas[..., 2:].exp()], dim=-1))
    return torch.cat(boxes, dim=1)


def _pyramid(base: type[nn.Module]) -> type[nn.Module]:
    class AnchorPyramid(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            self.regress = nn.Conv2d(FEATURE_CHANNELS, 4, 3, padding=1)
            self.anchors = _pyramid_anchors()
            self.box_coder = _box_coder()

        forward = _pyramid_forward

    return AnchorPyramid


class AnchorPyramidHand(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.regress = nn.Conv2d(FEATURE_CHANNELS, 4, 3, padding=1)
        for index, anchors in enumerate(_pyramid_anchors()):
            self.register_buffer(f"anchors_{index}", anchors, persistent=False)
        for key, tensor in _box_coder().items():
            self.register_buffer(f"box_coder_{key}", tensor, persistent=False)

    @property
    def anchors(self) -> list[torch.Tensor]:
        return [getattr(self, f"anchors_{index}") for index in range(len(PYRAMID))]

    @property
    def box_coder(self) -> dict[str, torch.Tensor]:
        return {"mean": self.box_coder_mean, "std": self.box_coder_std}

    forward = _pyramid_forward


def _pyramid_inputs(batch: int) -> Inputs:
    generator = _generator()
    return tuple(
        torch.randn(batch, FEATURE_CHANNELS, grid, grid, generator=generator) for grid, _ in PYRAMID
    )


# --- 8. A recurrent cell that carries a state tensor written in forward --------------------------

RNN_INPUT, RNN_HIDDEN = 32, 64


def _recurrent_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    state = self.state if self.state is not None else x.new_zeros(x.shape[0], RNN_HIDDEN)
    zi, ri, ni = self.inp(x).chunk(3, dim=-1)
    zh, rh, nh = self.rec(state).chunk(3, dim=-1)
    z, r = torch.sigmoid(zi + zh), torch.sigmoid(ri + rh)
    h = (1 - z) * torch.tanh(ni + r * nh) + z * state
    self.state = h.detach()
    return h


def _recurrent(base: type[nn.Module]) -> type[nn.Module]:
    class RecurrentCell(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            self.inp = nn.Linear(RNN_INPUT, 3 * RNN_HIDDEN)
            self.rec = nn.Linear(RNN_HIDDEN, 3 * RNN_HIDDEN)
            self.state = None  # first written in forward: autoreg carries it

        forward = _recurrent_forward

    return RecurrentCell


class RecurrentCellHand(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(RNN_INPUT, 3 * RNN_HIDDEN)
        self.rec = nn.Linear(RNN_HIDDEN, 3 * RNN_HIDDEN)
        # The careful hand-written way: a None non-persistent buffer slot, so that the tensor
        # forward writes into it lands in _buffers and moves with .to().
        self.register_buffer("state", None, persistent=False)

    forward = _recurrent_forward


# --- 9. A module with integer index tensors ----------------------------------------------------

MIX_DIM, MIX_GROUPS = 32, 8


def _index_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    x = x.index_select(-1, self.permutation)
    pooled = x.new_zeros(x.shape[0], MIX_GROUPS).index_add_(1, self.group_of_channel, x)
    return self.proj(pooled) + x


def _index(base: type[nn.Module]) -> type[nn.Module]:
    class IndexMixer(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(MIX_GROUPS, MIX_DIM)
            self.permutation = torch.randperm(MIX_DIM)
            self.group_of_channel = torch.arange(MIX_DIM) % MIX_GROUPS

        forward = _index_forward

    return IndexMixer


class IndexMixerHand(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(MIX_GROUPS, MIX_DIM)
        self.register_buffer("permutation", torch.randperm(MIX_DIM), persistent=False)
        groups = torch.arange(MIX_DIM) % MIX_GROUPS
        self.register_buffer("group_of_channel", groups, persistent=False)

    forward = _index_forward


# --- 10. A model nested several levels deep -------------------------------------------------------
# NestedModel -> ModuleList -> Stage -> ModuleList -> Block -> Leaf, each level with its own tensor.

NEST_DIM, NEST_STAGES, NEST_BLOCKS = 32, 3, 2


def _leaf_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    return x * self.gain


def _block_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    return x + self.residual_scale * torch.relu(self.linear(self.leaf(x)))


def _stage_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    for block in self.blocks:
        x = block(x)
    return x + self.bias


def _nested_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    for stage in self.stages:
        x = stage(x)
    return x * self.output_scale


def _nested(base: type[nn.Module]) -> type[nn.Module]:
    class Leaf(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            self.gain = torch.linspace(0.5, 1.5, NEST_DIM)

        forward = _leaf_forward

    class Block(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            self.leaf = Leaf()
            self.linear = nn.Linear(NEST_DIM, NEST_DIM)
            self.residual_scale = torch.full((NEST_DIM,), 0.5)

        forward = _block_forward

    class Stage(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn.ModuleList(Block() for _ in range(NEST_BLOCKS))
            self.bias = torch.linspace(-0.1, 0.1, NEST_DIM)

        forward = _stage_forward

    class NestedModel(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            self.stages = nn.ModuleList(Stage() for _ in range(NEST_STAGES))
            self.output_scale = torch.full((NEST_DIM,), 0.1)

        forward = _nested_forward

    return NestedModel


class _LeafHand(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("gain", torch.linspace(0.5, 1.5, NEST_DIM), persistent=False)

    forward = _leaf_forward


class _BlockHand(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.leaf = _LeafHand()
        self.linear = nn.Linear(NEST_DIM, NEST_DIM)
        self.register_buffer("residual_scale", torch.full((NEST_DIM,), 0.5), persistent=False)

    forward = _block_forward


class _StageHand(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(_BlockHand() for _ in range(NEST_BLOCKS))
        self.register_buffer("bias", torch.linspace(-0.1, 0.1, NEST_DIM), persistent=False)

    forward = _stage_forward


class NestedModelHand(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stages = nn.ModuleList(_StageHand() for _ in range(NEST_STAGES))
        self.register_buffer("output_scale", torch.full((NEST_DIM,), 0.1), persistent=False)

    forward = _nested_forward


# --- the zoo ---------------------------------------------------------------------------------


def _spec(
    name: str,
    about: str,
    bare: Callable[[type[nn.Module]], type[nn.Module]],
    hand: type[nn.Module],
    make_inputs: Callable[[int], Inputs],
    **extra: Any,
) -> ModelSpec:
    return ModelSpec(name, about, bare(nn.Module), hand, bare(autoreg.Module), make_inputs, **extra)


MODELS: tuple[ModelSpec, ...] = (
    _spec(
        "ToyModule",
        "nn.Linear(2, 2) and expected_moved_cuda_tensor = torch.tensor([0, 2, 3])",
        _toy,
        ToyModuleHand,
        lambda batch: (_randn(batch, 2),),
    ),
    _spec(
        "Net",
        "w1 Parameter, w2 Parameter(requires_grad=False), w3 = torch.rand(2, 3)",
        _net,
        NetHand,
        lambda batch: (_randn(batch, 2),),
    ),
    _spec(
        "SequenceModel",
        "positions = torch.arange(seqlen) and inv_freq for sinusoidal encodings",
        _sequence,
        SequenceModelHand,
        _sequence_inputs,
    ),
    _spec(
        "TransformerBlock",
        "causal mask (bool) and rotary cos/sin tables",
        _transformer,
        TransformerBlockHand,
        lambda batch: (_randn(batch, 32, MODEL_DIM),),
    ),
    _spec(
        "NormalizedCNN",
        "input normalisation mean/std of shape (1, 3, 1, 1)",
        _cnn,
        NormalizedCNNHand,
        lambda batch: (torch.rand(batch, 3, 32, 32, generator=_generator()),),
    ),
    _spec(
        "DetectionHead",
        "anchor boxes (192, 4) and box-coding variances",
        _detection,
        DetectionHeadHand,
        lambda batch: (_randn(batch, FEATURE_CHANNELS, GRID, GRID),),
    ),
    _spec(
        "AnchorPyramid",
        "anchors per pyramid level in a list, box-coder mean/std in a dict",
        _pyramid,
        AnchorPyramidHand,
        _pyramid_inputs,
        hand_note="one buffer per list/dict entry (anchors_0, box_coder_std, ...), "
        "read back through properties that rebuild the list and the dict",
    ),
    _spec(
        "RecurrentCell",
        "GRU-style cell; the hidden state is first written in forward (autoreg carries it)",
        _recurrent,
        RecurrentCellHand,
        lambda batch: (_randn(batch, RNN_INPUT),),
        hand_note="state: register_buffer('state', None, persistent=False) in __init__, "
        "then reassigned in forward (nn.Module stores it in _buffers)",
        state_written_in_forward=("state",),
    ),
    _spec(
        "IndexMixer",
        "integer index tensors: a channel permutation and a channel-to-group map",
        _index,
        IndexMixerHand,
        lambda batch: (_randn(batch, MIX_DIM),),
    ),
    _spec(
        "NestedModel",
        f"{NEST_STAGES} stages x {NEST_BLOCKS} blocks x leaf, a tensor at every level "
        f"(5 module levels)",
        _nested,
        NestedModelHand,
        lambda batch: (_randn(batch, NEST_DIM),),
    ),
)


# --- 11. A transformer layer sized like a real one ----------------------------------------------
# The ten models above are 2 to 64 wide: on a GPU their forward is launch overhead. This one is a
# pre-norm decoder layer, 4096 wide (201 M parameters; at batch 8 x 512 tokens a forward is about
# 1.7 TFLOP, milliseconds on an H200 in bfloat16), with its causal mask and rotary tables as plain
# attributes. The same code at 64 wide is what the GPU plan runs on a CPU.

LAYER_SEQ_CHECK = 16  # tokens in the move check: it checks where tensors are, not speed


def _layer_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    batch, length, dim = x.shape
    qkv = self.qkv(self.norm1(x)).view(batch, length, 3, self.heads, dim // self.heads)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
    cos, sin = self.cos[:length], self.sin[:length]
    q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
    mask = self.causal_mask[:length, :length]
    attended = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    x = x + self.proj(attended.transpose(1, 2).reshape(batch, length, dim))
    return x + self.mlp(self.norm2(x))


def _layer_spec(dim: int, heads: int, max_len: int, seq: int) -> ModelSpec:
    """A LayerBlock ``dim`` wide: the three variants, inputs of ``seq`` tokens."""
    head_dim = dim // heads

    def tables() -> tuple[torch.Tensor, torch.Tensor]:
        inv_freq = 1.0 / 10000 ** (torch.arange(0, head_dim, 2) / head_dim)
        angles = torch.arange(max_len)[:, None] * inv_freq
        angles = torch.cat([angles, angles], dim=-1)
        return angles.cos(), angles.sin()

    def layers(module: nn.Module) -> None:
        module.norm1 = nn.LayerNorm(dim)
        module.qkv = nn.Linear(dim, 3 * dim, bias=False)
        module.proj = nn.Linear(dim, dim, bias=False)
        module.norm2 = nn.LayerNorm(dim)
        module.mlp = nn.Sequential(
            nn.Linear(dim, 4 * dim), nn.GELU(approximate="tanh"), nn.Linear(4 * dim, dim)
        )

    def bare(base: type[nn.Module]) -> type[nn.Module]:
        class LayerBlock(base):  # type: ignore[misc, valid-type]
            def __init__(self) -> None:
                super().__init__()
                self.heads = heads
                layers(self)
                self.causal_mask = torch.ones(max_len, max_len, dtype=torch.bool).tril()
                self.cos, self.sin = tables()

            forward = _layer_forward

        return LayerBlock

    class LayerBlockHand(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.heads = heads
            layers(self)
            mask = torch.ones(max_len, max_len, dtype=torch.bool).tril()
            self.register_buffer("causal_mask", mask, persistent=False)
            cos, sin = tables()
            self.register_buffer("cos", cos, persistent=False)
            self.register_buffer("sin", sin, persistent=False)

        forward = _layer_forward

    return _spec(
        f"LayerBlock{dim}",
        f"pre-norm decoder layer, {dim} wide, {heads} heads, SDPA with a causal mask (bool) and "
        f"rotary cos/sin tables as plain attributes; inputs of {seq} tokens",
        bare,
        LayerBlockHand,
        lambda batch: (torch.randn(batch, seq, dim, generator=_generator()),),
        check_inputs=lambda: (torch.randn(1, LAYER_SEQ_CHECK, dim, generator=_generator()),),
    )


LAYERS: tuple[ModelSpec, ...] = (
    _layer_spec(4096, 32, 2048, 512),  # the GPU plan on a GPU
    _layer_spec(64, 4, 64, 16),  # the GPU plan on a CPU: the same code, tiny
)


def by_name(name: str) -> ModelSpec:
    """The zoo model called ``name`` (one of MODELS or LAYERS)."""
    for spec in (*MODELS, *LAYERS):
        if spec.name == name:
            return spec
    known = ", ".join(spec.name for spec in (*MODELS, *LAYERS))
    raise KeyError(f"no zoo model {name!r}; known: {known}")
