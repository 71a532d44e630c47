"""Smoke test of ``python -m benchmarks --quick``: the report's structure and the move results.

Timings are never checked: they depend on the machine. The run is a subprocess, as a user runs
it, writing into a temporary directory.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = ("plain", "hand", "auto")
MACHINE_KEYS = {
    "device",
    "hardware",
    "cpu",
    "cpu_count",
    "gpu",
    "torch",
    "python",
    "platform",
    "autoreg",
    "date",
    "datetime_utc",
}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path, str]:
    out = tmp_path_factory.mktemp("results")
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (json_path,) = out.glob("*-quick.json")
    return json.loads(json_path.read_text()), out, done.stdout


def test_files_are_written_and_name_the_machine(quick_run: tuple[dict[str, Any], Path, str]):
    report, out, _ = quick_run
    machine = report["machine"]
    stem = f"{machine['device']}-{machine['date']}-quick"
    assert sorted(path.name for path in out.iterdir()) == [
        f"{stem}.{suffix}" for suffix in ("json", "md", "png")
    ]
    assert machine.keys() >= MACHINE_KEYS
    assert machine["device"] in ("cpu", "cuda")
    assert all(machine[key] for key in ("hardware", "torch", "python", "date"))
    markdown = (out / f"{stem}.md").read_text()
    for fact in (machine["hardware"], machine["torch"], machine["python"], machine["date"]):
        assert fact in markdown
    assert (out / f"{stem}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_structure(quick_run: tuple[dict[str, Any], Path, str]):
    report, _, stdout = quick_run
    assert report["schema"] == 1
    assert report["kind"] == "quick"
    assert {"move", "forward", "micro", "targets", "settings", "duration_s"} <= report.keys()
    assert len({row["model"] for row in report["move"]}) >= 8
    for row in report["forward"]:
        assert row["error"] is None, row
        assert {"ratio_median", "ratio_min", "ratio_max", "hand_us", "auto_us"} <= row.keys()
        assert row["rounds"] >= 15
    assert {row["mode"] for row in report["forward"]} == {"eager"}  # --quick does not compile
    micro = {row["name"] for row in report["micro"]}
    assert {"setattr_int", "buffer_reassign", "construct_2000", "to_roundtrip"} <= micro
    for target in report["targets"]:
        assert {"target", "limit", "value", "met"} <= target.keys()
    for title in ("Move check", "Forward", "Micro", "Targets"):
        assert title in stdout


def test_plain_modules_leave_tensors_behind_and_fail(quick_run: tuple[dict[str, Any], Path, str]):
    report, _, _ = quick_run
    device_target = "cuda" if report["machine"]["device"] == "cuda" else "meta"
    device_moves = [row for row in report["move"] if row["target"] == device_target]
    assert device_moves
    for row in device_moves:
        plain = row["variants"]["plain"]
        assert plain["left_behind"], row["model"]
        assert not plain["forward_ok"], row["model"]
        assert "device" in plain["error"], plain["error"]


def test_hand_registered_and_autoreg_move_everything_and_agree(
    quick_run: tuple[dict[str, Any], Path, str],
):
    report, _, _ = quick_run
    assert {row["target"] for row in report["move"]} >= {"float64", "bfloat16"}
    for row in report["move"]:
        where = f"{row['model']} .to({row['target']})"
        assert row["weights_identical"], where
        assert row["cpu_outputs_identical"], where
        assert row["state_dict_keys_equal"], where
        for variant in ("hand", "auto"):
            outcome = row["variants"][variant]
            assert outcome["left_behind"] == [], where
            assert outcome["forward_ok"], (where, outcome["error"])
        assert row["variants"]["auto"]["versus_hand"].startswith("identical"), where
        assert row["expected"], where
