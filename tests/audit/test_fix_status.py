"""``autoreg fix``'s exit status, one rule with ``autoreg audit``: 0 when everything was audited
and nothing is left, 1 when something is found, changed, left to edit or not audited, 2 for a
usage error. The dry run exits as ``--write`` would on the same unchanged code, and what the
forward audit cannot run does not stop the attribute fixes."""

from __future__ import annotations

import pytest

from autoreg import _audit_cli
from autoreg._errors import ForwardAuditError

from .fix_support import Project, project

__all__ = ["project"]

# A weight that requires grad: listed for a hand edit, nothing to rewrite.
WEIGHT = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.ones(3, requires_grad=True)

    def forward(self, x):
        return x * self.scale


def build():
    return Net(), (torch.ones(2, 3),)
"""

# Forward makes a tensor on the default device: found by the forward audit, never rewritten.
MADE = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(3, 3)

    def forward(self, x):
        return self.proj(x) + torch.ones(3)


def build():
    return Net(), (torch.ones(2, 3),)
"""

CLEAN = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(3, 3)

    def forward(self, x):
        return self.proj(x)


def build():
    return Net(), (torch.ones(2, 3),)
"""

UNCHANGED = {"clean": (CLEAN, 0), "hand-edit": (WEIGHT, 1), "made-by-forward": (MADE, 1)}


@pytest.mark.parametrize("case", list(UNCHANGED), ids=list(UNCHANGED))
def test_the_dry_run_exits_as_write_does_on_code_it_does_not_change(
    project: Project, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    """Before: the dry run exited 0 where --write exited 1 after a re-audit (hand-edit)."""
    source, expected = UNCHANGED[case]
    project.write("m", source)
    target = f"{project.name}.m:build"
    dry = project.fix(capsys, target)
    written = project.fix(capsys, target, "--write")
    assert (dry[0], dry[1], written[0], written[1]) == (expected, "", expected, "")
    assert project.read("m") == source
    assert "autoreg fix: nothing to rewrite.\n" in dry[2]
    # Nothing was rewritten: the audit of this run is the answer, no second one.
    assert "re-auditing" not in written[2]


def test_a_hand_edit_is_listed_and_the_status_is_1(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    project.write("m", WEIGHT)
    status, _, err = project.fix(capsys, f"{project.name}.m:build")
    assert status == 1
    assert "1 left for you to edit" in err
    assert "Net.scale: requires grad" in err


# A mask built in __init__, a state forward stores: both fixed without the forward audit.
STATEFUL = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(3, 3)
        self.mask = torch.ones(3)

    def forward(self, x):
        self.last = x.detach()
        return self.proj(x) * self.mask


def build():
    return Net(), (torch.ones(2, 3),)
"""


def _audit_cannot_run(*args: object, **kwargs: object) -> None:
    raise ForwardAuditError(
        "the audit cannot follow the forward of Net at m.py:12: NotImplementedError: no kernel\n"
        "Without the audit, it runs on the CPU (checked): a limit of the audit, not an error of "
        "the model; please report it.",
        [],
    )


@pytest.mark.parametrize("style", ["base", "buffer"])
def test_the_attribute_fixes_are_written_when_the_forward_audit_cannot_run(
    project: Project,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    style: str,
) -> None:
    """Before: exit 2 and nothing written."""
    monkeypatch.setattr(_audit_cli, "audit_forward", _audit_cannot_run)
    project.write("m", STATEFUL)
    target = f"{project.name}.m:build"
    status, out, err = project.fix(capsys, target, "--style", style)
    assert status == 1
    expected = {
        "base": ["+import autoreg", "+class Net(autoreg.Module):"],
        "buffer": [
            '+        self.register_buffer("last", None, persistent=False)',
            '+        self.register_buffer("mask", torch.ones(3), persistent=False)',
        ],
    }[style]
    added = [line for line in out.splitlines() if line[:1] == "+" and line[:3] != "+++"]
    assert added == expected
    not_audited = [line for line in err.splitlines() if "not audited" in line]
    assert not_audited == [
        f"autoreg fix: not audited: what the forward of {target} makes (the audit cannot follow "
        "the forward of Net at m.py:12: NotImplementedError: no kernel; without the audit, it "
        "runs on the CPU (checked))"
    ]


RAISES = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.mask = torch.ones(3)

    def forward(self, x):
        raise RuntimeError("needs a GPU")


def build():
    return Net(), (torch.ones(2, 3),)
"""


def test_a_forward_that_raises_leaves_the_attribute_fixes_and_says_so(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    project.write("m", RAISES)
    target = f"{project.name}.m:build"
    status, out, err = project.fix(capsys, target, "--style", "buffer")
    assert status == 1
    assert '+        self.register_buffer("mask", torch.ones(3), persistent=False)' in out
    assert [line for line in err.splitlines() if "not audited" in line] == [
        f"autoreg fix: not audited: the forward of {target}, what it makes and what it stores "
        f"(the forward of Net raises at {project.name}/m.py:11: RuntimeError: needs a GPU; it "
        "raises on the CPU without the audit too (checked))"
    ]


# A complex kernel: the model never runs in bfloat16. Its mask is rewritten either way; its
# forward is audited only without the bfloat16 pass.
COMPLEX = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(3, 2))
        self.mask = torch.ones(3)

    def forward(self, x):
        kernel = torch.view_as_complex(self.weight)
        return (kernel * x).real * self.mask


def build():
    return Net(), (torch.ones(2, 3),)
"""


def test_low_precision_none_audits_a_model_that_never_runs_in_bfloat16(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: no way to skip the bfloat16 pass from the command line; ``fix`` said "not
    audited" and exited 1 after any rewrite, and its re-audit stopped there again."""
    project.write("m", COMPLEX)
    target = f"{project.name}.m:build"
    status, _, err = project.fix(capsys, target)
    assert status == 1
    [line] = [line for line in err.splitlines() if "not audited" in line]
    assert "raises once converted to bfloat16" in line
    assert line.endswith("--low-precision none skips the bfloat16 pass)")
    status, _, err = project.fix(capsys, target, "--write", "--low-precision", "none")
    assert (status, "not audited" in err) == (0, False)
    assert f"python -m autoreg audit {target} --forward --low-precision none" in err
    assert "class Net(autoreg.Module):" in project.read("m")


def test_the_reaudit_runs_the_forward_pass_that_completed_when_the_bfloat16_one_stopped(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: the re-audit ran no forward audit at all (``autoreg audit TARGET``) and said
    "now clean" of the attributes only, though the default-precision pass had run."""
    project.write("m", COMPLEX)
    target = f"{project.name}.m:build"
    status, _, err = project.fix(capsys, target, "--write")
    assert status == 1  # the bfloat16 pass is not audited
    assert f"python -m autoreg audit {target} --forward --low-precision none" in err
    assert "class Net(autoreg.Module):" in project.read("m")


def test_a_rewrite_the_model_cannot_be_built_from_is_put_back(
    project: Project, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The re-audit builds the model from the written files in a fresh process; when it cannot
    (a rewrite Python refuses to import, as the class order 6333e4d mended), the files are put
    back as they were. Before: the broken file stayed written."""
    from autoreg._fix import codemod

    real = codemod.rewrite

    def breaking(source: bytes, filename: str, edits: object) -> codemod.Rewrite:
        result = real(source, filename, edits)  # type: ignore[arg-type]
        broken = result.code + b"\nraise TypeError('a class order Python refuses')\n"
        return codemod.Rewrite(broken, result.encoding, result.made, result.hand)

    monkeypatch.setattr(codemod, "rewrite", breaking)
    path = project.write(
        "m",
        CLEAN.replace("self.proj = nn.Linear(3, 3)", "self.scale = torch.ones(3)").replace(
            "self.proj(x)", "x * self.scale"
        ),
    )
    before = path.read_bytes()
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--write")
    assert status == 1
    assert "a class order Python refuses" in err
    assert f"autoreg fix: put back as it was: {project.name}/m.py." in err
    assert path.read_bytes() == before


def test_a_file_changed_since_it_was_written_is_not_put_back(
    project: Project, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """As above, when the file no longer holds what fix wrote (an editor saved it meanwhile):
    it is someone's edit, and stays."""
    from autoreg._fix import cli, codemod

    real_rewrite = codemod.rewrite
    path = project.write(
        "m",
        CLEAN.replace("self.proj = nn.Linear(3, 3)", "self.scale = torch.ones(3)").replace(
            "self.proj(x)", "x * self.scale"
        ),
    )

    def rewrite(source: bytes, filename: str, edits: object) -> codemod.Rewrite:
        result = real_rewrite(source, filename, edits)  # type: ignore[arg-type]
        return codemod.Rewrite(result.code + b"# written\n", result.encoding, result.made, [])

    def reaudit(analyses: object, low: str) -> tuple[int, bool]:
        path.write_text(path.read_text() + "# saved by an editor\n")
        return 1, False

    monkeypatch.setattr(codemod, "rewrite", rewrite)
    monkeypatch.setattr(cli, "_reaudit", reaudit)
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--write")
    assert status == 1
    assert "put back" not in err
    assert path.read_text().endswith("# written\n# saved by an editor\n")


# torch's own code stores the weight (nn.RNNBase.__setattr__), called from the user's line.
TORCH_STORES = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(4, 4)
        del self.rnn._parameters["weight_hh_l0"]
        self.rnn.weight_hh_l0 = torch.zeros(16, 4, requires_grad=True)

    def forward(self, x):
        return self.rnn(x)[0]


def build():
    return Net(), (torch.ones(5, 2, 4),)
"""


def test_a_hand_edit_of_a_store_torch_made_is_listed_at_the_users_line(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: listed at torch/nn/modules/rnn.py, a file the user does not own."""
    project.write("m", TORCH_STORES)
    status, _, err = project.fix(capsys, f"{project.name}.m:build")
    assert status == 1
    listed = [line for line in err.splitlines() if ": LSTM." in line]
    assert listed
    assert all(line.strip().startswith(f"{project.name}/m.py:") for line in listed), listed
    assert "site-packages" not in err
    assert "torch/nn" not in err
