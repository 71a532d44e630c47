"""``python -m autoreg audit TARGET --forward`` (or ``--step``): both audits, one report.

Exit status: 0 when everything was audited and nothing found; 1 when something was found or
could not be audited (a forward that raises still gets its attribute audit, and one line saying
why the forward was not audited); 2 for a usage error or a target that cannot be built.
"""

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
    def __init__(self):
        super().__init__()
        self.table = torch.ones(3)

    def forward(self, x):
        return x.reshpe(-1)


class Weighted(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 2)

    def forward(self, x):
        return self.linear(x)


def train_step(model, x, y):
    weight = torch.tensor([1.0, 3.0])
    loss = nn.functional.cross_entropy(model(x), y, weight=weight)
    loss.backward()
    return loss


def weighted():
    return Weighted(), (torch.ones(3, 4), torch.tensor([0, 1, 1]))


def weighted_forward():
    return Weighted(), (torch.ones(3, 4),)


NOT_A_FUNCTION = 3


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


class Talking(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(2, 2)
        self.scale = torch.ones(2)

    def forward(self, x):
        print("forward ran")
        return self.linear(x) * self.scale


def talking():
    return Talking(), (torch.ones(3, 2),)


def talking_step(model, x):
    print("step ran")
    return model(x).sum()


class Complex(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(2, 2))

    def forward(self, x):
        kernel = torch.view_as_complex(self.weight)
        return (kernel * x).real


def complex_kernel():
    return Complex(), (torch.ones(3, 2),)


class NoHalf(nn.Module):
    def forward(self, x):
        if x.dtype == torch.float16:
            raise NotImplementedError("no float16 here")
        return x


def no_half():
    return NoHalf(), (torch.ones(3, 2),)


instance = Clean()
"""

POSITIONS_LINE = MODELS.splitlines().index("        positions = torch.arange(x.shape[-1])") + 1
BROKEN_LINE = MODELS.splitlines().index("        return x.reshpe(-1)") + 1
LOSS_LINE = MODELS.splitlines().index("    weight = torch.tensor([1.0, 3.0])") + 1


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from modules_in(tmp_path_factory, {"cli_forward_models": MODELS})


# --- in a subprocess: the motivating Net, and a clean model ---------------------------------------


@pytest.mark.slow
def test_the_net_example_exits_1_with_both_audits_each_fix_said_once() -> None:
    result = run_cli(ROOT, "audit", "examples.net:example", "--forward")
    assert (result.returncode, result.stderr) == (1, "")
    source = (ROOT / "examples" / "net.py").read_text().splitlines()
    line = next(n for n, text in enumerate(source, 1) if "x = torch.rand(2, 3)" in text)
    assert result.stdout == (
        "PATH  CLASS  TENSOR\n"
        "w3    Net    float32[2, 3] cpu\n"
        "  fix: subclass autoreg.Module or register_buffer('w3', ..., persistent=False); "
        "third-party class:\n"
        "    autoreg.register_tensors\n"
        "\n"
        "1 tensor in Net would be left behind by .to().\n"
        "\n"
        "WHERE               KIND           TENSOR             OP\n"
        f"examples/net.py:{line}  device, dtype  float32[2, 3] cpu  add (line {line + 1})\n"
        "  fix: device=self.w1.device, dtype=self.w1.dtype (or torch.rand_like(self.w1) for "
        "self.w1's shape)\n"
        "\n"
        "1 stray in the forward of Net (train mode): tensors it makes, takes or stores that stay "
        "behind when\n"
        "the model moves.\n"
    )
    assert "meta" not in result.stdout


@pytest.mark.slow
def test_a_clean_forward_exits_0(model_dir: Path) -> None:
    result = run_cli(model_dir, "audit", "cli_forward_models:clean", "--forward")
    assert (result.returncode, result.stderr) == (0, "building the model\n")
    assert result.stdout == (
        "Nothing in Clean would be left behind by .to().\n\n"
        "Nothing in the forward of Clean (train mode) stays behind when it moves.\n"
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "command",
    [
        ["audit", "cli_forward_models:talking", "--forward", "--train", "--eval", "--json"],
        ["audit", "cli_forward_models:talking", "--step", "cli_forward_models:talking_step"],
        ["fix", "cli_forward_models:talking"],
    ],
    ids=["forward-json", "step", "fix"],
)
def test_what_the_users_code_prints_goes_to_stderr(model_dir: Path, command: list[str]) -> None:
    """stdout carries the report only (``--json`` is parsed by programs, ``fix`` prints a diff):
    the forward and the step print to stderr, as the factory does."""
    result = run_cli(model_dir, *command)
    assert "ran" not in result.stdout
    assert ("step ran" if "--step" in command else "forward ran") in result.stderr
    if "--json" in command:
        assert json.loads(result.stdout)["findings"][0]["attribute"] == "scale"
    if command[0] == "fix":
        assert result.stdout.startswith("--- ")


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
        "stored": "",
        "modes": ["train"],
    }
    assert (report["forward_of"], report["not_audited"]) == ("the forward of Positions", None)
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
    ],
    ids=["a-module", "a-module-instance", "args-not-a-sequence"],
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


def test_a_forward_that_raises_keeps_its_attribute_audit_and_exits_1(
    importable: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["audit", "cli_forward_models:broken", "--forward"]) == 1
    out, err = capsys.readouterr()
    assert err == ""
    assert out == (
        "PATH   CLASS   TENSOR\n"
        "table  Broken  float32[3] cpu\n"
        "  fix: subclass autoreg.Module or register_buffer('table', ..., persistent=False); "
        "third-party\n"
        "    class: autoreg.register_tensors\n"
        "\n"
        "1 tensor in Broken would be left behind by .to().\n"
        "\n"
        f"Not audited: the forward of Broken raises at cli_forward_models.py:{BROKEN_LINE}: "
        "AttributeError: 'Tensor'\n"
        "object has no attribute 'reshpe'; it raises on the CPU without the audit too (checked)\n"
    )
    assert main(["audit", "cli_forward_models:broken", "--forward", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert [f["path"] for f in report["findings"]] == ["table"]
    assert report["forward"] == []
    assert report["not_audited"].startswith("the forward of Broken raises at ")


def test_step_audits_a_training_step_instead_of_the_forward(
    importable: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["audit", "cli_forward_models:weighted", "--step", "cli_forward_models:train_step"]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert f"cli_forward_models.py:{LOSS_LINE}  device, dtype  float32[2] cpu" in out
    assert "1 stray in the step train_step of Weighted (train mode)" in " ".join(out.split())
    assert main(["audit", "cli_forward_models:weighted_forward", "--forward"]) == 0  # alone


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ("cli_forward_models:NOT_A_FUNCTION", r"^cli_forward_models:NOT_A_FUNCTION is 3: --step "),
        ("cli_forward_models:nothing", r"^module 'cli_forward_models' has no attribute 'nothing'"),
    ],
    ids=["not-a-function", "missing"],
)
def test_a_step_that_is_not_a_function_is_a_usage_error(
    importable: Path, capsys: pytest.CaptureFixture[str], step: str, message: str
) -> None:
    assert main(["audit", "cli_forward_models:weighted", "--step", step]) == 2
    err = capsys.readouterr().err
    assert re.search(message, err.removeprefix("python -m autoreg audit: error: "))


def test_low_precision_chooses_the_dtype_pass_or_skips_it(
    importable: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model that never runs in bfloat16 (a complex kernel) could only be audited from Python
    (``low_precision=None``): the command exited 1, "not audited", whatever the model did."""
    assert main(["audit", "cli_forward_models:complex_kernel", "--forward"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "Not audited: the forward of Complex raises once converted to bfloat16" in out
    assert out.endswith("; --low-precision none skips the bfloat16 pass")
    argv = ["audit", "cli_forward_models:complex_kernel", "--forward", "--low-precision", "none"]
    assert main(argv) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert out.endswith(
        "Nothing in the forward of Complex (train mode) stays behind when it moves. Not run in "
        "a low precision: a dtype left behind by .half() or .to(torch.bfloat16) is not audited."
    )
    assert main([*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["low_precision"], report["not_audited"]) == (None, None)
    # The pass runs in the dtype asked for.
    assert main(["audit", "cli_forward_models:no_half", "--forward", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["low_precision"] == "bfloat16"
    argv = ["audit", "cli_forward_models:no_half", "--forward", "--low-precision", "float16"]
    assert main(argv) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "Not audited: the forward of NoHalf raises once converted to float16" in out
    assert out.endswith("--low-precision none skips the float16 pass")


def test_low_precision_without_forward_is_a_usage_error(
    importable: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["audit", "cli_forward_models:clean", "--low-precision", "none"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m autoreg audit: error: --low-precision chooses ")
    assert "add --forward (or --step)" in err


def test_the_usage_message_documents_forward_and_step(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["audit", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--forward also run one forward pass (on the CPU)" in out
    assert "(model, args) or (model, args, kwargs)" in out
    assert "--step FUNCTION package.module:function - audit function(model, *args, **kwargs)" in out
    assert "--low-precision {bfloat16,float16,none}" in out
