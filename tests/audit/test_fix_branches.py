"""``autoreg fix`` is a whole-source codemod: every store of a migrated name in the class (every
branch, every method that runs while the module is built) is rewritten, or listed for a hand edit
when it cannot be; the factory ran only one configuration."""

from __future__ import annotations

import subprocess
import sys
import warnings

import pytest
import torch
from torch import nn

from .fix_support import Project, project

__all__ = ["project"]

# A NeRF-style embedding: the factory takes one branch, the default configuration the other.
BANDS = """\
import torch
from torch import nn


class Embedding(nn.Module):
    def __init__(self, n, logscale=True):
        super().__init__()
        if logscale:
            self.freq_bands = 2 ** torch.linspace(0, n - 1, n)
        else:
            self.freq_bands = torch.linspace(1, 2 ** (n - 1), n)

    def forward(self, x):
        return torch.cat([torch.sin(f * x) for f in self.freq_bands], -1)


def build(logscale=False):
    return Embedding(4, logscale), (torch.ones(2, 3),)


def other():
    return build(logscale=True)
"""


def _added(out: str) -> list[str]:
    return [line[1:].strip() for line in out.splitlines() if line[:1] == "+" and line[:3] != "+++"]


def test_both_branches_are_rewritten(project: Project, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: only the branch the factory ran (the else branch) was rewritten."""
    project.write("m", BANDS)
    status, out, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer")
    assert status == 1
    assert _added(out) == [
        'self.register_buffer("freq_bands", 2 ** torch.linspace(0, n - 1, n), persistent=False)',
        'self.register_buffer("freq_bands", torch.linspace(1, 2 ** (n - 1), n), persistent=False)',
    ]
    assert "left for you to edit" not in err


CHECK = """\
import sys
import autoreg
from {package}.m import {factory}
model, _ = {factory}()
model.double()
print(sorted(f.path for f in autoreg.find_unregistered(model)))
"""


@pytest.mark.slow
@pytest.mark.parametrize("style", ["base", "buffer"])
def test_the_configuration_the_factory_did_not_build_leaves_nothing_behind(
    project: Project, capsys: pytest.CaptureFixture[str], style: str
) -> None:
    project.write("m", BANDS)
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--style", style, "--write")
    assert status == 0, err
    for factory in ("build", "other"):
        code = CHECK.format(package=project.name, factory=factory)
        result = subprocess.run(
            [sys.executable, "-c", code],
            cwd=project.root,
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        assert result.stdout == "[]\n", (factory, result.stderr)


# Soft actor-critic: the factory passes an action space; without one, the scale is a float.
POLICY = """\
import torch
from torch import nn


class Policy(nn.Module):
    def __init__(self, low=None, high=None):
        super().__init__()
        self.mean = nn.Linear(3, 2)
        if low is None:
            self.action_scale = 1.0
            self.action_bias = torch.tensor(0.0)
        else:
            self.action_scale = torch.FloatTensor((high - low) / 2.0)
            self.action_bias = torch.FloatTensor((high + low) / 2.0)

    def forward(self, x):
        return torch.tanh(self.mean(x)) * self.action_scale + self.action_bias


def build():
    import numpy as np

    return Policy(np.zeros(2), np.ones(2)), (torch.ones(1, 3),)
"""


@pytest.mark.slow
def test_a_branch_that_stores_no_tensor_is_listed_and_write_cannot_end_clean(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: the float branch was neither rewritten nor listed; --write exited 0. The tensor
    branch of the same name is held back with it (a name is rewritten whole or not at all)."""
    source = project.write("m", POLICY).read_text()
    target = f"{project.name}.m:build"
    status, out, err = project.fix(capsys, target, "--style", "buffer")
    assert status == 1
    assert _added(out) == [
        'self.register_buffer("action_bias", torch.tensor(0.0), persistent=False)',
        'self.register_buffer("action_bias", torch.FloatTensor((high + low) / 2.0), '
        "persistent=False)",
    ]
    lines = source.splitlines()
    line = lines.index("            self.action_scale = 1.0") + 1
    assert (
        f"  {project.name}/m.py:{line}: Policy.action_scale: stores a value that is not a tensor "
        "here, where register_buffer takes only a tensor or None\n"
    ) in err
    line = lines.index("            self.action_scale = torch.FloatTensor((high - low) / 2.0)") + 1
    assert f"  {project.name}/m.py:{line}: Policy.action_scale: not rewritten: another" in err
    status, _, err = project.fix(capsys, target, "--style", "buffer", "--write")
    assert "Policy.action_scale" in err  # left behind, for the re-audit too
    assert status == 1


STORES = """\
import torch
from torch import nn


def make(n):
    return torch.ones(n)


class Net(nn.Module):
    def __init__(self, kind="ones"):
        super().__init__()
        if kind == "ones":
            self._ones()
        elif kind == "helper":
            self.table = make(3)
        elif kind == "weight":
            self.table = nn.Parameter(torch.ones(3))
        else:
            self._arange()

    def _ones(self):
        self.table = torch.ones(3)

    def _arange(self):
        table = torch.arange(3.0)
        self.table = table

    def reset(self):
        self.table = [0.0, 0.0, 0.0]

    def forget(self):
        del self.table

    def refresh(self, x):
        self.table = x.mean(0)

    def forward(self, x):
        return x * self.table


def build():
    return Net(), (torch.ones(2, 3),)
"""


def test_every_store_in_the_class_is_rewritten_or_listed(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    source = project.write("m", STORES).read_text()
    status, out, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer")
    assert status == 1
    # The method __init__ ran and the one it did not call both build the module, and would be
    # rewritten, but reset() stores a list on the built module, which a buffer refuses: no
    # store of the name is rewritten (before: both were, and reset() raised TypeError).
    assert _added(out) == []

    def at(text: str) -> str:
        return f"{project.name}/m.py:{source.splitlines().index(text) + 1}: Net.table: "

    listed = [line.strip() for line in err.splitlines() if "Net.table" in line]
    ones, arange = (
        source.splitlines().index(text) + 1
        for text in ("        self.table = torch.ones(3)", "        self.table = table")
    )
    assert listed == [
        at("            self.table = make(3)")
        + "not run when the model was built, and the source does not say that it stores a "
        "tensor or None, all register_buffer takes",
        at("            self.table = nn.Parameter(torch.ones(3))")
        + "stores an nn.Parameter here, where register_buffer takes only a tensor or None",
        f"{project.name}/m.py:{ones}, {arange}: Net.table: not rewritten: another store of "
        "table in Net, listed, stores what a buffer refuses (made a buffer here, the name would "
        "raise there)",
        at("        self.table = [0.0, 0.0, 0.0]")
        + "stores a value that is not a tensor here, where register_buffer takes only a tensor "
        "or None",
        at("        del self.table")
        + "deleted here: once it is a buffer, a later self.table = ... outside construction "
        "stores a plain attribute again",
        at("        self.table = x.mean(0)")
        + "not run when the model was built and called once, and the source does not say that "
        "it stores a tensor or None, all a buffer takes",
    ]


# A temperature learned by default, fixed to a float in another configuration: the float is
# stored after the tensor, on the same path through __init__.
OVERRIDE = """\
import torch
from torch import nn


class Head(nn.Module):
    def __init__(self, n=4, fixed_temperature=None):
        super().__init__()
        self.lin = nn.Linear(n, n)
        self.temperature = torch.ones(())
        if fixed_temperature is not None:
            self.temperature = fixed_temperature

    def forward(self, x):
        return self.lin(x) / self.temperature


def build():
    return Head(), (torch.ones(2, 4),)
"""


def test_a_store_listed_for_its_value_holds_the_whole_name_back(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: the first store became register_buffer and the second was listed; with --write,
    Head(fixed_temperature=0.5) raised TypeError (a float stored over the buffer)."""
    source = project.write("m", OVERRIDE).read_text()
    status, out, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer")
    assert status == 1
    assert _added(out) == []
    lines = source.splitlines()
    first, second = (
        lines.index(text) + 1
        for text in (
            "        self.temperature = torch.ones(())",
            "            self.temperature = fixed_temperature",
        )
    )
    listed = [line.strip() for line in err.splitlines() if "Head.temperature" in line]
    assert listed == [
        f"{project.name}/m.py:{first}: Head.temperature: not rewritten: another store of "
        "temperature in Head, listed, stores what a buffer refuses (made a buffer here, the name "
        "would raise there)",
        f"{project.name}/m.py:{second}: Head.temperature: not run when the model was built, and "
        "the source does not say that it stores a tensor or None, all register_buffer takes",
    ]


# The same, with each branch on one line (a one-line suite: `if c: self.x = v`).
ONE_LINE = """\
import torch
from torch import nn


class Head(nn.Module):
    temperature: torch.Tensor  # for TorchScript

    def __init__(self, n=4, fixed_temperature=None):
        super().__init__()
        self.lin = nn.Linear(n, n)
        self.temperature = torch.ones(())
        if fixed_temperature is not None: self.temperature = fixed_temperature

    def forward(self, x):
        return self.lin(x) / self.temperature


def build():
    return Head(), (torch.ones(2, 4),)
"""


@pytest.mark.parametrize("style", ["base", "buffer"])
def test_a_store_in_a_one_line_suite_is_seen_by_the_whole_source_check(
    project: Project, capsys: pytest.CaptureFixture[str], style: str
) -> None:
    """Before: `if c: self.x = v` on one line was no statement to the whole-source check: the
    buffer style rewrote the first store, the base style declared the annotated name a buffer,
    and Head(fixed_temperature=0.5) raised TypeError."""
    source = project.write("m", ONE_LINE).read_text()
    status, out, err = project.fix(capsys, f"{project.name}.m:build", "--style", style)
    assert status == 1
    assert not [line for line in _added(out) if "temperature" in line]
    line = (
        source.splitlines().index(
            "        if fixed_temperature is not None: self.temperature = fixed_temperature"
        )
        + 1
    )
    if style == "buffer":
        assert (
            f"{project.name}/m.py:{line}: Head.temperature: not run when the model was built" in err
        )
    else:
        assert f"{project.name}/m.py:5: Head: its annotation temperature: ... would declare" in err


MASK = """\
import torch
from torch import nn


class Masked(nn.Module):
    def __init__(self, n=3, causal=True):
        super().__init__()
        if causal: self.mask = torch.ones(n, n).tril()
        else: self.mask = torch.ones(n, n)

    def forward(self, x):
        return x @ self.mask


def build():
    return Masked(), (torch.ones(2, 3),)
"""


def test_a_plain_store_in_a_one_line_suite_is_rewritten_in_place(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: listed as "not stored by a plain `self.mask = value` statement"."""
    project.write("m", MASK)
    status, out, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer")
    assert status == 1, err
    assert "left for you to edit" not in err
    assert _added(out) == [
        'if causal: self.register_buffer("mask", torch.ones(n, n).tril(), persistent=False)',
        'else: self.register_buffer("mask", torch.ones(n, n), persistent=False)',
    ]


# Config overrides stored under computed names: scale=0.5 stores a float over the tensor.
OVERRIDES = """\
import torch
from torch import nn


class Scaled(nn.Module):
    def __init__(self, n=3, **overrides):
        super().__init__()
        self.lin = nn.Linear(n, n)
        self.scale = torch.ones(n)
        for key, value in overrides.items():
            setattr(self, key, value)

    def forward(self, x):
        return self.lin(x) * self.scale


def build():
    return Scaled(), (torch.ones(2, 3),)
"""


def test_a_setattr_under_a_computed_name_in_the_class_holds_the_name_back(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: the first store became register_buffer, and Scaled(scale=0.5) raised TypeError
    (a float stored over the buffer by setattr(self, key, value))."""
    source = project.write("m", OVERRIDES).read_text()
    status, out, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer")
    assert status == 1
    assert _added(out) == []
    line = source.splitlines().index("            setattr(self, key, value)") + 1
    assert (
        f"{project.name}/m.py:{line}: Scaled.scale: setattr(self, name, value) under a name the "
        "source does not spell may store it, and what it stores there the source does not say "
        "(a buffer refuses anything but a tensor or None)"
    ) in err


# A float64 schedule in the configuration the factory did not build (precise=True).
PRECISE = """\
import torch
from torch import nn


class Noise(nn.Module):
    def __init__(self, n=10, precise=False):
        super().__init__()
        if precise:
            betas = torch.linspace(1e-4, 0.02, n, dtype=torch.float64)
        else:
            betas = torch.linspace(1e-4, 0.02, n)
        self.alphas = torch.cumprod(1 - betas, 0)

    def forward(self, x):
        return x * self.alphas[0]


def build():
    return Noise(), (torch.ones(2, 3),)
"""


def test_a_store_whose_source_spells_float64_in_another_configuration_is_listed(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: register_buffer("alphas", ...), and Noise(precise=True).half() converted the
    float64 schedule to float16."""
    source = project.write("m", PRECISE).read_text()
    status, out, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer")
    assert status == 1
    assert _added(out) == []
    line = source.splitlines().index("        self.alphas = torch.cumprod(1 - betas, 0)") + 1
    assert (
        f"{project.name}/m.py:{line}: Noise.alphas: its source spells torch.float64, so it may "
        "store a tensor of that dtype in a configuration the run did not build"
    ) in err


def test_base_style_keeps_a_store_whose_source_spells_float64_elsewhere_plain(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: Noise became autoreg.Module, autoreg registered alphas in every configuration,
    and Noise(precise=True).half() converted the float64 schedule to float16."""
    source = project.write("m", PRECISE).read_text()
    status, out, err = project.fix(capsys, f"{project.name}.m:build", "--style", "base")
    assert status == 1
    line = source.splitlines().index("        self.alphas = torch.cumprod(1 - betas, 0)") + 1
    assert (
        f"{project.name}/m.py:{line}: Noise.alphas: its source spells torch.float64, so it may "
        "store a tensor of that dtype in a configuration the run did not build"
    ) in err
    assert _added(out) == [
        "import autoreg",
        "class Noise(autoreg.Module):",
        "alphas: autoreg.Plain  # torch.float64 in its source: .to(a dtype) would convert it",
    ]
    project.fix(capsys, f"{project.name}.m:build", "--style", "base", "--write")
    model = project.load().Noise(precise=True).half()
    assert model.alphas.dtype == torch.float64


# A complex table in the configuration the factory did not build: autoreg carries it complex.
POLAR = """\
import torch
from torch import nn


class Rope(nn.Module):
    def __init__(self, n=4, use_complex=False):
        super().__init__()
        angles = torch.arange(n) * 0.5
        if use_complex:
            self.freqs = torch.polar(torch.ones(n), angles)
        else:
            self.freqs = torch.cat([angles.cos(), angles.sin()])

    def forward(self, x):
        return x * self.freqs.real.sum() if self.freqs.is_complex() else x * self.freqs.sum()


def build():
    return Rope(), (torch.ones(2, 3),)
"""


def test_base_style_makes_a_class_autoreg_whose_source_spells_a_complex_tensor_elsewhere(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """autoreg carries an undeclared complex tensor and never casts it to a real dtype: the
    class is made autoreg's, nothing listed, and Rope(use_complex=True) stays complex."""
    project.write("m", POLAR)
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--style", "base", "--write")
    assert status == 0, err
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nn.Module warns when it drops the imaginary part
        model = project.load().Rope(use_complex=True).to(torch.bfloat16)
    assert model.freqs.is_complex()


# An alias of another store, in the configuration the factory did not build (tied=True).
TIED = """\
import torch
from torch import nn


class Tracker(nn.Module):
    def __init__(self, n=3, tied=False):
        super().__init__()
        self.lin = nn.Linear(n, n)
        self.running = torch.zeros(n)
        if tied:
            self.shown = self.running
        else:
            self.shown = torch.zeros(n)

    def forward(self, x):
        y = self.lin(x)
        self.running.mul_(0.5).add_(y.detach().mean(0))
        return y + self.shown


def build():
    return Tracker(), (torch.ones(2, 3),)
"""


def test_a_tensor_another_store_aliases_in_another_configuration_is_listed(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: register_buffer("running", ...), and Tracker(tied=True).double() converted
    running and shown apart (shown no longer followed running)."""
    source = project.write("m", TIED).read_text()
    status, out, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer")
    assert status == 1
    assert _added(out) == []
    line = source.splitlines().index("        self.running = torch.zeros(n)") + 1
    assert (
        f"{project.name}/m.py:{line}: Tracker.running: the source makes shown the same tensor "
        "(self.shown = self.running), or a view of it: as buffers, .to() would convert the two "
        "apart"
    ) in err


def test_base_style_keeps_a_tensor_another_store_aliases_elsewhere_plain(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: Tracker became autoreg.Module, autoreg registered running and shown as two
    buffers in the tied configuration, and .double() converted them apart (shown no longer
    followed running, and forward gave another result)."""
    source = project.write("m", TIED).read_text()
    status, out, err = project.fix(capsys, f"{project.name}.m:build", "--style", "base")
    assert status == 1
    line = source.splitlines().index("        self.running = torch.zeros(n)") + 1
    assert (
        f"{project.name}/m.py:{line}: Tracker.running: the source makes shown the same tensor "
        "(self.shown = self.running), or a view of it: as buffers, .to() would convert the two "
        "apart"
    ) in err
    alias = "# an alias: .to() would convert a buffer of it apart from its tensor"
    assert _added(out) == [
        "import autoreg",
        "class Tracker(autoreg.Module):",
        f"running: autoreg.Plain  {alias}",
        f"shown: autoreg.Plain  {alias}",
    ]
    original = project.load().Tracker
    torch.manual_seed(0)
    expected = original(tied=True).double()(torch.ones(2, 3, dtype=torch.float64))
    project.fix(capsys, f"{project.name}.m:build", "--style", "base", "--write")
    torch.manual_seed(0)
    model = project.load().Tracker(tied=True).double()
    assert model.shown is model.running
    assert torch.equal(model(torch.ones(2, 3, dtype=torch.float64)), expected)


# A learnable/fixed toggle: a parameter in one branch, a tensor in the other.
TOGGLE = """\
import torch
from torch import nn


class Scaled(nn.Module):
    def __init__(self, n=3, learnable=False):
        super().__init__()
        self.lin = nn.Linear(n, n)
        if learnable:
            self.scale = nn.Parameter(torch.ones(n))
        else:
            self.scale = torch.ones(n)

    def forward(self, x):
        return self.lin(x) * self.scale


def build():
    return Scaled(), (torch.ones(2, 3),)
"""


def test_a_parameter_toggle_in_exclusive_branches_is_rewritten(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: listed ("stores an nn.Parameter here"), the name held back, though no buffer
    exists when the parameter is stored. The tensor branch alone is rewritten, and checkpoints
    of either configuration load as before (the same state_dict keys)."""
    project.write("m", TOGGLE)
    original = project.load().Scaled
    saved = {learn: original(learnable=learn).state_dict() for learn in (False, True)}
    status, out, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer")
    assert status == 1
    assert "left for you to edit" not in err
    assert _added(out) == ['self.register_buffer("scale", torch.ones(n), persistent=False)']
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer", "--write")
    assert status == 0, err
    rewritten = project.load().Scaled
    for learn in (False, True):
        model = rewritten(learnable=learn)
        assert sorted(model.state_dict()) == sorted(saved[learn])
        model.load_state_dict(saved[learn])  # strict
        assert isinstance(model.scale, nn.Parameter) is learn
    assert rewritten().double().scale.dtype == torch.float64


def test_a_parameter_store_not_exclusive_of_the_tensor_store_is_still_listed(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two ``if`` statements, not the branches of one: the source does not say that the
    parameter is never stored over the buffer."""
    source = TOGGLE.replace("        else:\n", "        if not learnable:\n")
    project.write("m", source)
    status, out, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer")
    assert status == 1
    assert _added(out) == []
    assert "Scaled.scale: stores an nn.Parameter here" in err


# Stores through another name than self: a classmethod's `head.temperature = ...`, and a parent's
# `self.head.temperature = fixed` that the factory's configuration never runs.
THROUGH = """\
import torch
from torch import nn


class Head(nn.Module):
    def __init__(self, n=3):
        super().__init__()
        self.lin = nn.Linear(n, n)

    @classmethod
    def from_config(cls, n=3, temperature=None):
        head = cls(n)
        head.temperature = torch.tensor(1.0) if temperature is None else temperature
        return head

    def forward(self, x):
        return self.lin(x) / self.temperature


class Classifier(nn.Module):
    def __init__(self, fixed_temperature=None):
        super().__init__()
        self.head = Head.from_config()
        if fixed_temperature is not None:
            self.head.temperature = fixed_temperature

    def forward(self, x):
        return self.head(x)


def build():
    return Head.from_config(), (torch.ones(2, 3),)
"""

THROUGH_BUILD = """\
def build():
    return Head.from_config(), (torch.ones(2, 3),)
"""

# What holds nothing back: a store through another name of what the source shows a tensor, a
# class's own store of its own attribute, and a store in a file that names no class of the run's.
THROUGH_SAFE = {
    "m": """\
import torch
from torch import nn


class Head(nn.Module):
    def __init__(self, n=3):
        super().__init__()
        self.lin = nn.Linear(n, n)

    @classmethod
    def from_config(cls, n=3):
        head = cls(n)
        head.temperature = torch.tensor(1.0)
        return head

    def forward(self, x):
        return self.lin(x) / self.temperature


class Sampler:
    def __init__(self):
        self.temperature = 0.7


def build():
    return Head.from_config(), (torch.ones(2, 3),)
""",
    "config": """\
class Options:
    pass


def defaults():
    options = Options()
    options.temperature = 0.7
    return options
""",
}


# The store the run made, read as any store that ran: float(temperature) in another configuration.
RAN = "torch.tensor(1.0) if temperature is None else "
THROUGH_RAN = THROUGH.replace(RAN + "temperature", RAN + "float(temperature)")


@pytest.mark.parametrize("ran", [False, True], ids=["not-run", "run"])
def test_a_store_through_another_name_that_may_store_no_tensor_holds_the_name_back(
    project: Project, capsys: pytest.CaptureFixture[str], ran: bool
) -> None:
    """Before: fix registered temperature as None in Head.__init__ (the run saw a tensor, stored
    by the classmethod), and Classifier(fixed_temperature=2.0), or Head.from_config(temperature=
    2.0), raised TypeError: neither store is through self."""
    source = project.write("m", THROUGH_RAN if ran else THROUGH).read_text()
    status, out, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer")
    assert status == 1
    assert _added(out) == []
    if ran:
        store = f"head.temperature = {RAN}float(temperature)"
        line = source.splitlines().index(f"        {store}") + 1
        code = store[:57] + "..."
        what = "may store float(temperature) there in another configuration"
    else:
        code = "self.head.temperature = fixed_temperature"
        line = source.splitlines().index(f"            {code}") + 1
        what = "does not say that it stores a tensor or None there"
    assert (
        f"Head.temperature: {project.name}/m.py:{line} stores it through another name ({code}), "
        f"and the source {what}"
    ) in err


def test_a_store_through_another_name_of_a_tensor_holds_nothing_back(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """Neither a tensor stored through another name, nor another class's own attribute of the
    name, nor a store in a file that never names the class, is a reason to list the name."""
    for module, source in THROUGH_SAFE.items():
        project.write(module, source)
    status, out, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer")
    assert status == 1  # it would change a file
    assert _added(out) == ['self.register_buffer("temperature", None, persistent=False)'], err
    assert "left for you to edit" not in err


# A parameter stored as it is passed: the factory passes a tensor, the rest of the project may not.
PASSED = """\
import torch
from torch import nn


class Scaled(nn.Module):
    def __init__(self, scale, n=3):
        super().__init__()
        self.lin = nn.Linear(n, n)
        self.scale = scale

    def forward(self, x):
        return self.lin(x) * self.scale


def build():
    return Scaled(torch.full((3,), 0.5)), (torch.ones(2, 3),)
"""

PASSED_ELSEWHERE = {
    "super": (
        "class Half(Scaled):\n    def __init__(self, n=3):\n        super().__init__(0.5, n)\n"
    ),
    "keyword": "def half():\n    return Scaled(scale=0.5)\n",
    "default": "def scaled(factor=0.5):\n    return Scaled(factor)\n",
    "none": "def unscaled():\n    return Scaled(None)\n",
    "tensor": "import torch\n\n\ndef half():\n    return Scaled(torch.tensor(0.5))\n",
    # a class of the same name of the file's own: its calls are not calls of m.Scaled
    "same-name": (
        "from torch import nn\n\n\nclass Scaled(nn.Module):\n    def __init__(self, scale):\n"
        "        super().__init__()\n\n\ndef half():\n    return Scaled(0.5)\n"
    ),
}


@pytest.mark.parametrize("variant", list(PASSED_ELSEWHERE))
def test_a_parameter_stored_as_passed_is_judged_by_what_the_project_passes(
    project: Project, capsys: pytest.CaptureFixture[str], variant: str
) -> None:
    """Before: ``self.scale = scale`` became register_buffer (the factory passed a tensor), and
    ``Half()``, whose ``super().__init__(0.5, n)`` is in another file, raised TypeError (and so
    did ``Scaled(scale=0.5)``, ``Scaled(factor)`` with ``factor=0.5``). None, which a buffer
    takes, a tensor, and a call of another file's own class of the same name hold nothing back
    (the last listed the name before this was mended: test_fix_real's two ``Attention``)."""
    project.write("m", PASSED)
    code = PASSED_ELSEWHERE[variant]
    project.write("variants", f"from .m import Scaled\n\n\n{code}")
    status, out, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer")
    assert status == 1
    if variant in ("none", "tensor", "same-name"):
        assert _added(out) == ['self.register_buffer("scale", scale, persistent=False)'], err
        return
    assert _added(out) == []
    call = next(
        i for i, line in enumerate(code.splitlines()) if "Scaled(" in line or "(0.5" in line
    )
    value = {"default": "0.5 (the default of factor)"}.get(variant, "0.5")
    assert (
        "Scaled.scale: it stores the parameter scale of __init__() as it is passed, and "
        f"{project.name}/variants.py:{call + 4} passes it {value}"
    ) in err


def test_a_parameter_a_classmethod_stores_through_another_name_is_judged_by_its_calls(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """``head.temperature = torch.tensor(1.0) if temperature is None else temperature`` in a
    classmethod stores its parameter as it is passed. Before: registered as None in
    ``Head.__init__``, and ``Head.from_config(temperature=2.0)`` raised TypeError."""
    project.write("m", THROUGH[: THROUGH.index("class Classifier")] + THROUGH_BUILD)
    project.write(
        "use",
        "from .m import Head\n\n\ndef warm():\n    return Head.from_config(temperature=2.0)\n",
    )
    status, out, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer")
    assert status == 1
    assert _added(out) == []
    assert (
        "Head.temperature: it stores the parameter temperature of from_config() as it is passed, "
        f"and {project.name}/use.py:5 passes it 2.0"
    ) in err
