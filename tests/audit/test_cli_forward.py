"""``python -m autoreg audit TARGET --forward``: both audits; same exit statuses, tables, JSON."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoreg.__main__ import main
from tests.audit.support import ROOT, modules_in, run_cli

MODELS = """\
import torch
from torch import nn


class Clean(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(2, 2)

    def forward(self, x, scale=1.0):
        return self.linear(x) * scale


class Positions(nn.Module):
    def forward(self, x):
        positions = torch.arange(x.shape[-1])
        return x + positions


class Selects(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        y = self.linear(x)
        return y[y > 0]


class Broken(nn.Module):
    def forward(self, x):
        return x.reshpe(-1)


def clean():
    print("building the model")
    return Clean(), (torch.ones(3, 2),)


def clean_with_kwargs():
    return Clean(), [torch.ones(3, 2)], {"scale": 2.0}


def positions():
    return Positions(), (torch.ones(2, 4),)


def selects():
    return Selects(), (torch.ones(2, 4),)


def broken():
    return Broken(), (torch.ones(2, 4),)


def model_only():
    return Clean()


def args_not_a_sequence():
    return Clean(), torch.ones(3, 2)


instance = Clean()
"""

POSITIONS_LINE = MODELS.splitlines().index("        positions = torch.arange(x.shape[-1])") + 1
BROKEN_LINE = MODELS.splitlines().index("        return x.reshpe(-1)") + 1


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from modules_in(tmp_path_factory, {"cli_forward_models": MODELS})


# --- in a subprocess: the motivating Net, and a clean model ---------------------------------------


def test_the_net_example_exits_1_with_both_tables() -> None:
    result = run_cli(ROOT, "audit", "examples.net:example", "--forward")
    assert (result.returncode, result.stderr) == (1, "")
    source = (ROOT / "examples" / "net.py").read_text().splitlines()
    line = next(n for n, text in enumerate(source, 1) if "x = torch.rand(2, 3)" in text)
    tables = result.stdout.split("\n\n")
    assert tables[0].splitlines()[1].startswith("w3    Net    float32[2, 3] cpu  ")
    assert tables[1] == "1 tensor in Net would be left behind by .to()."
    rows = [row for row in tables[2].splitlines() if not row.startswith(" ")]  # fixes wrap
    assert rows[0].split() == ["WHERE", "KIND", "TENSOR", "OP", "FIX"]
    assert rows[1].startswith(f"examples/net.py:{line}  device  float32[2, 3] cpu  add (line ")
    assert rows[2].startswith(f"examples/net.py:{line}  dtype   float32[2, 3] cpu  add (line ")
    assert " ".join(tables[3].split()) == (
        "2 strays in the forward of Net (train mode): tensors it makes, takes or stores that stay "
        "behind when the model moves."
    )


def test_a_clean_forward_exits_0(model_dir: Path) -> None:
    result = run_cli(model_dir, "audit", "cli_forward_models:clean", "--forward")
    assert (result.returncode, result.stderr) == (0, "building the model\n")
    assert result.stdout == (
        "Nothing in Clean would be left behind by .to().\n\n"
        "Nothing in the forward of Clean (train mode) stays behind when it moves.\n"
    )


# --- in process -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "status"),
    [
        ("cli_forward_models:clean_with_kwargs", 0),
        ("cli_forward_models:positions", 1),
        ("cli_forward_models:selects", 0),  # y[y > 0]: values, which the audit has
    ],
    ids=["model-args-kwargs", "a-stray", "a-shape-from-values"],
)
def test_the_factory_returns_model_and_args_and_optionally_kwargs(
    importable: Path, capsys: pytest.CaptureFixture[str], target: str, status: int
) -> None:
    assert main(["audit", target, "--forward"]) == status
    out, err = capsys.readouterr()
    assert err == ""
    assert out.endswith("when it moves.\n" if status == 0 else "when the model moves.\n")


def test_json_adds_the_forward_findings(
    importable: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["audit", "--json", "--forward", "cli_forward_models:positions"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert (report["target"], report["class"], report["findings"]) == (
        "cli_forward_models:positions",
        "Positions",
        [],
    )
    device = report["forward"][0]
    assert device == {
        "kind": "device",
        "filename": str(importable / "cli_forward_models.py"),
        "lineno": POSITIONS_LINE,
        "source": "positions = torch.arange(x.shape[-1])",
        "op": "add",
        "op_filename": str(importable / "cli_forward_models.py"),
        "op_lineno": POSITIONS_LINE + 1,
        "tensor": "int64[4] cpu",
        "entered": False,
        "fix": "device=x.device (or .to(x))",  # its shape is the input's: made at each call
        "attribute": "",
        "class_name": "Positions",
        "module_path": "",
        "mode": "train",
        "dtype": "int64",
        "shape": [4],
        "device": "cpu",
        "reason": "add meets it next to the model's tensors",
    }
    assert [finding["kind"] for finding in report["forward"]] == ["device"]  # int64 promotes not


def test_without_forward_the_json_has_no_forward_key(
    importable: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["audit", "--json", "cli_forward_models:Clean"]) == 0
    assert "forward" not in json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (
            "cli_forward_models:model_only",
            r"^cli_forward_models:model_only\(\) returned the module Clean\(\.\.\.\): with "
            r"--forward, expected \(model, args\) or \(model, args, kwargs\), e\.g\. return "
            r"Net\(\), \(torch\.ones\(2, 3\),\)$",
        ),
        (
            "cli_forward_models:instance",
            r"^cli_forward_models:instance is the module Clean\(\.\.\.\): with --forward",
        ),
        (
            "cli_forward_models:args_not_a_sequence",
            r"^cli_forward_models:args_not_a_sequence\(\) returned \(Clean\(",
        ),
        (
            "cli_forward_models:broken",
            r"^cannot audit the forward of cli_forward_models:broken: the forward of Broken "
            rf"raises at cli_forward_models.py:{BROKEN_LINE}: ",
        ),
    ],
    ids=["a-module", "a-module-instance", "args-not-a-sequence", "forward-raises"],
)
def test_usage_errors_exit_2(
    importable: Path, capsys: pytest.CaptureFixture[str], target: str, message: str
) -> None:
    assert main(["audit", target, "--forward"]) == 2
    out, err = capsys.readouterr()
    prefix = "python -m autoreg audit: error: "
    assert out == ""
    assert err.startswith(prefix)
    assert "Traceback" not in err
    assert re.search(message, err[len(prefix) :], flags=re.MULTILINE)


def test_the_usage_message_documents_forward(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["audit", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--forward also run one forward pass on the meta device" in out
    assert "(model, args) or (model, args, kwargs)" in out
