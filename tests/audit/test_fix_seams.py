"""Where the audits and ``autoreg fix`` meet: what fix does with every kind of finding the audits
make (tensors inside plain objects, numpy arrays), how it words a forward it could not audit (the
audits' own line), and one exit status for ``audit``, ``fix`` and ``fix --write`` on the same
code."""

from __future__ import annotations

import pytest
import torch

from autoreg._fix.analyse import analyse

from .fix_support import Project, project

__all__ = ["project"]


def audit(project: Project, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """``autoreg audit *args`` in this process, on freshly imported code: status, out."""
    status, out, _ = project.run(capsys, "audit", *args)
    return status, out


def hand_lines(err: str) -> list[str]:
    """The hand edits fix lists: each entry's first line, without its file and line."""
    return [
        line.split(": ", 1)[1]
        for line in err.splitlines()
        if line.startswith("  ") and not line.startswith("      ")
    ]


# --- tensors inside plain objects, numpy arrays: what is true, and the audit's fix ---------------

HELD = """\
import dataclasses

import numpy as np
import torch
from torch import nn


@dataclasses.dataclass
class Config:
    weights: torch.Tensor


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(3, 3)
        self.cfg = Config(torch.ones(3))
        self.table = np.ones(3, dtype=np.float32)

    def forward(self, x):
        return self.proj(x)


def build():
    return Net(), (torch.ones(2, 3),)
"""

OBJECT_REASON = (
    "Net.cfg: a tensor inside a Config object (cfg.weights): neither .to() nor autoreg moves "
    "tensors inside other objects"
)
NUMPY_REASON = "Net.table: a numpy array (table): neither .to() nor autoreg moves numpy arrays"


@pytest.mark.parametrize("style", ["base", "buffer"])
def test_a_held_object_and_a_numpy_array_are_listed_with_what_is_true_and_the_audits_fix(
    project: Project, capsys: pytest.CaptureFixture[str], style: str
) -> None:
    """Before: both were listed as 'stored by forward, where .to() leaves it' (they are stored
    in __init__), and the base style made Net autoreg's, which moves neither."""
    project.write("m", HELD)
    target = f"{project.name}.m:build"
    status, out, err = project.fix(capsys, target, "--style", style)
    assert (status, out) == (1, "")
    assert hand_lines(err) == [OBJECT_REASON, NUMPY_REASON]
    edits = [line.strip() for line in err.splitlines() if line.startswith("      ")]
    assert edits == [
        "a tensor inside a Config object, which .to() never reaches: keep it on the module "
        "instead (a buffer, or an attribute of an autoreg.Module), and read it from there",
        "a numpy array, which .to() never moves: if forward computes with the array, make it a "
        "tensor (torch.as_tensor) kept as a buffer, and use that; if forward only takes numbers "
        "out of it (a schedule read per step, which a buffer's .half() would round) or never "
        "reads it (statistics kept for reference), leave it",
    ]
    assert "stored by forward" not in err
    assert f"{project.name}/m.py:17: Net.cfg" in err  # at the line that stored it
    assert f"{project.name}/m.py:18: Net.table" in err


CLASS_TENSOR = """\
import torch
from torch import nn


class Net(nn.Module):
    table = torch.linspace(0, 1, 3)

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(3, 3)

    def forward(self, x):
        return self.proj(x) * self.table


def build():
    return Net(), (torch.ones(2, 3),)
"""


@pytest.mark.parametrize("style", ["base", "buffer"])
def test_a_tensor_defined_on_the_class_is_found_and_listed_with_what_is_true(
    project: Project, capsys: pytest.CaptureFixture[str], style: str
) -> None:
    """Before: the attribute audit never reported it, though .double() leaves it float32 (the
    forward audit named only its line, as made before forward); autoreg moves it in no style."""
    project.write("m", CLASS_TENSOR)
    target = f"{project.name}.m:build"
    status, out = audit(project, capsys, target)
    assert status == 1
    assert "table  Net" in out
    status, out, err = project.fix(capsys, target, "--style", style)
    assert (status, out) == (1, "")
    assert hand_lines(err) == [
        "Net.table: defined on the class Net: neither .to() nor autoreg moves what a class holds"
    ]


MIXED = """\
import numpy as np
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(3, 3)
        self.pair = [torch.zeros(3), np.zeros(3)]

    def forward(self, x):
        return self.proj(x)


def build():
    return Net(), (torch.ones(2, 3),)
"""


def test_a_list_of_a_tensor_and_an_array_is_carried_and_the_array_is_still_listed(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: Net became autoreg's (it carries the list, and moves its tensor), and the numpy
    array in it, which nothing moves, was not listed: a --write ended with a re-audit that
    found it, with no edit said."""
    project.write("m", MIXED)
    status, out, err = project.fix(capsys, f"{project.name}.m:build")
    assert status == 1
    assert "+class Net(autoreg.Module):" in out
    assert hand_lines(err) == [
        "Net.pair: a numpy array (pair[1]): neither .to() nor autoreg moves numpy arrays"
    ]


# --- a forward fix could not audit: the audits' own line ------------------------------------------

RAISES = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.mask = torch.ones(3)

    def forward(self, x):
        return x.reshpe(3)


def build():
    return Net(), (torch.ones(2, 3),)
"""


def test_a_forward_that_raises_is_one_line_worded_as_the_audit_words_it(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """The model's own error told apart from the audit's limit, as autoreg audit says it; one
    line for the forward, not one per thing that was not audited. Before: two lines, the first
    with the error's first line only (no 'it raises on the CPU without the audit too')."""
    project.write("m", RAISES)
    target = f"{project.name}.m:build"
    audited, report = audit(project, capsys, target, "--forward")
    paragraph = report.partition("Not audited: ")[2]
    reason = " ".join(paragraph.split())  # the report wraps it to the terminal's width
    status, _, err = project.fix(capsys, target, "--style", "buffer")
    assert (audited, status) == (1, 1)
    not_audited = [line for line in err.splitlines() if "not audited" in line]
    assert not_audited == [
        f"autoreg fix: not audited: the forward of {target}, what it makes and what it stores "
        f"({reason})"
    ]
    assert "it raises on the CPU without the audit too (checked)" in not_audited[0]


# --- the forward-audit problems the corpus found, gone: fix audits each forward ------------------

OWN_TO = """\
import torch
from torch import nn


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(3, 2)
        self.action_scale = torch.full((2,), 2.0)

    def forward(self, state):
        return torch.tanh(self.body(state)) * self.action_scale

    def to(self, device):
        self.action_scale = self.action_scale.to(device)
        return super().to(device)


def build():
    return Policy(), (torch.ones(4, 3),)
"""

FIELD = """\
import torch
from torch import nn


class Field(nn.Module):
    def __init__(self):
        super().__init__()
        self.energy = nn.Linear(2, 1)
        self.M = torch.tensor([[0.0, 1.0], [-1.0, 0.0]])

    def forward(self, x):
        (grad,) = torch.autograd.grad(self.energy(x).sum(), x, create_graph=True)
        return grad @ self.M.t()


def build():
    return Field(), (torch.ones(4, 2, requires_grad=True),)
"""

STATES = """\
import torch
from torch import nn


class Sequence(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.LSTMCell(1, 4)

    def forward(self, x):
        h = torch.zeros(x.size(0), 4, dtype=torch.double)
        c = torch.zeros(x.size(0), 4, dtype=torch.double)
        for x_t in x.split(1, dim=1):
            h, c = self.cell(x_t, (h, c))
        return h


def build():
    return Sequence().double(), (torch.ones(2, 3, dtype=torch.double),)
"""

CORPUS = {
    # soft actor-critic: its own to(self, device) crashed the audit's copy (two arguments)
    "own-to": (OWN_TO, {("device", "action_scale")}),
    # a Hamiltonian field: autograd.grad in forward was 'an error of the model' under no_grad
    "autograd-grad": (FIELD, {("device", "M"), ("dtype", "M")}),
    # time_sequence_prediction: float64 states made in forward, their dtype missed
    "float64-states": (STATES, {("device", ""), ("dtype", "")}),
}


@pytest.mark.parametrize("case", list(CORPUS), ids=list(CORPUS))
def test_fix_audits_the_forwards_the_corpus_could_not(project: Project, case: str) -> None:
    source, expected = CORPUS[case]
    project.write("m", source)
    project.forget()
    analysis = analyse(f"{project.name}.m:build", torch.bfloat16)
    assert analysis.not_audited == []
    assert analysis.forward_audited
    assert {(f.kind, f.attribute) for f in analysis.forward} == expected


# --- one exit status for audit, fix and fix --write -----------------------------------------------

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

GLOBAL = """\
import torch
from torch import nn

OFFSET = torch.ones(3)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(3, 3)

    def forward(self, x):
        return self.proj(x) + OFFSET


def build():
    return Net(), (torch.ones(2, 3),)
"""

MADE = CLEAN.replace("return self.proj(x)", "return self.proj(x) + torch.ones(3)")

FACTORY_RAISES = CLEAN.replace("return Net(), ", "raise RuntimeError('no data'); return Net(), ")

STATUSES = {
    "clean": (CLEAN, 0),
    "made-by-forward": (MADE, 1),
    "a-global-in-forward": (GLOBAL, 1),
    "held-object": (HELD, 1),
    "forward-raises": (RAISES.replace("self.mask = torch.ones(3)", "pass"), 1),
    "factory-raises": (FACTORY_RAISES, 2),
}


@pytest.mark.parametrize("case", list(STATUSES), ids=list(STATUSES))
def test_audit_fix_and_fix_write_exit_alike_on_code_fix_does_not_change(
    project: Project, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    """Before: a global tensor that forward adds (a device and dtype stray, audit: 1) was
    'nothing to rewrite' and exit 0 for fix and fix --write."""
    source, expected = STATUSES[case]
    project.write("m", source)
    target = f"{project.name}.m:build"
    audited, _ = audit(project, capsys, target, "--forward")
    dry, out, _ = project.fix(capsys, target)
    written, _, _ = project.fix(capsys, target, "--write")
    assert (audited, dry, written) == (expected, expected, expected)
    assert out == ""
    assert project.read("m") == source


STATE = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(3, 3)
        self.mask = torch.ones(3)

    def forward(self, x):
        return self.proj(x) * self.mask


def build():
    return Net(), (torch.ones(2, 3),)
"""

REWRITTEN = {
    "fixed": (STATE, 0),
    "fixed-but-forward-makes": (STATE.replace("* self.mask", "* self.mask + torch.ones(3)"), 1),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(REWRITTEN), ids=list(REWRITTEN))
def test_fix_write_exits_as_audit_does_on_the_code_it_wrote(
    project: Project, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    """The dry run says 1 (a diff); --write rewrites, and exits as autoreg audit then does."""
    source, expected = REWRITTEN[case]
    project.write("m", source)
    target = f"{project.name}.m:build"
    dry, out, _ = project.fix(capsys, target)
    written, _, _ = project.fix(capsys, target, "--write")
    audited, _ = audit(project, capsys, target, "--forward")
    again, _, _ = project.fix(capsys, target)
    assert out.startswith("---")
    assert (dry, written, audited, again) == (1, expected, expected, expected)


# --- the hand edits a person reads: one entry for what shares its reason and its edit -----------

MOVES_ITSELF = """\
import torch
from torch import nn


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(3, 2)
        self.scale = torch.ones(2)
        self.bias = torch.zeros(2)

    def forward(self, x):
        return self.linear(x) * self.scale + self.bias

    def to(self, device):
        self.scale = self.scale.to(device)
        self.bias = self.bias.to(device)
        return super().to(device)


def build():
    return Policy(), (torch.ones(4, 3),)
"""


@pytest.mark.parametrize("style", ["base", "buffer"])
def test_stores_with_the_same_reason_and_edit_are_one_entry_with_their_lines(
    project: Project, capsys: pytest.CaptureFixture[str], style: str
) -> None:
    """soft actor-critic's policies: five tensors, one reason (the class's own to()) and one
    edit, were five entries of two long lines each, the same text repeated."""
    project.write("m", MOVES_ITSELF)
    status, out, err = project.fix(capsys, f"{project.name}.m:build", "--style", style)
    assert (status, out) == (1, "")
    where = f"{project.name}/m.py"
    assert err.splitlines()[:3] == [
        "1 left for you to edit (autoreg fix does not guess these):",
        f"  {where}:9, 10: Policy.scale, Policy.bias: Policy overrides to() ({where}:15), which "
        "may move it already: autoreg fix cannot tell what that code does, and registered, it "
        "would be moved twice",
        "      register it yourself (register_buffer, or autoreg.Module) and take it out of to(), "
        "or leave it to to()",
    ]
