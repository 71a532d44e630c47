"""The command line starts at once: --help, --version and the command lines argparse refuses never
import torch, and nothing torch prints on import reaches the user (issue 30, "A CLI that starts at
once"). Each case runs in a fresh interpreter, which reports whether torch was imported."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import autoreg

ROOT = Path(__file__).resolve().parents[2]

# Runs the command line in-process, then prints what it printed and whether torch got imported.
# ``numpy_missing`` makes `import numpy` fail, as on a machine without numpy.
RUN = textwrap.dedent(
    """
    import contextlib, io, json, sys
    if NUMPY_MISSING:
        sys.modules["numpy"] = None
    from autoreg._cli import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(ARGV)
        except SystemExit as exit:
            status = exit.code
    print(json.dumps({"status": status, "out": out.getvalue(), "err": err.getvalue(),
                      "torch": "torch" in sys.modules}))
    """
)


def run(argv: list[str], *, numpy_missing: bool = False) -> dict[str, object]:
    code = RUN.replace("ARGV", repr(argv)).replace("NUMPY_MISSING", str(numpy_missing))
    done = subprocess.run(
        [sys.executable, "-W", "default", "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        timeout=300,
    )
    result: dict[str, object] = json.loads(done.stdout)
    result["stderr"] = done.stderr  # what reached the terminal outside the redirection
    return result


@pytest.mark.parametrize(
    ("argv", "status", "shown"),
    [
        pytest.param(["--help"], 0, "list the tensors of a model", id="help"),
        pytest.param(["audit", "--help"], 0, "--forward", id="audit-help"),
        pytest.param(["fix", "--help"], 0, "--style", id="fix-help"),
        pytest.param(["--version"], 0, f"autoreg {autoreg.__version__}", id="version"),
        pytest.param([], 2, "the following arguments are required: COMMAND", id="no-command"),
        pytest.param(["audit"], 2, "the following arguments are required: TARGET", id="no-target"),
        pytest.param(["bogus"], 2, "invalid choice: 'bogus'", id="bad-command"),
        pytest.param(["fix", "--style", "x", "a:b"], 2, "invalid choice: 'x'", id="bad-style"),
    ],
)
def test_help_version_and_usage_errors_do_not_import_torch(
    argv: list[str], status: int, shown: str
) -> None:
    result = run(argv)
    assert result["status"] == status
    assert shown in f"{result['out']}{result['err']}"
    assert result["torch"] is False


@pytest.mark.slow
def test_the_check_can_fail_a_command_that_runs_imports_torch() -> None:
    """The companion of the test above: the same harness sees torch imported by a real command."""
    result = run(["audit", "examples.net:Net"])
    assert result["status"] == 1
    assert result["torch"] is True


@pytest.mark.slow
def test_importing_autoreg_imports_no_torch_until_a_name_is_used() -> None:
    code = (
        "import sys, autoreg; before = 'torch' in sys.modules; autoreg.Module; "
        "print(before, 'torch' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    assert done.stdout.split() == ["False", "True"]


@pytest.mark.slow
def test_torchs_numpy_warning_never_reaches_the_user_of_a_command() -> None:
    result = run(["audit", "examples.net:Net"], numpy_missing=True)
    assert result["status"] == 1
    assert "Net" in str(result["out"])
    assert "NumPy" not in f"{result['err']}{result['stderr']}"


@pytest.mark.slow
def test_the_numpy_check_can_fail_torch_warns_without_numpy() -> None:
    """The companion: without the command line, torch's warning is there to be silenced."""
    code = "import sys; sys.modules['numpy'] = None; import torch; torch.zeros(1)"
    done = subprocess.run(
        [sys.executable, "-W", "default", "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    assert "Failed to initialize NumPy" in done.stderr


# An eager session: a model built, run, moved, copied, pickled and saved, on autoreg (AUTOREG) or
# with its buffers registered by hand (the twin); it prints which of torch.compile's modules it
# imported.
EAGER_SESSION = textwrap.dedent(
    """
    import copy, io, json, pickle, sys, torch
    from torch import nn

    AUTOREG = {autoreg}
    if AUTOREG:
        import autoreg
        Base, Mixin = autoreg.Module, (autoreg.AutoRegisterMixin,)
    else:
        Base, Mixin = nn.Module, ()

    class Framework(nn.Module):
        def __init__(self):
            super().__init__()
            self.state = torch.zeros(1)

    class Net(Base):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(4, 4)
            if AUTOREG:
                self.mask = torch.ones(4)
            else:
                self.register_buffer("mask", torch.ones(4), persistent=False)

        def forward(self, x):
            self.last = x
            return self.linear(x) * self.mask

    class Mixed(*Mixin, Framework):
        def __init__(self):
            super().__init__()
            self.table = torch.ones(2)

    net, mixed = Net(), Mixed()
    net(torch.ones(4))
    net.double(), mixed.double()
    copy.deepcopy(net), pickle.loads(pickle.dumps(net))
    torch.save(net.state_dict(), io.BytesIO())
    compiler = ("torch._dynamo", "torch._inductor", "sympy")
    print(json.dumps([m for m in compiler if m in sys.modules]))
    """
)


@pytest.mark.slow
def test_a_model_on_autoreg_imports_no_more_of_torch_compile_than_its_twin() -> None:
    """torch.compile's front end (torch._dynamo, with sympy) takes 1.7 s to import on a 2-core
    machine with torch 2.13, about as long as torch itself: eager code on autoreg must not pay for
    it where the hand-written model does not (a torch that imports it on its own is no failure)."""
    imported = {}
    for on_autoreg in (False, True):
        done = subprocess.run(
            [sys.executable, "-c", EAGER_SESSION.format(autoreg=on_autoreg)],
            capture_output=True,
            text=True,
            check=True,
            timeout=300,
        )
        imported[on_autoreg] = json.loads(done.stdout.splitlines()[-1])
    assert imported[True] == imported[False]
