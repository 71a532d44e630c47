"""``python -m autoreg audit``: findings by class (or JSON); exit 0 clean, 1 findings, 2 usage."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoreg.__main__ import main
from tests.audit.support import modules_in, run_cli

MODELS = """\
import warnings

import torch
from torch import nn


class Clean(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(2, 2)


class Leaky(nn.Module):
    def __init__(self):
        super().__init__()
        self.mask = torch.ones(2, 2, dtype=torch.bool)
        self.anchors = [torch.ones(3)]
        self.temperature = torch.ones((), requires_grad=True)


def build_leaky():
    print("building the model")
    return Leaky()


instance = Leaky()


class Factories:
    @staticmethod
    def clean():
        return Clean()


def needs_arguments(size):
    return nn.Linear(size, size)


def raises():
    raise RuntimeError("no GPU here")


def returns_int():
    return 3


def scripted():
    with warnings.catch_warnings():  # torch.jit is deprecated from torch 2.13 on
        warnings.simplefilter("ignore")
        return torch.jit.trace(nn.Linear(2, 2), torch.ones(1, 2))


NOT_CALLABLE = 3
"""

RAISES_LINE = MODELS.splitlines().index('    raise RuntimeError("no GPU here")') + 1

LEAKY_TABLE = """\
PATH         CLASS  TENSOR
mask         Leaky  bool[2, 2] cpu
anchors[0]   Leaky  float32[3] cpu
temperature  Leaky  float32[] cpu, requires grad
  fix (mask): subclass autoreg.Module or register_buffer('mask', ..., persistent=False); third-party
    class: autoreg.register_tensors
  fix (anchors): autoreg.BufferList(...), or subclass autoreg.Module (it carries the list)
  fix (temperature): nn.Parameter(...) if it is a weight to train; if not, requires_grad=False or
    .detach()

3 tensors in Leaky would be left behind by .to().
"""


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A directory holding the importable modules the targets name."""
    yield from modules_in(
        tmp_path_factory,
        {
            "cli_models": MODELS,
            "cli_broken": 'raise ImportError("optional dependency missing")\n',
            "cli_missing_dependency": "import not_installed_xyz\n",
        },
    )


# --- the exit statuses, in a subprocess ------------------------------------------------------


@pytest.mark.slow
def test_exit_status_0_when_nothing_would_be_left_behind(model_dir: Path) -> None:
    result = run_cli(model_dir, "audit", "cli_models:Clean")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == "Nothing in Clean would be left behind by .to().\n"


def test_exit_status_1_and_a_table_when_something_would(model_dir: Path) -> None:
    result = run_cli(model_dir, "audit", "cli_models:Leaky")
    assert (result.returncode, result.stderr) == (1, "")
    assert result.stdout == LEAKY_TABLE


@pytest.mark.slow
def test_exit_status_2_and_one_message_without_a_traceback_for_a_usage_error(
    model_dir: Path,
) -> None:
    result = run_cli(model_dir, "audit", "cli_models:raises")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "python -m autoreg audit: error: cli_models:raises() raised RuntimeError: no GPU here "
        f"(at cli_models.py:{RAISES_LINE})\n"
    )


# --- every usage error, in process ------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("cli_models", r"'cli_models' is not a target: write package.module:factory, e\.g\. "),
        (":Clean", "is not a target"),
        ("cli_models:", "is not a target"),
        ("cli_models:Clean:x", "is not a target"),
        ("cli_models:Factories..clean", "is not a target"),
        (
            "no_such_module_xyz:build",
            r"^cannot import 'no_such_module_xyz': No module named 'no_such_module_xyz' "
            r"\(is it importable from .+\?\)$",
        ),
        ("cli_models.sub:build", r"^cannot import 'cli_models.sub': No module named"),
        (
            "cli_broken:build",
            r"^importing 'cli_broken' raised ImportError: optional dependency missing "
            r"\(at cli_broken.py:1\)$",
        ),
        (
            "cli_missing_dependency:build",
            r"^importing 'cli_missing_dependency' raised ModuleNotFoundError: "
            r"No module named 'not_installed_xyz' \(at cli_missing_dependency.py:1\)$",
        ),
        ("cli_models:nope", r"^module 'cli_models' has no attribute 'nope'$"),
        ("cli_models:Factories.nope", r"^'cli_models:Factories' has no attribute 'nope'$"),
        (
            "cli_models:NOT_CALLABLE",
            r"^cli_models:NOT_CALLABLE is 3: expected a module class or a function returning a "
            r"module$",
        ),
        (
            "cli_models:needs_arguments",
            r"^cli_models:needs_arguments\(\) raised TypeError: needs_arguments\(\) missing 1 "
            r"required positional argument: 'size'$",
        ),
        (
            "cli_models:raises",
            r"^cli_models:raises\(\) raised RuntimeError: no GPU here "
            rf"\(at cli_models.py:{RAISES_LINE}\)$",
        ),
        (
            "cli_models:returns_int",
            r"^cli_models:returns_int\(\) returned 3, not an nn.Module$",
        ),
        (
            "cli_models:scripted",
            r"^'cli_models:scripted' gives a TorchScript module \(TopLevelTracedModule, from "
            r"torch.jit.script or torch.jit.trace\), which autoreg cannot read: .* Audit the "
            r"module before scripting it \(a factory that returns it unscripted\).$",
        ),
    ],
    ids=[
        "no-colon",
        "no-module",
        "no-factory",
        "two-colons",
        "empty-attribute",
        "module-not-found",
        "not-a-package",
        "import-raises",
        "import-of-a-dependency-fails",
        "missing-name",
        "missing-nested-name",
        "not-callable",
        "factory-needs-arguments",
        "factory-raises",
        "returns-a-non-module",
        "returns-a-torchscript-module",
    ],
)
def test_usage_errors_exit_2_with_one_clear_line(
    importable: Path, capsys: pytest.CaptureFixture[str], target: str, message: str
) -> None:
    assert main(["audit", target]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    prefix = "python -m autoreg audit: error: "
    assert err.startswith(prefix)
    assert err.endswith("\n")
    assert err.count("\n") == 1
    assert "Traceback" not in err
    assert re.search(message, err[len(prefix) : -1])


@pytest.mark.parametrize(
    ("target", "status"),
    [
        ("cli_models:Clean", 0),
        ("cli_models:Factories.clean", 0),
        ("cli_models:instance", 1),
        ("cli_models:build_leaky", 1),
    ],
    ids=["class", "nested-function", "module-instance", "function"],
)
def test_a_target_is_a_class_a_function_or_a_module_instance(
    importable: Path, capsys: pytest.CaptureFixture[str], target: str, status: int
) -> None:
    assert main(["audit", target]) == status
    out, _ = capsys.readouterr()
    assert out.endswith("would be left behind by .to().\n")


def test_json_for_machines(importable: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--json", "cli_models:build_leaky"]) == 1
    out, err = capsys.readouterr()
    assert err == "building the model\n"  # the factory's prints keep stdout for the report
    report = json.loads(out)
    assert report["target"] == "cli_models:build_leaky"
    assert report["class"] == "Leaky"
    assert [finding["path"] for finding in report["findings"]] == [
        "mask",
        "anchors[0]",
        "temperature",
    ]
    assert report["findings"][0] == {
        "path": "mask",
        "kind": "tensor",
        "class": "Leaky",
        "attribute": "mask",
        "shape": [2, 2],
        "dtype": "bool",
        "device": "cpu",
        "requires_grad": False,
        "fix": "subclass autoreg.Module or register_buffer('mask', ..., persistent=False); "
        "third-party class: autoreg.register_tensors",
    }


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "the following arguments are required: COMMAND"),
        (["audit"], "the following arguments are required: TARGET"),
        (["inspect", "x:y"], "invalid choice: 'inspect'"),
    ],
    ids=["no-command", "no-target", "unknown-command"],
)
def test_exit_status_2_for_a_command_line_argparse_rejects(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as caught:
        main(argv)
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


def test_the_usage_message_documents_the_exit_statuses(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["audit", "--help"])
    assert caught.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert (
        "Exit status: 0 when everything was audited and nothing found, 1 when something was "
        "found or could not be audited, 2 for a usage error or a target that cannot be built."
    ) in out
    assert "package.module:factory" in out
