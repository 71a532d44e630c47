"""The meta device: build without memory, ``to_empty`` materialises, ``reset_buffers`` recomputes.

``to_empty`` gives every parameter, buffer and carried tensor memory but no values; a checkpoint
restores parameters and persistent buffers; the derived, non-persistent buffers are recomputed by
``autoreg.reset_buffers(model)``, which calls each module's ``reset_buffers()`` on its device.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from torch import nn

import autoreg
from autoreg import reset_buffers


class Rotary(autoreg.Module):
    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.dim = dim
        self.reset_buffers()

    def reset_buffers(self) -> None:
        self.inv_freq = 1.0 / 10_000 ** (torch.arange(0, self.dim, 2) / self.dim)
        self.positions = torch.arange(16)


class Block(autoreg.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.rope = Rotary()
        with torch.no_grad():
            self.reset_buffers()

    def reset_buffers(self) -> None:
        self.row_norms = self.lin.weight.norm(dim=1)  # derived from a parameter


class Net(autoreg.Module):
    stats: autoreg.Persistent  # restored from the checkpoint

    def __init__(self) -> None:
        super().__init__()
        self.block = Block()
        self.head = nn.Linear(8, 2)
        self.stats = torch.zeros(8)
        self.reset_buffers()

    def reset_buffers(self) -> None:
        self.causal = torch.ones(4, 4, dtype=torch.bool).tril()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.last = x.detach()  # runtime state: carried
        hidden = self.block.lin(x) * self.block.row_norms + self.stats
        angles = self.block.rope.positions[: x.shape[0], None] * self.block.rope.inv_freq
        return self.head(hidden + angles.repeat(1, 2)) * self.causal.sum()


class TwinNet(nn.Module):
    """Net with every buffer registered by hand, same reset_buffers() convention."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.register_buffer("stats", torch.zeros(8))
        self.register_buffer("causal", torch.empty(4, 4, dtype=torch.bool), persistent=False)
        self.reset_buffers()

    def reset_buffers(self) -> None:
        self.causal = torch.ones(4, 4, dtype=torch.bool).tril()


def _all_tensors(module: nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """Parameters, buffers and carried tensors (nested in lists too) of the whole tree."""
    yield from module.named_parameters()
    yield from module.named_buffers()
    for prefix, sub in module.named_modules():
        for key, value in vars(sub).items():
            values = value if isinstance(value, list) else [value]
            for i, item in enumerate(values):
                if isinstance(item, torch.Tensor):
                    yield f"{prefix}.{key}[{i}]", item


def _meta_net() -> Net:
    with torch.device("meta"):
        net = Net()
        net(torch.zeros(3, 8))  # the carried `last` is created on meta too
        net.history = [torch.zeros(2), torch.ones(2, dtype=torch.long)]  # a carried list
    return net


def _reference() -> Net:
    torch.manual_seed(0)
    net = Net()
    net.stats.copy_(torch.arange(8.0))
    return net


# --- to_empty ----------------------------------------------------------------------------------


def test_build_on_meta_puts_every_tensor_on_meta() -> None:
    net = _meta_net()

    devices = {name: tensor.device.type for name, tensor in _all_tensors(net)}

    assert set(devices.values()) == {"meta"}
    assert {".last[0]", ".history[0]", ".history[1]"} <= set(devices)
    assert list(net._buffers) == ["stats", "causal"]


def test_to_empty_materialises_every_buffer_and_carried_tensor_on_cpu() -> None:
    net = _meta_net()
    dtypes = {name: tensor.dtype for name, tensor in _all_tensors(net)}

    net.to_empty(device="cpu")

    tensors = dict(_all_tensors(net))
    assert tensors.keys() == dtypes.keys()
    assert {t.device.type for t in tensors.values()} == {"cpu"}
    assert {name: t.dtype for name, t in tensors.items()} == dtypes  # int, bool stay as they are
    assert net.history[1].dtype == torch.long
    assert "last" not in net._buffers


@pytest.mark.parametrize("cls", [Net, TwinNet], ids=["autoreg", "twin"])
def test_checkpoint_restores_persistent_buffers_only(cls: type[nn.Module]) -> None:
    """As for nn.Module: non-persistent buffers are in no checkpoint, so to_empty leaves them."""
    torch.manual_seed(0)
    checkpoint = cls().state_dict()
    with torch.device("meta"):
        net = cls()
    net.to_empty(device="cpu")
    net.causal.fill_(False)  # stands for the uninitialised memory

    net.load_state_dict(checkpoint)

    assert "causal" not in checkpoint
    assert not net.causal.any()  # not restored
    torch.testing.assert_close(net.stats, checkpoint["stats"], rtol=0, atol=0)


# --- reset_buffers -----------------------------------------------------------------------------


def test_reset_buffers_recomputes_what_the_checkpoint_lacks() -> None:
    reference = _reference()
    net = _meta_net()
    net.to_empty(device="cpu")
    net.load_state_dict(reference.state_dict())

    names = reset_buffers(net)

    assert names == ["", "block", "block.rope"]
    for (name, got), (_, expected) in zip(
        net.named_buffers(), reference.named_buffers(), strict=True
    ):
        assert got.dtype == expected.dtype, name
        assert torch.equal(got, expected), name
    x = torch.randn(3, 8)
    torch.testing.assert_close(net(x), reference(x), rtol=0, atol=0)


def test_reset_buffers_after_loading_with_assign_follows_the_loaded_weights() -> None:
    reference = _reference()
    net = _meta_net()
    net.load_state_dict(reference.state_dict(), assign=True)
    assert net.causal.is_meta  # not in the checkpoint: still a placeholder
    assert net.block.rope.inv_freq.is_meta  # Rotary has no tensor of its own off meta

    reset_buffers(net)

    for (name, got), (_, expected) in zip(
        net.named_buffers(), reference.named_buffers(), strict=True
    ):
        assert got.device.type == "cpu", name
        assert torch.equal(got, expected), name


def test_reset_buffers_creates_tensors_on_each_modules_device() -> None:
    net = _meta_net()
    net.to_empty(device="cpu")

    with torch.device("meta"):  # an ambient default device that must not win
        reset_buffers(net)

    assert {buffer.device.type for buffer in net.buffers()} == {"cpu"}


def test_reset_buffers_on_a_meta_model_stays_on_meta() -> None:
    net = _meta_net()

    reset_buffers(net)  # the default device is CPU

    assert {buffer.device.type for buffer in net.buffers()} == {"meta"}


def test_reset_buffers_runs_without_grad_so_derived_buffers_stay_buffers() -> None:
    net = _meta_net()
    net.to_empty(device="cpu")
    net.load_state_dict(_reference().state_dict())

    reset_buffers(net)

    assert net.block._buffers["row_norms"] is net.block.row_norms
    assert not net.block.row_norms.requires_grad
    expected = net.block.lin.weight.detach().norm(dim=1)
    torch.testing.assert_close(net.block.row_norms, expected, rtol=0, atol=0)


class _Probe(nn.Module):
    """No tensor of its own: records where its factory calls land."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[torch.device] = []

    def reset_buffers(self) -> None:
        self.seen.append(torch.empty(0).device)


def test_a_module_without_tensors_uses_its_nearest_ancestors_device() -> None:
    outer = nn.Sequential(nn.Linear(2, 2), nn.Sequential(_Probe()))
    probe = outer[1][0]

    with torch.device("meta"):
        names = reset_buffers(outer)

    assert names == ["1.0"]
    assert probe.seen == [torch.device("cpu")]


def test_a_shared_module_is_reset_once_and_non_methods_are_skipped() -> None:
    probe = _Probe()
    outer = nn.ModuleDict({"a": probe, "b": probe})
    outer.reset_buffers = "not a method"  # type: ignore[assignment]

    names = reset_buffers(outer)

    assert names == ["a"]
    assert probe.seen == [torch.device("cpu")]


def test_reset_buffers_works_on_plain_nn_modules() -> None:
    with torch.device("meta"):
        twin = TwinNet()
    twin.to_empty(device="cpu")

    assert reset_buffers(twin) == [""]
    assert torch.equal(twin.causal, torch.ones(4, 4, dtype=torch.bool).tril())


# --- reset_buffers keeps the dtype and device each buffer had ----------------------------------


class TwinRotary(nn.Module):
    """Rotary with its buffers registered by hand, same reset_buffers() convention."""

    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.dim = dim
        self.register_buffer("inv_freq", torch.empty(dim // 2), persistent=False)
        self.register_buffer("positions", torch.empty(16, dtype=torch.long), persistent=False)
        self.reset_buffers()

    def reset_buffers(self) -> None:
        self.inv_freq = 1.0 / 10_000 ** (torch.arange(0, self.dim, 2) / self.dim)
        self.positions = torch.arange(16)


@pytest.mark.parametrize("cls", [Rotary, TwinRotary], ids=["autoreg", "twin"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16], ids=["float64", "bfloat16"])
def test_reset_buffers_after_a_dtype_move_keeps_the_buffers_dtype(
    cls: type[nn.Module], dtype: torch.dtype
) -> None:
    """The method computes in float32; the buffer comes back as `cls().to(dtype)` has it."""
    expected = cls().to(dtype)
    with torch.device("meta"):
        rotary = cls()
    rotary.to_empty(device="cpu")
    rotary.to(dtype)

    reset_buffers(rotary)

    assert rotary.inv_freq.dtype == dtype  # was float32 before the fix, for both
    assert rotary.positions.dtype == torch.long  # integer buffers keep the computed dtype
    assert "inv_freq" not in rotary.state_dict()  # still a non-persistent buffer
    for name, buffer in expected.named_buffers():
        assert torch.equal(rotary.get_buffer(name), buffer), name


def test_reset_buffers_after_double_gives_the_outputs_of_a_double_model() -> None:
    reference = _reference().double()
    net = _meta_net()
    net.to_empty(device="cpu")
    net.double()
    net.load_state_dict(reference.state_dict())

    reset_buffers(net)

    expected = dict(reference.named_buffers())
    assert {name: b.dtype for name, b in net.named_buffers()} == {
        name: b.dtype for name, b in expected.items()
    }
    for name in ("block.rope.inv_freq", "block.rope.positions", "causal", "stats"):
        assert torch.equal(net.get_buffer(name), expected[name]), name
    # row_norms derives from the float64 weights: computed in float64, closer to the truth than
    # the reference's float32 result converted to float64.
    torch.testing.assert_close(net.block.row_norms, expected["block.row_norms"])
    x = torch.randn(3, 8, dtype=torch.float64)
    torch.testing.assert_close(net(x), reference(x), rtol=1e-6, atol=1e-6)


def test_a_floating_buffer_recomputed_as_an_integer_keeps_the_computed_dtype() -> None:
    """Only floating-to-floating changes are undone: the method may change the kind on purpose."""

    class Counter(autoreg.Module):
        def __init__(self) -> None:
            super().__init__()
            self.steps = torch.zeros(2)

        def reset_buffers(self) -> None:
            self.steps = torch.zeros(2, dtype=torch.long)

    counter = Counter().double()

    reset_buffers(counter)

    assert counter.steps.dtype == torch.long
    assert counter._buffers["steps"] is counter.steps


class CarriedTables(autoreg.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.reset_buffers()
        self.tables = {"sin": torch.zeros(2)}  # assigned after construction below: carried

    def reset_buffers(self) -> None:
        self.inv_freq = torch.arange(2.0)
        if "tables" in vars(self):
            self.tables = {"sin": torch.arange(2.0).sin(), "steps": torch.arange(2)}


def test_reset_buffers_keeps_the_dtype_of_carried_values_too() -> None:
    """After .double(), recomputing gives what building and then calling .double() gives: the
    carried dict's floating tensors are float64 again, its integer one keeps its dtype."""
    model = CarriedTables().double()
    autoreg.reset_buffers(model)
    assert model.inv_freq.dtype == torch.float64
    assert model.tables["sin"].dtype == torch.float64
    assert model.tables["steps"].dtype == torch.int64


class Scaled(autoreg.Module):
    def __init__(self, child: nn.Module | None = None) -> None:
        super().__init__()
        self.child = child
        self.reset_buffers()

    def reset_buffers(self) -> None:
        self.scale = torch.ones(2)


def test_reset_buffers_without_recursion_resets_one_module() -> None:
    """The call transformers' per-module _init_weights(module) makes."""
    outer = Scaled(Scaled())
    with torch.no_grad():
        outer.scale.fill_(-1.0)
        outer.child.scale.fill_(-1.0)
    assert autoreg.reset_buffers(outer, recurse=False) == [""]
    assert torch.equal(outer.scale, torch.ones(2))
    assert torch.equal(outer.child.scale, torch.full((2,), -1.0))  # left alone


class Anchored(autoreg.Module):
    """Derived constants held in buffer containers, rebuilt by ``reset_buffers()``."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.reset_buffers()

    def reset_buffers(self) -> None:
        self.anchors = autoreg.BufferList([torch.arange(2.0), torch.arange(3)])
        self.tables = autoreg.BufferDict({"sin": torch.arange(2.0).sin(), "ids": torch.arange(2)})


class AnchoredInPlace(Anchored):
    """The same, with the containers' entries replaced, not the containers."""

    def reset_buffers(self) -> None:
        if "anchors" not in self._modules:
            super().reset_buffers()
            return
        self.anchors[0] = torch.arange(2.0)
        self.anchors[1] = torch.arange(3)
        self.tables["sin"] = torch.arange(2.0).sin()
        self.tables["ids"] = torch.arange(2)


class TwinAnchored(nn.Module):
    """Anchored on nn.Module: the containers are autoreg's, the method the same."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.reset_buffers()

    reset_buffers = Anchored.reset_buffers


@pytest.mark.parametrize(
    "cls", [Anchored, AnchoredInPlace, TwinAnchored], ids=["new containers", "entries", "twin"]
)
@pytest.mark.parametrize("move", ["double", "bfloat16", "meta"])
def test_reset_buffers_keeps_buffer_container_entries_where_they_were(
    cls: type[nn.Module], move: str
) -> None:
    """Issue 29 item 16: the entries of a BufferList / BufferDict the method rebuilds come back in
    the floating dtype (and on the device) they had, as the module's own buffers do (they stayed
    float32 after .double()); integer entries keep the computed dtype."""
    expected = cls().to(torch.float64 if move == "double" else torch.bfloat16)
    model = cls()
    if move == "meta":  # built on meta, materialised, recomputed: as built normally
        with torch.device("meta"):
            model = cls()
        model.to_empty(device="cpu")
        expected = cls()
    else:
        model.to(expected.lin.weight.dtype)

    assert reset_buffers(model) == [""]

    got = {name: (b.dtype, b.device) for name, b in model.named_buffers()}
    assert got == {name: (b.dtype, b.device) for name, b in expected.named_buffers()}
    for name, buffer in expected.named_buffers():
        assert torch.equal(model.get_buffer(name), buffer), name
