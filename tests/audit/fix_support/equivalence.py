"""Does a migration change what a model computes? The original and the rewritten model compared.

``probe(out, *targets)`` runs in the directory of one side (a fresh process: the two sides'
modules share names): it builds the model each target names (seeded), saves its state_dict, its
float32 outputs, and what becomes of it after ``.to(torch.bfloat16)``, ``.to(torch.float64)``
(stricter than ``.double()``, which leaves complex tensors alone) and ``.to("meta")``: the
outputs, the dtype of every tensor it holds, and what each move leaves behind.
``compare(original, migrated, *targets)`` probes both sides and says, check by check, whether
the migrated model is the original one that moves:

- ``keys``: the same state_dict keys; ``strict``: the original's checkpoint loads strictly;
- ``float32``: the outputs, bitwise;
- ``bfloat16`` / ``double``: after the move, the outputs agree with the original's after the
  same move (with its float32 ones where the original raises) to that dtype's precision, or
  both raise the same error; and no tensor changed its kind (a complex one cast to a real
  dtype, an integer one made floating), compared with the original after the same move;
- ``left_double`` / ``left_meta``: what the migrated model leaves behind after ``.double()``
  (floating tensors not float64) and ``.to("meta")`` (tensors not on meta).

Run as a script: ``python equivalence.py compare ORIGINAL MIGRATED TARGET...`` prints the
reports as JSON (``probe OUT TARGET...`` and ``load OUT TARGET...`` are its two halves, run in
each side's directory).
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

SEED = 0
TOLERANCE = {"bfloat16": 0.05, "double": 1e-4}  # relative to the largest float32 output


def probe(out: str, *targets: str) -> None:
    """Build each of ``targets`` here, run and move it; save what ``compare`` reads to ``out``
    (a dict by target)."""
    import torch

    results = {}
    for target in targets:
        try:
            results[target] = _probe(target, f"{out}.{len(results)}.state")
        except Exception as error:  # noqa: BLE001 - reported
            results[target] = f"{type(error).__name__}: {error}".splitlines()[0]
    torch.save(results, out)


def _probe(target: str, state_file: str) -> dict[str, Any]:
    import torch

    from autoreg._target import load
    from autoreg._walk import iter_tensors

    sys.path.insert(0, os.getcwd())
    torch.manual_seed(SEED)
    loaded = load(target)
    model, args, kwargs = loaded.model, loaded.args or (), loaded.kwargs

    def tensors(module: torch.nn.Module) -> dict[str, torch.Tensor]:
        found: dict[str, torch.Tensor] = {}
        for prefix, sub in module.named_modules(remove_duplicate=False):
            values = {**vars(sub), **sub._parameters, **sub._buffers}
            for name, value in values.items():
                if name.startswith("_") and name not in sub._buffers:
                    continue
                base = f"{prefix}.{name}" if prefix else name
                for path, tensor in iter_tensors(value, base):
                    if tensor is not None:
                        found.setdefault(path, tensor)
        return found

    def call(module: torch.nn.Module, dtype: torch.dtype | None) -> Any:
        def cast(value: Any) -> Any:
            if isinstance(value, torch.Tensor) and value.is_floating_point() and dtype:
                return value.to(dtype)
            if isinstance(value, (list, tuple)):
                return type(value)(cast(v) for v in value)
            if isinstance(value, dict):
                return {k: cast(v) for k, v in value.items()}
            return value

        torch.manual_seed(SEED + 1)
        output = module(*cast(args), **cast(kwargs))
        return [t.detach().cpu() for _, t in iter_tensors(output, "out")]

    result: dict[str, Any] = {"keys": list(model.state_dict())}
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    torch.save(state, state_file)
    pristine = copy.deepcopy(model)
    result["float32"] = call(copy.deepcopy(pristine), None) if loaded.args is not None else []
    for move in ("bfloat16", "double"):
        moved = copy.deepcopy(pristine)
        dtype = getattr(torch, move)
        moved.to(dtype)
        result[f"dtypes_{move}"] = {p: str(t.dtype) for p, t in tensors(moved).items()}
        if move == "double":
            result["left_double"] = sorted(
                p for p, t in tensors(moved).items() if t.is_floating_point() and t.dtype != dtype
            )
        try:
            result[move] = call(moved, dtype) if loaded.args is not None else []
        except Exception as error:  # noqa: BLE001 - the model's own failure is a result here
            result[move] = f"{type(error).__name__}: {error}".splitlines()[0]
    meta = copy.deepcopy(pristine).to("meta")
    result["left_meta"] = sorted(p for p, t in tensors(meta).items() if t.device.type != "meta")
    return result


def _load_into(out: str, *targets: str) -> None:
    """Load each target's checkpoint (saved by ``probe`` as ``out``) strictly into a fresh
    model of it (here); print the outcomes as JSON."""
    import torch

    from autoreg._target import load

    sys.path.insert(0, os.getcwd())
    outcomes = {}
    for number, target in enumerate(targets):
        try:
            model = load(target).model
            model.load_state_dict(
                torch.load(f"{out}.{number}.state", weights_only=True), strict=True
            )
            outcomes[target] = "ok"
        except Exception as error:  # noqa: BLE001 - reported
            outcomes[target] = f"{type(error).__name__}: {error}".splitlines()[0]
    print(json.dumps(outcomes))


def _run(directory: Path, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, __file__, *args],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if result.returncode:
        raise RuntimeError(f"probe in {directory} failed:\n{result.stderr[-3000:]}")
    return result.stdout


def compare(original: Path, migrated: Path, *targets: str) -> dict[str, dict[str, Any]]:
    """Probe both sides (fresh processes) and compare them, target by target, check by check."""
    import torch

    with tempfile.TemporaryDirectory() as scratch:
        before_file, after_file = f"{scratch}/before.pt", f"{scratch}/after.pt"
        _run(original, "probe", before_file, *targets)
        _run(migrated, "probe", after_file, *targets)
        befores = torch.load(before_file, weights_only=True)
        afters = torch.load(after_file, weights_only=True)
        stricts = json.loads(_run(migrated, "load", before_file, *targets).splitlines()[-1])
    reports = {}
    for target in targets:
        before, after = befores[target], afters[target]
        if isinstance(before, str) or isinstance(after, str):
            reports[target] = {"built": f"original: {before}; migrated: {after}"[:300]}
            continue
        reports[target] = _report(before, after, stricts[target])
    return reports


def _report(before: dict[str, Any], after: dict[str, Any], strict: str) -> dict[str, Any]:
    report: dict[str, Any] = {
        "keys": "same" if before["keys"] == after["keys"] else _keys(before, after),
        "strict": strict,
        "float32": _same(before["float32"], after["float32"]),
    }
    scale = max((float(t.abs().max()) for t in before["float32"] if t.numel()), default=1.0)
    for move in ("bfloat16", "double"):
        atol = TOLERANCE[move] * max(scale, 1e-6)
        if isinstance(after[move], str) and after[move] == before[move]:
            report[move] = f"raises, as the original: {after[move]}"
        else:  # the original after the same move, or its float32 outputs if it raised there
            reference = before["float32"] if isinstance(before[move], str) else before[move]
            report[move] = _close(reference, after[move], atol)
        changed = [
            path
            for path, dtype in after[f"dtypes_{move}"].items()
            if path in before[f"dtypes_{move}"]
            and _kind(dtype) != _kind(before[f"dtypes_{move}"][path])
        ]
        if changed:
            report[move] += f"; kind changed: {', '.join(sorted(changed))}"
    report["left_double"] = after["left_double"]
    report["left_meta"] = after["left_meta"]
    report["before_left_meta"] = before["left_meta"]
    return report


def _keys(before: dict[str, Any], after: dict[str, Any]) -> str:
    gained = sorted(set(after["keys"]) - set(before["keys"]))
    lost = sorted(set(before["keys"]) - set(after["keys"]))
    return f"gained {gained}, lost {lost}" if gained or lost else "same, another order"


def _same(before: Any, after: Any) -> str:
    if isinstance(after, str):
        return after
    if len(before) != len(after):
        return "different outputs"
    return "bitwise" if all(a.equal(b) for a, b in zip(before, after, strict=True)) else "differ"


def _close(reference: Any, outputs: Any, atol: float) -> str:
    """``ok`` when each output agrees with the float32 reference within ``atol``."""
    if isinstance(outputs, str):
        return f"raised {outputs}"
    if len(reference) != len(outputs):
        return "different outputs"
    worst = 0.0
    for ref, out in zip(reference, outputs, strict=True):
        if ref.shape != out.shape:
            return "different shapes"
        if ref.is_floating_point() or ref.is_complex():
            worst = max(worst, float((out.to(ref.dtype) - ref).abs().max()) if ref.numel() else 0)
        elif not ref.equal(out):
            return "differ"
    return "ok" if worst <= atol else f"differ by {worst:.3g} (tolerance {atol:.3g})"


def _kind(dtype: str) -> str:
    if "complex" in dtype:
        return "complex"
    if "float" in dtype or dtype in ("torch.half", "torch.double"):
        return "floating"
    return dtype  # integer and bool dtypes keep their own


if __name__ == "__main__":
    command, *rest = sys.argv[1:]
    if command == "probe":
        probe(*rest)
    elif command == "load":
        _load_into(*rest)
    else:
        print(json.dumps(compare(Path(rest[0]), Path(rest[1]), *rest[2:]), indent=2))
