"""cloudpickle: a class defined in ``__main__`` or in a function is pickled by value.

Ray, Dask, joblib's loky backend, submitit and PySpark ship a notebook's or a script's model that
way: the class is made again from its namespace, then its instances. An autoreg class must come
back as the same contract: its class keywords, its declarations, tensors assigned in ``__init__``
registered as buffers, runtime state carried. Before, the class could not be pickled at all
(its record held the namespaces of its MRO), and the construction wrapper, pickled by value with
the sets it reads, would have marked a copy nothing reads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("cloudpickle")

import cloudpickle
import torch
from torch import nn

import autoreg


def _classes() -> tuple[type[nn.Module], type[nn.Module]]:
    """An autoreg class, with a class keyword and a declaration, and its twin: made in a
    function, which cloudpickle pickles by value."""

    class Auto(autoreg.Module, persistent=True):
        scale: autoreg.NonPersistent

        def __init__(self, width: int = 3) -> None:
            super().__init__()
            self.lin = nn.Linear(width, width)
            self.mask = torch.ones(width)
            self.scale = torch.full((width,), 2.0)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.last = x.sum()
            return self.lin(x) * self.mask * self.scale

    class Twin(nn.Module):
        def __init__(self, width: int = 3) -> None:
            super().__init__()
            self.lin = nn.Linear(width, width)
            self.register_buffer("mask", torch.ones(width))
            self.register_buffer("scale", torch.full((width,), 2.0), persistent=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.last = x.sum()
            return self.lin(x) * self.mask * self.scale

    return Auto, Twin


# Run in a fresh process: in the one that pickled it, cloudpickle gives back the class itself.
_LOAD = """
import json, pickle, sys
import torch
with open(sys.argv[1], "rb") as file:
    loaded = pickle.load(file)
model = loaded() if isinstance(loaded, type) else loaded
before = sorted(name for name, _ in model.named_buffers())
model(torch.ones(2, 3))
model.double()
print(json.dumps({
    "buffers": before,
    "keys": sorted(model.state_dict()),
    "dtypes": {name: str(getattr(model, name).dtype) for name in ("mask", "scale", "last")},
}))
"""


def _loaded_elsewhere(obj: Any, tmp_path: Path) -> dict[str, Any]:
    """``obj`` pickled by cloudpickle here, loaded in a fresh process: what it builds there."""
    path = tmp_path / f"{id(obj)}.pkl"
    path.write_bytes(cloudpickle.dumps(obj))
    done = subprocess.run(
        [sys.executable, "-c", _LOAD, str(path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_a_class_pickled_by_value_builds_what_the_original_builds(tmp_path: Path) -> None:
    """Before: ``TypeError: cannot pickle 'classmethod_descriptor'`` (the record)."""
    auto, twin = _classes()
    expected = {
        "buffers": ["mask", "scale"],  # registered in __init__, as on the twin
        "keys": ["lin.bias", "lin.weight", "mask"],  # persistent=True; scale: NonPersistent
        "dtypes": {"mask": "torch.float64", "scale": "torch.float64", "last": "torch.float64"},
    }
    assert _loaded_elsewhere(auto, tmp_path) == expected
    twins = _loaded_elsewhere(twin, tmp_path)
    assert {**twins, "dtypes": {**twins["dtypes"], "last": "torch.float64"}} == expected


def test_an_instance_of_a_class_pickled_by_value_keeps_what_it_holds(tmp_path: Path) -> None:
    auto, _ = _classes()
    model = auto()
    model(torch.ones(2, 3))  # runtime state, carried
    assert _loaded_elsewhere(model, tmp_path) == {
        "buffers": ["mask", "scale"],
        "keys": ["lin.bias", "lin.weight", "mask"],
        "dtypes": {"mask": "torch.float64", "scale": "torch.float64", "last": "torch.float64"},
    }


def _with_a_plain_mixin() -> type[nn.Module]:
    """A class whose roles a plain mixin declares, under string annotations."""

    class RunningStats:
        running: autoreg.Persistent
        last: autoreg.NonPersistent

    class Stats(RunningStats, autoreg.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.mask = torch.ones(3)
            self.scale = torch.ones(3)
            self.running = torch.zeros(3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.last = x.sum()
            return self.lin(x) * self.mask * self.scale + self.running

    return Stats


def test_the_declarations_of_a_plain_mixin_pickled_by_value_come_with_it(tmp_path: Path) -> None:
    """Before: the mixin's annotations were read in the loading process against a module that
    is not the one they were written in: ``running: autoreg.Persistent`` declared nothing, and
    ``running`` was missing from ``state_dict()``."""
    assert _loaded_elsewhere(_with_a_plain_mixin(), tmp_path) == {
        "buffers": ["mask", "running", "scale"],
        "keys": ["lin.bias", "lin.weight", "running"],
        "dtypes": {"mask": "torch.float64", "scale": "torch.float64", "last": "torch.float64"},
    }


# What the loading process does with the class: a mode, a framework base, compiled code.
_RUN = """
import json, pickle, sys, warnings
import torch
with open(sys.argv[1], "rb") as file:
    auto, twin = pickle.load(file)
result = {}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    try:
        model = auto()
    except Exception as error:
        result["error"] = type(error).__name__
    else:
        result["buffers"] = sorted(name for name, _ in model.named_buffers())
        result["keys"] = sorted(model.state_dict())
result["warned"] = sorted({type(w.message).__name__ for w in caught if "autoreg" in str(w.message)})
if sys.argv[2] == "compile":
    from torch._dynamo.testing import CompileCounterWithBackend
    frames = []
    for cls in (twin, auto):
        torch._dynamo.reset()
        counter = CompileCounterWithBackend("eager")
        module = cls()
        step = torch.compile(module, backend=counter)
        for _ in range(3):
            step(torch.ones(2, 3))
        module.double()
        step(torch.ones(2, 3, dtype=torch.float64))
        frames.append(int(counter.frame_count))
    result["frames"] = frames
print(json.dumps(result))
"""


def _run_elsewhere(
    auto: type[nn.Module],
    twin: type[nn.Module],
    tmp_path: Path,
    *,
    env: dict[str, str] | None = None,
    compile: bool = False,
) -> dict[str, Any]:
    """``auto`` and ``twin`` pickled by value here, loaded in a fresh process: what ``auto()``
    builds there, raises or warns; with ``compile``, the dynamo frames of the twin's compiled
    model and of ``auto``'s, each called three times, then moved to float64 and called."""
    path = tmp_path / "classes.pkl"
    path.write_bytes(cloudpickle.dumps((auto, twin)))
    done = subprocess.run(
        [sys.executable, "-c", _RUN, str(path), "compile" if compile else "build"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "AUTOREG_MODE": "", **(env or {})},
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_a_strict_class_pickled_by_value_stays_strict(tmp_path: Path) -> None:
    class Strict(autoreg.Module, strict=True):
        def __init__(self) -> None:
            super().__init__()
            self.mask = torch.ones(3)

    class Declared(autoreg.Module, strict=True):
        mask: autoreg.NonPersistent

        def __init__(self) -> None:
            super().__init__()
            self.mask = torch.ones(3)

    assert _run_elsewhere(Strict, Strict, tmp_path)["error"] == "UnregisteredTensorError"
    declared = _run_elsewhere(Declared, Declared, tmp_path)
    assert (declared["buffers"], declared["keys"]) == (["mask"], [])


def test_autoreg_mode_of_the_loading_process_applies_to_a_class_pickled_by_value(
    tmp_path: Path,
) -> None:
    auto, twin = _classes()
    warned = _run_elsewhere(auto, twin, tmp_path, env={"AUTOREG_MODE": "warn"})
    assert warned["buffers"] == ["mask", "scale"]
    assert warned["warned"] == ["AutoRegisterWarning"]
    strict = _run_elsewhere(auto, twin, tmp_path, env={"AUTOREG_MODE": "strict"})
    assert strict["error"] == "UnregisteredTensorError"
    assert _run_elsewhere(auto, twin, tmp_path)["warned"] == []


def test_a_class_on_a_framework_base_pickled_by_value_leaves_the_frameworks_state(
    tmp_path: Path,
) -> None:
    """Row 4 in the loading process: what Lightning's ``__init__`` assigns is Lightning's (no
    buffer); what the model's own ``__init__`` assigns registers, as on the twin."""
    pl = pytest.importorskip("lightning.pytorch")

    class Auto(autoreg.AutoRegisterMixin, pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.mask = torch.ones(3)

    class Twin(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.register_buffer("mask", torch.ones(3), persistent=False)

    auto, twin = _run_elsewhere(Auto, Twin, tmp_path), _run_elsewhere(Twin, Twin, tmp_path)
    assert (
        (auto["buffers"], auto["keys"])
        == (twin["buffers"], twin["keys"])
        == (
            ["mask"],
            ["lin.bias", "lin.weight"],
        )
    )


def test_a_class_pickled_by_value_compiles_as_often_as_its_twin(tmp_path: Path) -> None:
    """Compiled in the loading process, first call compiled (no eager call first), then moved:
    as many frames as the twin's."""
    auto, twin = _classes()
    twins, autos = _run_elsewhere(auto, twin, tmp_path, compile=True)["frames"]
    assert twins >= 1
    assert autos == twins
