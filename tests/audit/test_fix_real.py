"""``autoreg fix`` never introduces a bug, on models that reproduce the patterns of real code
(``fix_real/``: an LLM with a complex rotary table, a NeRF embedding, soft actor-critic
policies, a Hamiltonian network, a neural ODE, a YOLO head, PyTorch's examples, a from-scratch
transformer, a DDPM, a mask shared by two classes). Each is rewritten in both styles with
``--write``, then the original and the rewritten model are compared in fresh processes
(``fix_support/equivalence.py``): the same state_dict keys, the old checkpoint loads strictly,
float32 outputs bitwise equal, outputs after ``.to(torch.bfloat16)`` and ``.double()`` as the
original's with no tensor changing its kind (a complex table cast to a real dtype), and nothing
left behind after ``.double()`` and ``.to("meta")`` but what ``fix`` lists."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from autoreg._fix.collect import autoreg_keeps_complex

from .fix_support.equivalence import compare

FIXTURE = Path(__file__).parent / "fix_real"
TARGETS = [
    f"realproj.{name}"
    for name in (
        "llm:build",
        "nerf:build",
        "policy:gaussian",
        "policy:deterministic",
        "hamiltonian:build",
        "hamiltonian:field",
        "ode:build",
        "detector:build",
        "sequence:build",
        "language:build",
        "encoder:build",
        "diffusion:build",
        "shared:build",
    )
]
# What .double() still leaves behind, listed by fix: in the buffer style, a name a branch of the
# source stores as a float (the deterministic policy's action scale) is held back whole.
LEFT_DOUBLE = {
    "buffer": {"realproj.policy:deterministic": ["action_bias", "action_scale"]},
    "base": {},
}
# What .to("meta") still leaves behind, listed by fix: those, and the complex rotary table, which
# stays plain in the buffer style, and in the base style while autoreg would cast it under
# .to(a real dtype).
LEFT = {
    "buffer": {"realproj.llm:build": ["freqs"], **LEFT_DOUBLE["buffer"]},
    "base": {} if autoreg_keeps_complex() else {"realproj.llm:build": ["freqs"]},
}


@pytest.fixture(scope="module", params=["base", "buffer"])
def reports(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, subprocess.CompletedProcess[str], dict[str, dict[str, Any]]]:
    style = request.param
    root = tmp_path_factory.mktemp(f"real_{style}")
    original, migrated = root / "original", root / "migrated"
    shutil.copytree(FIXTURE, original)
    shutil.copytree(FIXTURE, migrated)
    command = [sys.executable, "-m", "autoreg", "fix", *TARGETS, "--style", style, "--write"]
    result = subprocess.run(
        command, cwd=migrated, capture_output=True, text=True, timeout=600, check=False
    )
    return style, result, compare(original, migrated, *TARGETS)


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
def test_the_rewritten_model_computes_what_the_original_computes(
    reports: tuple[str, subprocess.CompletedProcess[str], dict[str, dict[str, Any]]],
    target: str,
) -> None:
    style, fixed, found = reports
    assert fixed.returncode == 1, fixed.stderr  # edits are left to the user (listed)
    report = found[target]
    assert report["keys"] == "same"
    assert report["strict"] == "ok"
    assert report["float32"] == "bitwise"
    for move in ("bfloat16", "double"):
        assert report[move] == "ok" or report[move].startswith("raises, as the original"), (
            style,
            move,
            report[move],
        )
    assert report["left_double"] == LEFT_DOUBLE[style].get(target, [])
    assert report["left_meta"] == LEFT[style].get(target, [])


@pytest.mark.slow
def test_each_pattern_left_something_behind_before(
    reports: tuple[str, subprocess.CompletedProcess[str], dict[str, dict[str, Any]]],
) -> None:
    """The checks above can fail: most originals leave tensors behind on .to("meta")."""
    _, _, found = reports
    left = [t for t in TARGETS if found[t]["before_left_meta"]]
    assert len(left) >= 7
