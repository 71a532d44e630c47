"""``autoreg audit``'s output in a terminal, a pipe and a script, and its modes.

Tables fit 80 to 120 columns (the fix wraps; ``--json`` keeps every field in full); a reader that
goes away (``| head``) ends the output quietly with the usual exit status; a file path as a target
gets the dotted name to use; an error raised while building the model is located at the user's
line, not in torch or autoreg; a bad ``AUTOREG_MODE`` is one line and exit status 2;
``--train`` / ``--eval`` choose the mode of the forward pass. Subcommands come from one list.
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

import autoreg
from autoreg import _cli
from autoreg.__main__ import main
from autoreg._target import UsageError
from examples import net
from tests.audit.support import ROOT, environment, modules_in, run_cli

PREFIX = "python -m autoreg audit: error: "

MODELS = """\
import torch
from torch import nn

import autoreg


class Leaky(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention_mask_for_the_longest_sequences = torch.ones(2, 2, dtype=torch.bool)
        self.anchors = [torch.ones(3)]


class Noisy(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        if self.training:
            x = x + torch.randn(x.shape)
        if not self.training:
            x = x * torch.linspace(0.5, 1.5, 4)
        return self.linear(x)


class Strict(autoreg.Module, strict=True):
    def __init__(self):
        super().__init__()
        self.table = torch.zeros(3)


def leaky():
    return Leaky()


def noisy():
    return Noisy(), (torch.ones(2, 4),)


def bad_linear():
    return nn.Linear(-1, 2)


def strict():
    return Strict()


class Prototypes(nn.Module):
    def __init__(self):
        super().__init__()
        self.prototypes = [torch.randn(4) for _ in range(3)]

    def forward(self, x):
        return x @ torch.stack(self.prototypes).T


def prototypes():
    return Prototypes(), (torch.ones(2, 4),)
"""

LINES = MODELS.splitlines()
BAD_LINEAR_LINE = LINES.index("    return nn.Linear(-1, 2)") + 1
STRICT_LINE = LINES.index("        self.table = torch.zeros(3)") + 1
TRAIN_LINE = LINES.index("            x = x + torch.randn(x.shape)") + 1
EVAL_LINE = LINES.index("            x = x * torch.linspace(0.5, 1.5, 4)") + 1


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from modules_in(tmp_path_factory, {"cli_output_models": MODELS})


# --- tables fit the terminal; JSON keeps every field ---------------------------------------------


@pytest.mark.parametrize(
    ("columns", "width"),
    [("40", 80), ("80", 80), ("100", 100), ("120", 120), ("240", 120)],
    ids=["narrow-terminal", "80", "100", "120", "wide-terminal"],
)
def test_tables_fit_80_to_120_columns(
    importable: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    columns: str,
    width: int,
) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    for argv in (
        ["audit", "cli_output_models:leaky"],
        ["audit", "cli_output_models:noisy", "--forward", "--train", "--eval"],
    ):
        assert main(argv) == 1
        lines = capsys.readouterr().out.splitlines()
        assert max(map(len, lines)) <= width
        assert max(map(len, lines)) > width - 20  # the room is used


@pytest.mark.slow
def test_the_net_example_fits_80_columns_with_every_fix_in_full(model_dir: Path) -> None:
    table = run_cli(ROOT, "audit", "examples.net:example", "--forward", COLUMNS="80")
    report = json.loads(
        run_cli(ROOT, "audit", "examples.net:example", "--forward", "--json").stdout
    )
    assert table.returncode == 1
    assert max(len(line) for line in table.stdout.splitlines()) <= 80
    words = table.stdout.split()
    fixes = [finding["fix"] for finding in (*report["findings"], *report["forward"])]
    for fix in fixes:  # each fix is in the table, wrapped: its words in order
        start = words.index(fix.split()[0])
        assert words[start : start + len(fix.split())] == fix.split()
    model, args = net.example()
    findings = autoreg.audit_forward(model, *args)
    assert [f["fix"] for f in report["forward"]] == [f.fix for f in findings]


def test_each_fix_is_said_once_for_the_items_of_a_list_and_its_forward_rows(
    importable: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["audit", "cli_output_models:prototypes", "--forward"]) == 1
    out = capsys.readouterr().out
    fixes = [line for line in out.splitlines() if line.startswith("  fix")]
    assert len(fixes) == 2  # once for the attribute, once in the forward's table
    assert " (+2)  device, dtype  float32[4, 3] cpu  mm" in out
    assert "  fix: Prototypes.prototypes is left behind by .to(): its fix is above\n" in out
    model, args = importlib.import_module("cli_output_models").prototypes()
    report = autoreg.audit_forward(model, *args)
    assert [f.attribute for f in report if f.kind == "device"] == [
        "prototypes[0]",
        "prototypes[1]",
        "prototypes[2]",
    ]  # each in the findings (and in --json)


# --- a reader that goes away ---------------------------------------------------------------------


@pytest.mark.slow
def test_a_closed_pipe_ends_quietly_with_the_usual_exit_status(model_dir: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "autoreg", "audit", "cli_output_models:leaky"],
        cwd=model_dir,
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None
    assert process.stderr is not None
    process.stdout.close()  # the reader has gone before the report is written
    try:
        status = process.wait(timeout=120)
    finally:
        stderr = process.stderr.read().decode()
        process.stderr.close()
    assert (status, stderr) == (1, "")


@pytest.mark.slow
def test_head_reads_the_first_lines(model_dir: Path) -> None:
    command = f"{sys.executable} -m autoreg audit cli_output_models:leaky | head -1"
    result = subprocess.run(
        ["bash", "-c", command + "; exit ${PIPESTATUS[0]}"],
        cwd=model_dir,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (result.returncode, result.stderr) == (1, "")
    assert result.stdout.split() == ["PATH", "CLASS", "TENSOR"]  # the fixes go under each row


# --- targets: file paths, the user's line, AUTOREG_MODE ------------------------------------------


@pytest.mark.parametrize(
    ("target", "dotted"),
    [
        ("cli_output_models.py:leaky", "cli_output_models:leaky"),
        ("mylib/model.py:build", "mylib.model:build"),
        ("./mylib/model.py:Net.build", "mylib.model:Net.build"),
    ],
    ids=["file", "nested-file", "dot-slash"],
)
def test_a_file_path_target_gets_the_dotted_module_name(
    importable: Path, capsys: pytest.CaptureFixture[str], target: str, dotted: str
) -> None:
    assert main(["audit", target]) == 2
    assert capsys.readouterr().err == (
        f"{PREFIX}{target!r} names a file; a target names a module, with dots: {dotted} (run "
        "from the directory its package is in)\n"
    )


@pytest.mark.parametrize(
    ("target", "error", "line"),
    [
        ("cli_output_models:bad_linear", "RuntimeError: Trying to create tensor", BAD_LINEAR_LINE),
        ("cli_output_models:strict", "UnregisteredTensorError: cannot assign", STRICT_LINE),
    ],
    ids=["raised-in-torch", "raised-in-autoreg"],
)
def test_an_error_while_building_is_located_at_the_users_line(
    importable: Path, capsys: pytest.CaptureFixture[str], target: str, error: str, line: int
) -> None:
    assert main(["audit", target]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{PREFIX}{target}() raised {error}")
    assert f"(at cli_output_models.py:{line})" in err
    assert "site-packages" not in err
    assert "autoreg/_" not in err


def test_a_bad_autoreg_mode_is_one_line_and_exit_status_2(
    importable: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTOREG_MODE", "bogus")
    assert main(["audit", "cli_output_models:leaky"]) == 2
    assert capsys.readouterr() == (
        "",
        f"{PREFIX}AUTOREG_MODE='bogus' is not a mode autoreg knows. Valid values: 'register', "
        "'warn', 'strict'. Leave it unset (or empty) to use each class's own keywords; the default "
        "is 'register'.\n",
    )


def test_a_bad_autoreg_mode_from_the_shell_is_one_line_and_exit_status_2(model_dir: Path) -> None:
    result = run_cli(model_dir, "audit", "cli_output_models:leaky", AUTOREG_MODE="bogus")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith(f"{PREFIX}AUTOREG_MODE='bogus' is not a mode autoreg knows.")
    assert result.stderr.count("\n") == 1


# --- the mode of the forward pass ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "lines", "mode"),
    [
        ([], [TRAIN_LINE], "train"),
        (["--train"], [TRAIN_LINE], "train"),
        (["--eval"], [EVAL_LINE], "eval"),
        (["--train", "--eval"], [TRAIN_LINE, EVAL_LINE], "both"),
    ],
    ids=["model's-own", "train", "eval", "both"],
)
def test_train_and_eval_choose_the_mode_of_the_forward_pass(
    importable: Path,
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    lines: list[int],
    mode: str,
) -> None:
    assert main(["audit", "cli_output_models:noisy", "--forward", "--json", *flags]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["forward_mode"] == mode
    assert sorted({f["lineno"] for f in report["forward"]}) == lines
    assert main(["audit", "cli_output_models:noisy", "--forward", *flags]) == 1
    text = capsys.readouterr().out
    said = {"both": "train and eval"}.get(mode, mode)
    assert f"in the forward of Noisy ({said} mode)" in " ".join(text.split())
    assert ("MODE" in text.split()) is (mode == "both")


def test_a_mode_without_forward_is_a_usage_error(
    importable: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["audit", "cli_output_models:leaky", "--eval"]) == 2
    assert capsys.readouterr().err == (
        f"{PREFIX}--train and --eval choose the mode of the forward pass: add --forward (or "
        "--step)\n"
    )


# --- subcommands, from one list -----------------------------------------------------------------


def _hello_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    subparsers.add_parser("hello").add_argument("--fail", action="store_true")


def _hello_run(args: argparse.Namespace) -> int:
    if args.fail:
        raise UsageError("it failed")
    print("hello")
    return 0


def test_a_subcommand_is_one_module_in_the_list(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A command is its arguments, and the module that runs it, imported only to run it.
    monkeypatch.setitem(sys.modules, "hello_command", SimpleNamespace(run=_hello_run))
    monkeypatch.setitem(_cli.COMMANDS, "hello", ("hello_command", _hello_parser))
    assert main(["hello"]) == 0
    assert capsys.readouterr().out == "hello\n"
    assert main(["hello", "--fail"]) == 2
    assert capsys.readouterr().err == "python -m autoreg hello: error: it failed\n"


# --- the user's project is imported first ------------------------------------------------------

USER_EXAMPLES = """\
import torch
from torch import nn


class Mine(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.ones(2)


def build():
    return Mine()
"""


@pytest.mark.parametrize(
    "command",
    [
        pytest.param([sys.executable, "-m", "autoreg"], id="python-m"),
        pytest.param([str(Path(sys.executable).parent / "autoreg")], id="console-script"),
    ],
)
@pytest.mark.slow
def test_a_projects_own_examples_package_is_not_shadowed_by_a_checkout_on_pythonpath(
    tmp_path: Path, command: list[str]
) -> None:
    """A clone of autoreg on PYTHONPATH has an ``examples`` package; the project's wins."""
    package = tmp_path / "examples"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "mine.py").write_text(USER_EXAMPLES)
    result = subprocess.run(
        [*command, "audit", "examples.mine:build"],
        cwd=tmp_path,
        env=environment(),  # PYTHONPATH: the checkout, then an empty entry
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (result.returncode, result.stderr) == (1, "")
    assert result.stdout.splitlines()[1].split() == ["scale", "Mine", "float32[2]", "cpu"]
