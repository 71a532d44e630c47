"""The move check: does ``.to()`` take every tensor along, and does forward still run?

For each zoo model and each target, the three variants are built under the same seed (identical
weights, checked), run once on CPU (so that state written in forward exists, and so that the
outputs can be checked identical), moved with ``.to(target)``, walked for tensors that stayed
behind, and run again on inputs moved the same way.

Targets: the accelerator when there is one (``cuda``); on CPU-only machines ``meta`` stands in for
it. ``float64`` and ``bfloat16`` are dtype moves that run anywhere: a float32 constant left behind
is silently promoted to float64 (slightly different numbers), and silently promotes a bfloat16
computation to float32 (wrong output dtype) or breaks it (dtype mismatch).

Outputs are compared bitwise, under ``torch.use_deterministic_algorithms(True, warn_only=True)``
(the caller's setting is restored after): on CUDA, ``index_add_`` and other kernels that
accumulate with atomics give different bits from run to run otherwise. Where a CUDA kernel has no
deterministic version, outputs that differ within the dtype's tolerance
(``torch.testing.assert_close``'s defaults) count as equal, and say so.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from .walk import fingerprint, reachable_tensors, stayed_behind
from .zoo import MODELS, VARIANTS, ModelSpec

__all__ = [
    "MoveResult",
    "Target",
    "VariantOutcome",
    "compare_outputs",
    "deterministic_algorithms",
    "run_move_check",
    "targets_for",
]


@dataclass(frozen=True)
class Target:
    """Where ``.to()`` sends the model: a device or a floating-point dtype."""

    name: str
    device: torch.device | None = None
    dtype: torch.dtype | None = None

    def move_module(self, module: nn.Module) -> nn.Module:
        if self.device is not None:
            return module.to(self.device)
        return module.to(self.dtype)

    def move_input(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.device is not None:
            return tensor.to(self.device)
        return tensor.to(self.dtype) if tensor.is_floating_point() else tensor


def targets_for(device: str) -> list[Target]:
    """The device move (``cuda``, or ``meta`` without one), then the dtype moves."""
    accelerator = "cuda" if device == "cuda" else "meta"
    return [
        Target(accelerator, device=torch.device(accelerator)),
        Target("float64", dtype=torch.float64),
        Target("bfloat16", dtype=torch.bfloat16),
    ]


@dataclass
class VariantOutcome:
    """What happened to one variant: tensors that stayed behind, and whether forward ran."""

    reachable: int
    left_behind: list[str]
    forward_ok: bool
    error: str | None = None
    output: str | None = None  # dtype and device of the output(s) when forward ran
    versus_hand: str | None = None  # how the output compares with (b)'s after the same move


@dataclass
class MoveResult:
    """One model moved to one target, all three variants."""

    model: str
    target: str
    weights_identical: bool  # same parameters, and the same reachable tensors, before moving
    cpu_outputs_identical: bool  # forward on CPU before moving: (a) == (b) == (c), bitwise
    state_dict_keys_equal: bool  # (b) and (c) save the same keys
    variants: dict[str, VariantOutcome] = field(default_factory=dict)

    @property
    def expected(self) -> bool:
        """(b) and (c) left nothing behind, ran, and agree; (a) is reported, not judged."""
        hand, auto = self.variants["hand"], self.variants["auto"]
        return (
            self.weights_identical
            and self.cpu_outputs_identical
            and self.state_dict_keys_equal
            and not hand.left_behind
            and not auto.left_behind
            and hand.forward_ok
            and auto.forward_ok
            and auto.versus_hand is not None
            and outputs_agree(auto.versus_hand)
        )


def run_move_check(device: str, models: Sequence[ModelSpec] = MODELS) -> list[MoveResult]:
    """Move every model in ``models`` to every target for ``device``."""
    with deterministic_algorithms():
        return [_check(spec, target) for spec in models for target in targets_for(device)]


@contextlib.contextmanager
def deterministic_algorithms() -> Iterator[None]:
    """``torch.use_deterministic_algorithms(True, warn_only=True)`` inside, restored after.

    ``warn_only``: an op with no deterministic CUDA kernel (or cuBLAS without
    ``CUBLAS_WORKSPACE_CONFIG``) runs as usual instead of raising; its warning is silenced here,
    and the comparison's tolerance covers what it changes.
    """
    enabled = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*deterministic", category=UserWarning)
            yield
    finally:
        torch.use_deterministic_algorithms(enabled, warn_only=warn_only)


def _check(spec: ModelSpec, target: Target) -> MoveResult:
    built = {variant: spec.build(variant) for variant in VARIANTS}
    inputs = spec.inputs_for_check()
    prints = [fingerprint(model) for model in built.values()]
    parameters = [dict(model.named_parameters()) for model in built.values()]
    with torch.no_grad():
        cpu_out = {variant: _flat(model(*inputs)) for variant, model in built.items()}
    result = MoveResult(
        model=spec.name,
        target=target.name,
        weights_identical=prints[0] == prints[1] == prints[2]
        and _same_tensors(parameters[0], parameters[1])
        and _same_tensors(parameters[1], parameters[2]),
        cpu_outputs_identical=_same_outputs(cpu_out["plain"], cpu_out["hand"])
        and _same_outputs(cpu_out["hand"], cpu_out["auto"]),
        state_dict_keys_equal=list(built["hand"].state_dict()) == list(built["auto"].state_dict()),
    )

    moved_inputs = tuple(target.move_input(tensor) for tensor in inputs)
    outputs: dict[str, list[torch.Tensor]] = {}
    for variant, model in built.items():
        model = target.move_module(model)
        tensors = reachable_tensors(model)
        outcome = VariantOutcome(
            reachable=len(tensors),
            left_behind=stayed_behind(tensors, target.device, target.dtype),
            forward_ok=False,
        )
        try:
            with torch.no_grad():
                out = _flat(model(*moved_inputs))
        except Exception as error:  # noqa: BLE001 - the error is the result being reported
            outcome.error = f"{type(error).__name__}: {_first_line(error)}"
        else:
            outcome.forward_ok = True
            outcome.output = ", ".join(f"{t.dtype} on {t.device}" for t in _unique_kinds(out))
            outputs[variant] = out
        result.variants[variant] = outcome

    hand_out = outputs.get("hand")
    for variant in ("plain", "auto"):
        if variant in outputs and hand_out is not None:
            result.variants[variant].versus_hand = compare_outputs(outputs[variant], hand_out)
    return result


def _flat(output: Any) -> list[torch.Tensor]:
    if isinstance(output, torch.Tensor):
        return [output]
    return [tensor for item in output for tensor in _flat(item)]


def _unique_kinds(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    kinds: dict[tuple[torch.dtype, torch.device], torch.Tensor] = {}
    for tensor in tensors:
        kinds.setdefault((tensor.dtype, tensor.device), tensor)
    return list(kinds.values())


def _same_tensors(first: Mapping[str, torch.Tensor], second: Mapping[str, torch.Tensor]) -> bool:
    return first.keys() == second.keys() and all(
        first[name].dtype == second[name].dtype and torch.equal(first[name], second[name])
        for name in first
    )


def _same_outputs(first: list[torch.Tensor], second: list[torch.Tensor]) -> bool:
    return outputs_agree(compare_outputs(first, second))


def outputs_agree(comparison: str) -> bool:
    """Whether a ``compare_outputs`` verdict counts as equal."""
    return comparison.startswith(("identical", "equal within"))


def compare_outputs(outputs: list[torch.Tensor], reference: list[torch.Tensor]) -> str:
    """'identical', 'equal within tolerance' (CUDA only), or how ``outputs`` differ."""
    if len(outputs) != len(reference):
        return f"differs: {len(outputs)} outputs, expected {len(reference)}"
    for out, ref in zip(outputs, reference, strict=True):
        if out.shape != ref.shape:
            return f"differs: shape {tuple(out.shape)}, expected {tuple(ref.shape)}"
        if out.dtype != ref.dtype:
            return f"silently wrong dtype: {out.dtype}, expected {ref.dtype}"
        if out.device != ref.device:
            return f"differs: device {out.device}, expected {ref.device}"
    if any(out.device.type == "meta" for out in outputs):
        return "identical shapes and dtypes (meta tensors hold no values)"
    worst = 0.0
    close = True
    for out, ref in zip(outputs, reference, strict=True):
        if not torch.equal(out, ref):
            diff = (out.double() - ref.double()).abs().nan_to_num(nan=math.inf).max().item()
            worst = max(worst, diff)
            close = close and _within_tolerance(out, ref)
    if worst == 0.0:
        return "identical (bitwise)"
    if close and all(out.device.type == "cuda" for out in outputs):
        return f"equal within tolerance: max |diff| = {worst:.2g} (nondeterministic CUDA kernel)"
    return f"silently different values: max |diff| = {worst:.2g}"


def _within_tolerance(out: torch.Tensor, ref: torch.Tensor) -> bool:
    try:
        torch.testing.assert_close(out, ref)
    except AssertionError:
        return False
    return True


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    line = text[0] if text else ""
    return line if len(line) <= 160 else line[:157] + "..."
