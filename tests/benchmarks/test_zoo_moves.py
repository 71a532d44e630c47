"""The move check over the whole benchmark zoo: does ``.to()`` take every tensor along?

Each model is built three ways under the same seed (``benchmarks.zoo``): ``plain`` (nn.Module, bare
tensors), ``hand`` (nn.Module, ``register_buffer``) and ``auto`` (autoreg.Module, bare tensors).
Each is run once on the CPU (so that state written in forward exists), moved with ``.to(target)``,
walked for tensors that stayed behind, and run again. Targets: the accelerator where there is one
(``cuda``), else ``meta``; and ``float64`` and ``bfloat16``, dtype moves that run anywhere (a
float32 constant left behind silently promotes a float64 computation's inputs, or breaks or
promotes a bfloat16 one). Outputs are compared bitwise, under deterministic algorithms.

The walk is independent of autoreg: it looks at what is there, not at what autoreg registered.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch
from torch import nn

from benchmarks import zoo

DEVICE = "cuda" if torch.cuda.is_available() else "meta"
TARGETS = (torch.device(DEVICE), torch.float64, torch.bfloat16)
_INTERNALS = frozenset(vars(nn.Module()))  # nn.Module's bookkeeping, walked through its API
# CUDA's index_add_ and cuBLAS without a workspace setting warn under deterministic algorithms.
pytestmark = pytest.mark.filterwarnings("ignore:.*deterministic:UserWarning")


def reachable(module: nn.Module) -> dict[str, torch.Tensor]:
    """``{path: tensor}``: parameters, buffers, tensor attributes, tensors in lists, tuples and
    dicts (nested), and the same for modules held in such containers without being registered."""
    found: dict[str, torch.Tensor] = {}
    seen: set[int] = set()
    pending: list[tuple[str, nn.Module]] = [("", module)]
    while pending:
        prefix, root = pending.pop()
        for name, sub in root.named_modules(prefix=prefix):
            if id(sub) in seen:
                continue
            seen.add(id(sub))
            plain = {key: value for key, value in vars(sub).items() if key not in _INTERNALS}
            for key, value in {**sub._parameters, **sub._buffers, **plain}.items():
                for path, item in _items(f"{name}.{key}".lstrip("."), value):
                    if isinstance(item, torch.Tensor):
                        found[path] = item
                    elif isinstance(item, nn.Module):
                        pending.append((path, item))
    return found


def _items(path: str, value: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _items(f"{path}[{index}]", item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _items(f"{path}[{key!r}]", item)
    else:
        yield path, value


def moved_by(target: torch.device | torch.dtype, tensor: torch.Tensor) -> bool:
    """Whether ``.to(target)`` converts ``tensor`` (a dtype move converts floating point only)."""
    return isinstance(target, torch.device) or tensor.is_floating_point()


def left_behind(module: nn.Module, target: torch.device | torch.dtype) -> list[str]:
    where = "device" if isinstance(target, torch.device) else "dtype"
    wanted = target.type if isinstance(target, torch.device) else target
    return sorted(
        path
        for path, tensor in reachable(module).items()
        if moved_by(target, tensor)
        and (tensor.device.type if where == "device" else tensor.dtype) != wanted
    )


def fingerprint(module: nn.Module) -> list[tuple[str, tuple[int, ...], bytes]]:
    """The reachable tensors' dtypes, shapes and bytes, names left out (``anchors[0]`` is
    ``anchors_0`` in ``hand``)."""
    return sorted(
        (str(t.dtype), tuple(t.shape), t.detach().cpu().numpy().tobytes())
        for t in reachable(module).values()
    )


def run(model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> list[torch.Tensor]:
    with torch.no_grad():
        output = model(*inputs)
    return list(output) if isinstance(output, tuple) else [output]


def same(first: list[torch.Tensor], second: list[torch.Tensor]) -> bool:
    """Bitwise equal; on meta (no values), equal shapes and dtypes; on CUDA, within the dtype's
    tolerance (a kernel without a deterministic version, index_add_, may differ in the last bit)."""
    if [(t.shape, t.dtype, t.device) for t in first] != [
        (t.shape, t.dtype, t.device) for t in second
    ]:
        return False
    for one, other in zip(first, second, strict=True):
        if one.device.type == "cuda":
            torch.testing.assert_close(one, other)
        elif one.device.type != "meta" and not torch.equal(one, other):
            return False
    return True


def move_input(tensor: torch.Tensor, target: torch.device | torch.dtype) -> torch.Tensor:
    return tensor.to(target) if moved_by(target, tensor) else tensor


@pytest.fixture(autouse=True)
def _deterministic() -> Iterator[None]:
    enabled = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    yield
    torch.use_deterministic_algorithms(enabled, warn_only=warn_only)


@pytest.mark.parametrize("target", TARGETS, ids=str)
@pytest.mark.parametrize("spec", zoo.MODELS, ids=lambda spec: spec.name)
def test_hand_registered_and_autoreg_leave_nothing_behind_and_agree(
    spec: zoo.ModelSpec, target: torch.device | torch.dtype
) -> None:
    built = {variant: spec.build(variant) for variant in zoo.VARIANTS}
    inputs = spec.make_inputs(2)
    assert fingerprint(built["plain"]) == fingerprint(built["hand"]) == fingerprint(built["auto"])
    on_cpu = {variant: run(model, inputs) for variant, model in built.items()}
    assert same(on_cpu["plain"], on_cpu["hand"])
    assert same(on_cpu["auto"], on_cpu["hand"])
    assert list(built["auto"].state_dict()) == list(built["hand"].state_dict())
    registered = [b for b in built["hand"].buffers() if moved_by(target, b)]

    moved = {variant: model.to(target) for variant, model in built.items()}
    assert left_behind(moved["hand"], target) == []
    assert left_behind(moved["auto"], target) == []
    # The bare nn.Module leaves behind exactly the tensors the hand-written one had to register.
    assert len(left_behind(moved["plain"], target)) == len(registered)
    moved_inputs = tuple(move_input(tensor, target) for tensor in inputs)
    assert same(run(moved["auto"], moved_inputs), run(moved["hand"], moved_inputs))


@pytest.mark.parametrize("spec", zoo.MODELS, ids=lambda spec: spec.name)
def test_the_bare_variant_fails_after_a_device_move(spec: zoo.ModelSpec) -> None:
    if DEVICE == "meta" and spec.name == "IndexMixer" and torch.__version__ < "2.13":
        pytest.skip("older torch's meta kernel of index_add_ accepts a CPU index (CUDA's does not)")
    model, inputs = spec.build("plain"), spec.make_inputs(2)
    run(model, inputs)  # state written in forward exists
    moved = model.to(DEVICE)
    with pytest.raises(RuntimeError, match="device"):
        run(moved, tuple(tensor.to(DEVICE) for tensor in inputs))


def test_the_walk_finds_tensors_in_containers_and_unregistered_modules() -> None:
    module = nn.Module()
    module.register_buffer("buffer", torch.ones(1))
    module.plain = torch.ones(2)
    module.nested = {"a": [torch.ones(3), (torch.ones(4),)]}
    module.hidden = [nn.Linear(1, 1)]  # a module in a list: not registered, .to() misses it
    assert sorted(reachable(module)) == [
        "buffer", "hidden[0].bias", "hidden[0].weight", "nested['a'][0]", "nested['a'][1][0]",
        "plain",
    ]  # fmt: skip
    assert left_behind(module.to(torch.float64), torch.float64) == [
        "hidden[0].bias", "hidden[0].weight", "nested['a'][0]", "nested['a'][1][0]", "plain",
    ]  # fmt: skip
