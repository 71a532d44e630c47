"""``autoreg fix`` never introduces a wrong result: a complex tensor is never registered where
``.to(a real dtype)`` would cast it, and a class that moves its tensors itself (its own ``to()``
or ``_apply``) is listed, not rewritten."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

import autoreg
from autoreg._fix import cli
from autoreg._fix.collect import autoreg_keeps_complex

from .fix_support import Project, project

__all__ = ["project"]

ROTARY = '''\
import torch
from torch import nn


class Rotary(nn.Module):
    """Rotates pairs of features."""

    def __init__(self, dim, length):
        super().__init__()
        angles = torch.outer(torch.arange(length).float(), torch.rand(dim // 2))
        self.freqs = torch.polar(torch.ones_like(angles), angles)
        self.scale = torch.ones(dim)

    def forward(self, x):
        pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        out = torch.view_as_real(pairs * self.freqs[: x.shape[-2]]).flatten(-2)
        return out.type_as(x) * self.scale


def build():
    return Rotary(4, 8), (torch.rand(3, 4),)
'''

LISTED = (
    "Rotary.freqs: a complex tensor: as a buffer, .to(a real dtype) would cast it to that dtype "
    "and drop its imaginary part (a wrong result, with no error), so it stays a plain attribute, "
    "as before"
)


def _added(out: str) -> list[str]:
    return [line[1:].strip() for line in out.splitlines() if line[:1] == "+" and line[:3] != "+++"]


def test_the_buffer_style_never_registers_a_complex_tensor(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: register_buffer("freqs", ...), which .to(torch.bfloat16) casts to bfloat16."""
    project.write("m", ROTARY)
    status, out, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer")
    assert status == 1
    assert _added(out) == ['self.register_buffer("scale", torch.ones(dim), persistent=False)']
    assert f"{project.name}/m.py:11: {LISTED}" in err


@pytest.mark.parametrize("keeps", [False, True], ids=["autoreg-casts", "autoreg-keeps"])
def test_the_base_style_keeps_a_complex_tensor_plain_where_autoreg_would_cast_it(
    project: Project,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    keeps: bool,
) -> None:
    monkeypatch.setattr(cli, "autoreg_keeps_complex", lambda: keeps)
    project.write("m", ROTARY)
    status, out, err = project.fix(capsys, f"{project.name}.m:build")
    assert status == 1
    plain = "freqs: autoreg.Plain  # complex: .to(a real dtype) would drop its imaginary part"
    assert _added(out) == [
        "import autoreg",
        "class Rotary(autoreg.Module):",
        *([] if keeps else [plain]),
    ]
    assert (LISTED in err) is not keeps


def _removed(out: str) -> list[str]:
    return [line[1:].strip() for line in out.splitlines() if line[:1] == "-" and line[:3] != "---"]


@pytest.mark.parametrize("keeps", [False, True], ids=["autoreg-casts", "autoreg-keeps"])
def test_the_base_style_keeps_a_complex_tensor_plain_under_a_name_the_class_declares(
    project: Project,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    keeps: bool,
) -> None:
    """Rows 9 and 10: ``freqs: torch.Tensor`` (a TorchScript attribute annotation) declares a
    buffer once the class is autoreg's, and a declared buffer is cast to a real dtype as
    nn.Module casts one. Before: where autoreg keeps an undeclared complex tensor complex, the
    class was made autoreg's with the annotation as it was, and .to(torch.bfloat16) dropped the
    imaginary part of the table (exit status 0 for the rotary table alone)."""
    monkeypatch.setattr(cli, "autoreg_keeps_complex", lambda: keeps)
    declared = ROTARY.replace('features."""\n', 'features."""\n\n    freqs: torch.Tensor\n')
    project.write("m", declared)
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--write")
    assert status == 1
    assert LISTED in err
    rotary = project.load().Rotary(4, 8)
    assert isinstance(rotary, autoreg.AutoRegisterMixin)  # made autoreg's for scale
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nn.Module warns when it drops the imaginary part
        moved = rotary.to(torch.bfloat16)
    assert moved.freqs.is_complex()
    assert moved.scale.dtype == torch.bfloat16
    assert "freqs: torch.Tensor" not in project.read("m")


SCHEDULE = """\
import torch
from torch import nn


class Diffusion(nn.Module):
    def __init__(self, steps=50):
        super().__init__()
        betas = torch.linspace(1e-4, 0.02, steps, dtype=torch.float64)
        self.alphas = torch.cumprod(1.0 - betas, dim=0)  # float64 on purpose
        self.scale = torch.ones(4)

    def forward(self, x, t):
        a = self.alphas[t]
        return (a.sqrt() * x.double() + (1 - a).sqrt()).to(x.dtype) * self.scale


def build():
    return Diffusion(), (torch.rand(2, 4), torch.tensor(0))
"""

FLOAT64 = (
    "Diffusion.alphas: a float64 tensor, not of the default dtype (float32): as a buffer, .half() "
    "and .to(torch.bfloat16) would convert it, where the plain attribute never was, so it stays "
    "a plain attribute, as before"
)


@pytest.mark.parametrize("style", ["base", "buffer"])
def test_a_float_tensor_not_of_the_default_dtype_stays_plain(
    project: Project, capsys: pytest.CaptureFixture[str], style: str
) -> None:
    """A float64 schedule computed in float64 on purpose. Before: made a buffer in either
    style, and .half() then rounded 1 - alphas[0] (0.0001) to 0, where the original kept its
    float64 table under any .to(dtype)."""
    project.write("m", SCHEDULE)
    status, out, err = project.fix(capsys, f"{project.name}.m:build", "--style", style)
    assert status == 1
    assert f"{project.name}/m.py:9: {FLOAT64}" in err
    assert "alphas.to(x.device)" in err
    plain = "alphas: autoreg.Plain  # float64: .to(a dtype) would convert a buffer of it"
    assert _added(out) == (
        ["import autoreg", "class Diffusion(autoreg.Module):", plain]
        if style == "base"
        else ['self.register_buffer("scale", torch.ones(4), persistent=False)']
    )
    project.fix(capsys, f"{project.name}.m:build", "--style", style, "--write")
    model = project.load().Diffusion().half()
    assert model.alphas.dtype == torch.float64
    assert model.scale.dtype == torch.float16


ALIASES = """\
import torch
from torch import nn


class Base(nn.Module):
    running: torch.Tensor


class Stats(Base):
    \"\"\"Keeps a running mean, and a second name for it.\"\"\"

    running: torch.Tensor
    recent: torch.Tensor = None  # a TorchScript attribute

    def __init__(self, n=4):
        super().__init__()
        self.proj = nn.Linear(n, n)
        self.mask = torch.ones(n)
        self.running = torch.zeros(n)
        self.recent = self.running

    def forward(self, x):
        y = self.proj(x) * self.mask
        if self.training:
            self.running.mul_(0.9).add_(y.mean(0).detach() * 0.1)
        return y + self.recent


def build():
    return Stats(), (torch.rand(2, 4),)
"""


def test_the_plain_declaration_fix_writes_replaces_the_class_own_annotation(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """The last annotation of a name in a class body is the one ``__annotations__`` keeps.
    Before: ``running: autoreg.Plain`` went first in the body and the class's own
    ``running: torch.Tensor`` below it won: both names became buffers, which .double() then
    converted apart, so that ``recent`` no longer saw the running mean's updates."""
    project.write("m", ALIASES)
    status, out, err = project.fix(capsys, f"{project.name}.m:build")
    assert status == 1
    assert "Stats.recent: " in err
    alias = "# an alias: .to() would convert a buffer of it apart from its tensor"
    assert _removed(out) == [
        "class Stats(Base):",
        "running: torch.Tensor",
        "recent: torch.Tensor = None  # a TorchScript attribute",
    ]
    assert _added(out) == [
        "import autoreg",
        "class Stats(autoreg.AutoRegisterMixin, Base):",
        f"running: autoreg.Plain  {alias}",
        "recent: autoreg.Plain = None  # a TorchScript attribute",
    ]
    project.fix(capsys, f"{project.name}.m:build", "--write")
    stats = project.load().Stats().double()
    assert stats.recent is stats.running
    assert "running" not in dict(stats.named_buffers())


def test_the_probe_says_what_autoreg_does_with_a_complex_tensor() -> None:
    class Table(autoreg.Module):
        def __init__(self) -> None:
            super().__init__()
            self.freqs = torch.polar(torch.ones(2), torch.ones(2))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nn.Module warns when it drops the imaginary part
        table = Table().to(torch.bfloat16)
    assert table.freqs.is_complex() is autoreg_keeps_complex()


POLICY = """\
import torch
from torch import nn


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.mean = nn.Linear(3, 2)
        self.action_scale = torch.tensor(2.0)

    def forward(self, x):
        return torch.tanh(self.mean(x)) * self.action_scale

    def to(self, device):
        self.action_scale = self.action_scale.to(device)
        return super().to(device)


def build():
    return Policy(), (torch.ones(1, 3),)
"""


@pytest.mark.parametrize("style", ["base", "buffer"])
def test_a_class_that_moves_its_tensors_itself_is_listed_not_rewritten(
    project: Project, capsys: pytest.CaptureFixture[str], style: str
) -> None:
    """Before: the class was rewritten, and its to() then moved the tensor a second time."""
    project.write("m", POLICY)
    status, out, err = project.fix(capsys, f"{project.name}.m:build", "--style", style)
    assert (status, out) == (1, "")
    assert (
        f"  {project.name}/m.py:9: Policy.action_scale: Policy overrides to() "
        f"({project.name}/m.py:14), which may move it already: autoreg fix cannot tell what that "
        "code does, and registered, it would be moved twice\n"
    ) in err


NAMED_AFTER_TORCH = POLICY.replace(
    "class Policy(nn.Module):\n", 'class Policy(nn.Module):\n    __module__ = "torch.nn.policy"\n'
)


def test_a_class_that_moves_its_tensors_itself_is_listed_whatever_its_module_says(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """The user's own to() is told by where its code lives, not by the class's ``__module__``
    (before: a class naming torch's package was skipped, and rewritten)."""
    project.write("m", NAMED_AFTER_TORCH)
    status, out, err = project.fix(capsys, f"{project.name}.m:build")
    assert (status, out) == (1, "")
    assert "Policy.action_scale: Policy overrides to() (" in err


LIGHTNING = """\
import lightning.pytorch as pl
import torch
from torch import nn


class Lit(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(3, 3)
        self.mask = torch.ones(3)

    def forward(self, x):
        return self.net(x) * self.mask


def build():
    return Lit(), (torch.ones(1, 3),)
"""


@pytest.mark.parametrize(
    ("style", "rewritten"),
    [
        ("base", "class Lit(autoreg.AutoRegisterMixin, pl.LightningModule):"),
        ("buffer", 'self.register_buffer("mask", torch.ones(3), persistent=False)'),
    ],
)
def test_a_frameworks_own_to_is_no_reason_to_leave_a_stray(
    project: Project, capsys: pytest.CaptureFixture[str], style: str, rewritten: str
) -> None:
    """Lightning's to(), cuda(), half() (its installed code) move what nn.Module moves, never a
    tensor the model assigned. Before: every LightningModule's stray was listed ("Lit overrides
    to() (.../lightning/fabric/utilities/device_dtype_mixin.py:53)"), and nothing rewritten."""
    pytest.importorskip("lightning")
    project.write("m", LIGHTNING)
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--style", style, "--write")
    assert status == 0, err
    assert rewritten in project.read("m")


STEPPER = """\
import torch
from torch import nn


class Stepper(nn.Module):
    def __init__(self):
        super().__init__()
        self.B = nn.Parameter(torch.randn(4, 2))
        self.scale = torch.ones(4)

    @torch.no_grad()
    def setup_step(self):
        self.step = {"B": torch.view_as_complex(self.B)}

    def forward(self, x):
        self.setup_step()
        return (self.step["B"] * x).real * self.scale


def build():
    return Stepper(), (torch.rand(3, 4),)
"""


@pytest.mark.parametrize("style", ["base", "buffer"])
def test_a_kept_view_of_a_parameter_is_listed_as_one_never_as_a_weight(
    project: Project, capsys: pytest.CaptureFixture[str], style: str
) -> None:
    """A complex view of a parameter kept by a step's setup (as state space models keep their
    step parameters): .to() converts the parameter in place and leaves the view. Listed with
    that reason; before, listed as "a weight to train wants nn.Parameter", whose edit
    (``nn.Parameter(...)``) would make a second, unrelated weight."""
    project.write("m", STEPPER)
    status, out, err = project.fix(capsys, f"{project.name}.m:build", "--style", style)
    assert status == 1
    assert "Stepper.step: a view of the parameter B, kept: .to() converts B in place" in err
    assert "take the view of self.B where it is used, instead of keeping it in self.step" in err
    assert "nn.Parameter" not in err
    assert _added(out)  # scale is rewritten; the view is not
    assert not any("step" in line for line in _added(out))


# --- stores the rewrite cannot put a register_buffer ahead of -----------------------------------

BEFORE_MODULE_INIT = """\
import torch
from torch import nn


def setup(module):
    module.mask = torch.ones(3)


class Model(nn.Module):
    def __init__(self):
        setup(self)
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x) * self.mask


def build():
    return Model(), (torch.ones(1, 3),)
"""

IN_A_BASES_INIT = """\
import torch
from torch import nn


def _init(self, dim):
    nn.Module.__init__(self)
    self.mask = torch.ones(dim)


Base = type("Base", (nn.Module,), {"__init__": _init})


class Model(Base):
    def __init__(self):
        super().__init__(3)
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x) * self.mask


def build():
    return Model(), (torch.ones(1, 3),)
"""

BEFORE_THE_FIRST_REWRITE = """\
import torch
from torch import nn


def setup(module):
    module.mask = torch.ones(3)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        setup(self)
        self.mask = self.mask * 2
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x) * self.mask


def build():
    return Model(), (torch.ones(1, 3),)
"""


@pytest.mark.parametrize(
    ("source", "helper"),
    [
        pytest.param(BEFORE_MODULE_INIT, "setup()", id="before-nn.Module.__init__"),
        pytest.param(IN_A_BASES_INIT, "_init()", id="in-a-base's-__init__"),
        pytest.param(BEFORE_THE_FIRST_REWRITE, "setup()", id="before-the-first-rewritten-store"),
    ],
)
def test_a_store_the_rewrite_cannot_register_first_is_listed_and_nothing_rewritten(
    project: Project, capsys: pytest.CaptureFixture[str], source: str, helper: str
) -> None:
    """Code outside the class stores the tensor before a register_buffer the buffer style would
    add could run: that register_buffer would raise ("attribute 'mask' already exists"), and the
    model no longer build. Before: ``register_buffer("mask", None)`` was added after
    ``super().__init__()`` (the first two) or the store in ``__init__`` rewritten (the third)."""
    project.write("m", source)
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer", "--write")
    assert status == 1
    assert f"Model.mask: stored by {helper}, outside the class" in err
    if source is BEFORE_MODULE_INIT:  # no buffer can be registered there: no such advice
        assert "setup() stores it before nn.Module.__init__ has run" in err
    assert project.read("m") == source  # nothing rewritten: the model still builds
    assert "autoreg fix: nothing to rewrite." in err


NAMED_ELSEWHERE = """\
import torch
from torch import nn


class Base(nn.Module):
    __module__ = "{module}"

    def __init__(self):
        super().__init__()
        self.mask = torch.ones(3)


class Model(Base):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x) * self.mask


def build():
    return Model(), (torch.ones(1, 3),)
"""


@pytest.mark.parametrize("module", ["torch.nn.custom", "{package}"], ids=["torch's", "public path"])
def test_a_base_whose_module_names_another_is_found_where_its_code_is(
    project: Project, capsys: pytest.CaptureFixture[str], module: str
) -> None:
    """A class is torch's, and its statement is found, by where its code lives, not by its
    ``__module__`` (a public path, as libraries give their classes). Before: the base was left
    out as torch's, and ``register_buffer("mask", None)`` added after ``super().__init__()`` in
    ``Model`` (the model then raised), or its statement not found and the store listed."""
    source = NAMED_ELSEWHERE.replace("{module}", module.format(package=project.name))
    project.write("m", source)
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer", "--write")
    assert status == 0, err
    rewritten = project.read("m")
    assert 'self.register_buffer("mask", torch.ones(3), persistent=False)' in rewritten
    assert 'register_buffer("mask", None' not in rewritten


HPARAMS = """\
import lightning.pytorch as pl
import torch
from torch import nn


class Lit(pl.LightningModule):
    def __init__(self, net):
        super().__init__()
        self.save_hyperparameters(logger=False)
        self.net = net

    def forward(self, x):
        return self.net(x)


def build():
    return Lit(nn.Linear(3, 3)), (torch.ones(1, 3),)
"""


@pytest.mark.filterwarnings("ignore:Attribute 'net' is an instance of `nn.Module`")
@pytest.mark.parametrize("style", ["base", "buffer"])
def test_what_an_installed_package_stores_is_listed_at_the_users_call(
    project: Project, capsys: pytest.CaptureFixture[str], style: str
) -> None:
    """Lightning's ``save_hyperparameters()`` keeps a copy of ``net`` in a plain dict on the
    model: the listing points at the user's call and says whose code stores it. Before: it
    pointed at Lightning's file in site-packages, with ``self._hparams_initial =
    nn.ModuleList(...)`` as the edit to make there."""
    pytest.importorskip("lightning")
    project.write("m", HPARAMS)
    status, out, err = project.fix(capsys, f"{project.name}.m:build", "--style", style)
    assert (status, out) == (1, ""), err
    assert (
        f"  {project.name}/m.py:9: Lit._hparams_initial: a container of modules that "
        "save_hyperparameters() ("
    ) in err
    assert "code of an installed package called from here, stores" in err
    assert "nn.ModuleList" not in err


ALIAS = """\
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.register_buffer("running", torch.zeros(3))
        self.recent = self.running
        self.mask = torch.ones(3)

    def forward(self, x):
        self.running.add_(x.mean(0))
        return self.lin(x) * self.mask + self.recent


def build():
    return Model(), (torch.ones(2, 3),)
"""


@pytest.mark.parametrize("style", ["base", "buffer"])
def test_an_alias_of_a_buffer_is_listed_and_never_made_a_buffer_of_its_own(
    project: Project, capsys: pytest.CaptureFixture[str], style: str
) -> None:
    """A second buffer, or autoreg's registration of it in a class made autoreg's, would be
    converted apart from ``running``: after ``.to()`` forward would read a copy that its
    in-place updates never reach. Before: both styles made it one (a wrong result, no error)."""
    project.write("m", ALIAS)
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--style", style, "--write")
    assert status == 1
    assert "Model.recent: shares its values with running (the same tensor, or its storage)" in err
    model = project.load().build()[0]
    model.double()
    model(torch.ones(2, 3, dtype=torch.float64))
    assert "recent" not in model._buffers
    assert model.recent is model.__dict__["recent"]  # a plain attribute, as before
    assert project.read("m").count("register_buffer") == 1 + (style == "buffer")  # + mask's


VIEWS = """\
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.store = torch.zeros(2, 4)
        self.k = self.store[0]
        self.v = self.store[1]

    def forward(self, x):
        y = self.lin(x)
        self.k.copy_(y.detach().mean(0))
        return y + self.store.sum(0)


def build():
    return Model(), (torch.ones(2, 4),)
"""

SHARED = """\
import torch
from torch import nn


class Accumulator(nn.Module):
    def __init__(self, total):
        super().__init__()
        self.total = total

    def forward(self, x):
        self.total.add_(x.sum(0))
        return x


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        total = torch.zeros(4)
        self.a = Accumulator(total)
        self.b = Accumulator(total)
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.b(self.a(self.lin(x))) + self.b.total


def build():
    return Model(), (torch.ones(2, 4),)
"""

CHAINED = """\
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.acc = self.shown = torch.zeros(4)

    def forward(self, x):
        self.acc.add_(x.sum(0))
        return self.lin(x) + self.shown


def build():
    return Model(), (torch.ones(2, 4),)
"""


IN_EVAL_ONLY = """\
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.acc = self.shown = torch.zeros(4)

    def forward(self, x):
        if not self.training:  # a statistic gathered at evaluation only
            self.acc.add_(x.sum(0))
        return self.lin(x) + self.shown


def build():
    return Model(), (torch.ones(2, 4),)
"""

NO_INPUTS = CHAINED.replace("return Model(), (torch.ones(2, 4),)", "return Model()")


@pytest.mark.parametrize("style", ["base", "buffer"])
@pytest.mark.parametrize(
    ("source", "pairs"),
    [
        pytest.param(VIEWS, [("store", "k")], id="views-of-a-plain-tensor"),
        pytest.param(IN_EVAL_ONLY, [("acc", "shown")], id="written-in-eval-mode-only"),
        pytest.param(NO_INPUTS, [("acc", "shown")], id="no-inputs-to-run-forward-with"),
        pytest.param(SHARED, [("a.total", "b.total")], id="one-tensor-two-modules-hold"),
        pytest.param(CHAINED, [("acc", "shown")], id="chained-assignment"),
    ],
)
def test_tensors_that_share_their_values_are_listed_and_keep_sharing_them(
    project: Project,
    capsys: pytest.CaptureFixture[str],
    style: str,
    source: str,
    pairs: list[tuple[str, str]],
) -> None:
    """Made buffers (or carried) one by one, they would be converted apart, and forward would
    read values the in-place updates of the other never reach (a wrong result after .double(),
    no error). Before: both styles rewrote them, exit 0. Whether they are written is known only
    from a forward run in both modes: one written at evaluation only, or with no inputs to run
    forward on, was rewritten too (the two last cases, until 2026-12-06)."""
    project.write("m", source)
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--style", style, "--write")
    assert status == 1
    assert "(the same tensor, or its storage)" in err
    built = project.load().build()
    model = built if isinstance(built, torch.nn.Module) else built[0]
    model.double()
    for first, second in pairs:
        one = _at(model, first)
        other = _at(model, second)
        assert one.untyped_storage().data_ptr() == other.untyped_storage().data_ptr()


def _at(model: torch.nn.Module, path: str) -> torch.Tensor:
    module, _, name = path.rpartition(".")
    return getattr(model.get_submodule(module), name)  # type: ignore[no-any-return]


PRETRAINED = """\
import torch
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel


class TinyConfig(PretrainedConfig):
    model_type = "autoreg-fix-tiny"

    def __init__(self, dim=4, **kwargs):
        super().__init__(**kwargs)
        self.dim = dim


class TinyModel(PreTrainedModel):
    config_class = TinyConfig

    def __init__(self, config):
        super().__init__(config)
        self.lin = nn.Linear(config.dim, config.dim)
        self.pos = torch.linspace(0, 1, config.dim)
        self.post_init()

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            module.weight.data.fill_(0.1)
            module.bias.data.zero_()

    def forward(self, x):
        self.last = x.detach()  # runtime state: makes the class autoreg's in the base style
        return self.lin(x) + self.pos


def build():
    return TinyModel(TinyConfig()), (torch.randn(2, 4),)
"""


@pytest.mark.parametrize("style", ["base", "buffer"])
def test_a_tensor_built_in_a_pretrained_model_is_never_made_a_buffer(
    project: Project, capsys: pytest.CaptureFixture[str], tmp_path: Path, style: str
) -> None:
    """transformers' from_pretrained builds on meta and gives non-persistent buffers
    uninitialised memory unless _init_weights sets them; the plain attribute keeps its values.
    Before: both styles made it a buffer, and from_pretrained returned garbage (no error)."""
    pytest.importorskip("transformers")
    project.write("m", PRETRAINED)
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--style", style, "--write")
    assert status == 1
    assert "TinyModel.pos: built in a transformers PreTrainedModel" in err
    module = project.load()
    module.build()[0].save_pretrained(tmp_path)
    loaded = module.TinyModel.from_pretrained(tmp_path)
    torch.testing.assert_close(loaded.pos, torch.linspace(0, 1, 4))


SHADOWED = """\
import torch
from torch import nn


def autoreg(model, x, steps=3):
    for _ in range(steps):
        x = model(x)
    return x


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.s = torch.linspace(1, 2, 4)

    def forward(self, x):
        return self.lin(x) * self.s


def build():
    return Model(), (torch.randn(2, 4),)
"""


def test_a_file_that_binds_the_name_autoreg_itself_is_not_given_autoreg_module(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: ``import autoreg`` was added and the base became ``autoreg.Module``, which the
    file's own ``autoreg`` function then shadowed: the rewritten file no longer imported."""
    project.write("m", SHADOWED)
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--write")
    assert status == 1
    assert "Model: held by Model, in a file that binds the name autoreg to something" in err
    assert "there or in a function around the class statement" in err
    assert project.read("m") == SHADOWED


SHADOWED_IN_A_FACTORY = """\
import torch
from torch import nn


def make_decoder(dim, autoreg=True):  # here, "autoregressive"
    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(dim, dim)
            self.s = torch.linspace(1, 2, dim)
            self.causal = autoreg

        def forward(self, x):
            return self.lin(x) * self.s

    return Decoder()


def build():
    return make_decoder(4), (torch.randn(2, 4),)
"""


def test_a_class_inside_a_function_that_binds_autoreg_is_not_given_autoreg_module(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """The class statement reads ``autoreg`` in the function's scope, a flag there. Before:
    ``class Decoder(autoreg.Module)`` was written, and building it raised "'bool' object has
    no attribute 'Module'"."""
    project.write("m", SHADOWED_IN_A_FACTORY)
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--write")
    assert status == 1
    assert "in a file that binds the name autoreg to something" in err
    assert project.read("m") == SHADOWED_IN_A_FACTORY


ANNOTATED = """\
import torch
from torch import nn


class Policy(nn.Module):
    temperature: torch.Tensor  # for type checkers and TorchScript

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.mask = torch.ones(2)
        self.temperature = torch.tensor(1.0)

    def set_temperature(self, t: float):
        self.temperature = t

    def forward(self, x):
        return self.lin(x) / self.temperature * self.mask


def build():
    return Policy(), (torch.randn(4, 3),)
"""


def test_a_class_whose_annotation_would_declare_a_buffer_a_store_refuses_is_not_made_autoregs(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """On autoreg a tensor annotation declares a buffer (row 9), which refuses the float the
    setter stores; on nn.Module it is a type hint. Before: the base style made the class
    autoreg's, and set_temperature(0.5) raised "cannot assign 'float' as buffer"."""
    project.write("m", ANNOTATED)
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--write")
    assert status == 1
    assert "Policy: its annotation temperature: ... would declare a buffer" in err
    assert project.read("m") == ANNOTATED
    model = project.load().build()[0]
    model.set_temperature(0.5)


ANNOTATED_WEIGHT = """\
import torch
from torch import nn


class Scaled(nn.Module):
    weight: torch.Tensor  # for TorchScript, as torch.nn's layers declare theirs

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(4))
        self.scale = torch.full((4,), 0.5)

    def forward(self, x):
        return x * self.weight * self.scale


def build():
    return Scaled(), (torch.randn(2, 4),)
"""


def test_a_parameter_under_an_annotation_that_would_declare_a_buffer_is_no_reason_to_list(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """A parameter under ``weight: torch.Tensor`` stays a parameter on autoreg: the class is
    rewritten as any other (a guard of the check above, which a parameter does not trip)."""
    project.write("m", ANNOTATED_WEIGHT)
    status, _, _ = project.fix(capsys, f"{project.name}.m:build", "--write")
    assert status == 0
    assert "class Scaled(autoreg.Module):" in project.read("m")


ANNOTATED_LOSS = """\
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn


class Net(nn.Module):
    last_loss: Optional[torch.Tensor]

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.last_loss = None

    def forward(self, x, targets=None):
        out = self.lin(x)
        if targets is not None:
            self.last_loss = F.cross_entropy(out, targets)
        else:
            self.last_loss = None
        return out


def build():
    return Net(), (torch.randn(5, 4), torch.tensor([0, 1, 2, 0, 1]))
"""


def test_a_store_under_an_annotation_that_ran_with_a_tensor_is_no_reason_to_list(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """``last_loss: Optional[torch.Tensor]`` and a loss stored in forward (llama2.c): what
    ``F.cross_entropy(...)`` returns the source does not say, the run does (a tensor), as the
    buffer style reads it. Before: listed, "may give it another value than a tensor"."""
    project.write("m", ANNOTATED_LOSS)
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--write")
    assert status == 0, err
    assert "class Net(autoreg.Module):" in project.read("m")
    model, (x, targets) = project.load().build()
    model(x, targets)
    model.double()
    assert model.last_loss.dtype == torch.float64  # the declared buffer, converted
    model(x.double())
    assert model.last_loss is None


def test_a_store_under_an_annotation_of_a_call_that_may_return_a_float_is_listed(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """As above, with the loss computed by a function of the file that returns ``0.0`` without
    targets: the run saw a tensor, the source shows the float. Before (4983886): rewritten, and
    inference raised "cannot assign 'float' as buffer"."""
    source = ANNOTATED_LOSS.replace(
        "            self.last_loss = F.cross_entropy(out, targets)\n"
        "        else:\n"
        "            self.last_loss = None\n",
        "            pass\n        self.last_loss = loss_or_zero(out, targets)\n",
    ).replace(
        "class Net(nn.Module):",
        "def loss_or_zero(out, targets):\n"
        "    if targets is None:\n"
        "        return 0.0\n"
        "    return F.cross_entropy(out, targets)\n\n\n"
        "class Net(nn.Module):",
    )
    project.write("m", source)
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--write")
    assert status == 1
    assert "Net: its annotation last_loss: ... would declare a buffer" in err
    assert project.read("m") == source
    model, (x, _) = project.load().build()
    model(x)
    assert model.last_loss == 0.0


def test_a_name_nn_module_defines_is_told_to_be_renamed() -> None:
    """``self.half = torch.tensor(0.5)``: nn.Module's own method hides it; nothing of the user's
    is there to remove (before: "defined on the class (a class-level function)")."""
    from autoreg._facts import why_no_buffer_slot

    assert why_no_buffer_slot(torch.nn.Linear, "half") == (
        "is nn.Module's own function (half()) and hides any buffer of that name"
    )


def test_a_name_nn_module_defines_that_is_no_function_is_not_written_as_a_call() -> None:
    """Before: "nn.Module's own bool (dump_patches())", a call of what is no function."""
    from autoreg._facts import why_no_buffer_slot

    assert why_no_buffer_slot(torch.nn.Linear, "dump_patches") == (
        "is nn.Module's own bool (dump_patches) and hides any buffer of that name"
    )


def test_tensors_made_in_inference_mode_that_share_values_are_listed(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """An inference tensor keeps no version counter (reading it raised): taken as written."""
    project.write(
        "m",
        SHARED.replace(
            "return Model(), ", "with torch.inference_mode():\n        return Model(), "
        ),
    )
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer")
    assert status == 1, err
    assert "(the same tensor, or its storage)" in err


def test_a_class_made_by_type_is_said_to_have_no_class_statement(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: "whose source file cannot be read", of a file fix had just read."""
    source = IN_A_BASES_INIT.replace("class Model(Base):", "class Unused(Base):").replace(
        "return Model()", "return Base(3)"
    )
    project.write("m", source)
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer")
    assert status == 1, err
    assert "Base.mask: held by Base, whose class statement autoreg fix cannot find" in err


CONFIG_FALLBACK = """\
from types import SimpleNamespace

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.lin = nn.Linear(cfg.dim, cfg.dim)
        self.scale = torch.tensor(cfg.scale).expand(cfg.dim).clone()

    def __getattr__(self, name):  # the config answers for what the module lacks
        try:
            return super().__getattr__(name)
        except AttributeError:
            cfg = self.__dict__.get("cfg")
            if cfg is not None and hasattr(cfg, name):
                return getattr(cfg, name)
            raise

    def forward(self, x):
        return self.lin(x) * self.scale


def build():
    return Block(SimpleNamespace(dim=4, scale=0.5)), (torch.randn(2, 4),)
"""


def test_a_class_whose_getattr_may_answer_for_the_name_is_not_given_register_buffer(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """``register_buffer`` refuses a name ``hasattr`` finds, and ``__getattr__`` finds
    ``scale`` in the config. Before: the buffer style wrote ``register_buffer("scale", ...)``
    and the written model raised "attribute 'scale' already exists". The base style works."""
    project.write("m", CONFIG_FALLBACK)
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer", "--write")
    assert status == 1
    assert "Block.scale: Block's own __getattr__ may answer for scale" in err
    model = project.load().build()[0]
    assert "scale" in vars(model)  # as it was


SUBCLASS_STORES_A_FLOAT = """\
import torch
from torch import nn


class PosEnc(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.lin = nn.Linear(dim, dim)
        self.scale = torch.tensor(1.0)

    def forward(self, x):
        return self.lin(x) * self.scale


class FixedScale(PosEnc):
    def __init__(self, dim, scale=2.0):
        super().__init__(dim)
        self.scale = scale


def build():
    return PosEnc(4), (torch.randn(2, 4),)
"""


def test_a_name_a_subclass_stores_too_is_not_registered_in_the_buffer_style(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """``FixedScale``, which the factory does not build, stores a float under the name the
    buffer style registered in ``PosEnc``. Before: ``PosEnc`` got ``register_buffer``, the run
    ended "now clean", and ``FixedScale(4)`` raised "cannot assign 'float' as buffer"."""
    project.write("m", SUBCLASS_STORES_A_FLOAT)
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer", "--write")
    assert status == 1
    assert "PosEnc.scale: its subclass FixedScale stores it too" in err
    module = project.load()
    assert module.FixedScale(4).scale == 2.0


_start = SUBCLASS_STORES_A_FLOAT.index("class FixedScale")
_end = SUBCLASS_STORES_A_FLOAT.index("def build")
POS_ENC_ALONE = SUBCLASS_STORES_A_FLOAT[:_start] + SUBCLASS_STORES_A_FLOAT[_end:]

SUBCLASS_ELSEWHERE = {
    "assigned-alias": """\
from . import m

Base = m.PosEnc


class FixedScale(Base):
    def __init__(self, dim, scale=2.0):
        super().__init__(dim)
        self.scale = scale
""",
    "imported-name": """\
from .m import PosEnc


class FixedScale(PosEnc):
    def __init__(self, dim, scale=2.0):
        super().__init__(dim)
        self.scale = scale
""",
    "module-attribute": """\
from . import m


class FixedScale(m.PosEnc):
    def set_scale(self, scale):
        self.scale = scale
""",
    "grandchild": """\
from . import m


class Middle(m.PosEnc):
    pass


class FixedScale(Middle):
    def __init__(self, dim):
        super().__init__(dim)
        self.scale = 2.0
""",
    "alias": """\
from .m import PosEnc as Encoding


class FixedScale(Encoding):
    def __init__(self, dim):
        super().__init__(dim)
        self.scale = 2.0
""",
    "mixin": """\
from .m import PosEnc


class ScaleOption:
    def set_scale(self, scale):
        self.scale = scale


class FixedScale(ScaleOption, PosEnc):
    def __init__(self, dim):
        super().__init__(dim)
        self.set_scale(2.0)
""",
    "setattr": """\
from .m import PosEnc


class FixedScale(PosEnc):
    def __init__(self, dim, **options):
        super().__init__(dim)
        for key, value in {"scale": 2.0, **options}.items():
            setattr(self, key, value)
""",
    "latin-1": """\
# -*- coding: latin-1 -*-
from .m import PosEnc


class FixedScale(PosEnc):
    \"\"\"Échelle fixe.\"\"\"

    def __init__(self, dim):
        super().__init__(dim)
        self.scale = 2.0
""",
}


@pytest.mark.parametrize("loaded", [False, True], ids=["nothing-imports-it", "loaded"])
@pytest.mark.parametrize("variant", list(SUBCLASS_ELSEWHERE))
def test_a_subclass_in_a_module_nothing_imports_holds_the_buffer_style_back(
    project: Project, capsys: pytest.CaptureFixture[str], variant: str, loaded: bool
) -> None:
    """As above, with ``FixedScale`` in a module of the project that the factory's does not
    import (the run never loads it, its source says it stores the name), or imports. Before:
    ``PosEnc`` got ``register_buffer``, and ``FixedScale`` raised "cannot assign 'float' as
    buffer" (for a module nothing imports, then for a base imported under another name, a store
    by a mixin or by ``setattr``, a file in another encoding)."""
    project.write("m", POS_ENC_ALONE + ("\nfrom . import variants  # noqa\n" if loaded else ""))
    source = SUBCLASS_ELSEWHERE[variant]
    (project.root / project.name / "variants.py").write_bytes(
        source.encode("latin-1" if variant == "latin-1" else "utf-8")
    )
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer", "--write")
    assert status == 1
    assert "PosEnc.scale: its subclass FixedScale stores it too" in err
    project.load()
    model = project.load("variants").FixedScale(4)
    if variant == "module-attribute":
        model.set_scale(2.0)
    assert model.scale == 2.0


def test_a_same_named_class_elsewhere_that_stores_nothing_there_holds_nothing_back(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """A class of the project that names ``PosEnc`` among its bases but never stores
    ``self.scale`` is no reason to list it: the buffer style registers it."""
    project.write("m", POS_ENC_ALONE)
    project.write("variants", "from .m import PosEnc\n\n\nclass Wide(PosEnc):\n    width = 8\n")
    status, out, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer")
    assert status == 1  # it would change a file
    assert 'self.register_buffer("scale", torch.tensor(1.0), persistent=False)' in out, err


DATACLASS_FIELD = """\
from dataclasses import dataclass, field

import torch
from torch import nn


@dataclass(eq=False)
class Prior(nn.Module):
    dim: int = 3
    loc: torch.Tensor = field(default_factory=lambda: torch.zeros(3))

    def __post_init__(self):
        super().__init__()
        self.lin = nn.Linear(self.dim, self.dim)

    def forward(self, x):
        return self.lin(x) + self.loc


def build():
    return Prior(), (torch.randn(2, 3),)
"""


def test_a_dataclass_field_is_listed_at_its_class_with_an_edit_for_post_init(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """The __init__ a dataclass generates has no source file. Before: listed at "<string>:4"
    as "stored by __create_fn__.<locals>.__init__()", with an edit in a function that does not
    exist."""
    project.write("m", DATACLASS_FIELD)
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer")
    assert status == 1
    assert f"{project.name}/m.py:7: Prior.loc: stored by code without a source file" in err
    assert 'self.register_buffer("loc", self.__dict__.pop("loc"), persistent=False)' in err
    assert "<string>" not in err


HIERARCHY = """\
import torch
from torch import nn


class Scaled(BASE):
    def __init__(self, n=4):
        super().__init__(INIT)
        self.lin = nn.Linear(n, n)
        self.scale = torch.full((n,), 2.0)

    def forward(self, x):
        return self.lin(x) * self.scale


class Picked(Scaled):
    def __init__(self, n=4):
        super().__init__(n)
        self.order = torch.arange(n).flip(0)

    def forward(self, x):
        return super().forward(x)[:, self.order]


def build():
    return Picked(), (torch.randn(2, 4),)
"""


@pytest.mark.parametrize(
    ("base", "init", "made"),
    [
        ("nn.Module", "", "class Scaled(autoreg.Module):"),
        ("nn.Linear", "n, n", "class Scaled(autoreg.AutoRegisterMixin, nn.Linear):"),
    ],
    ids=["module", "linear"],
)
def test_a_subclass_of_a_class_made_autoregs_is_autoregs_through_it(
    project: Project, capsys: pytest.CaptureFixture[str], base: str, init: str, made: str
) -> None:
    """Both classes keep a tensor: the base becomes autoreg's, and so, through it, does the
    subclass. Before: the subclass got the mixin first too, ``(AutoRegisterMixin, Scaled)``, an
    order Python refuses: the rewritten file no longer imported."""
    project.write("m", HIERARCHY.replace("BASE", base).replace("INIT", init))
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--write")
    assert status == 0, err
    written = project.read("m")
    assert made in written
    assert "class Picked(Scaled):" in written
    model = project.load().build()[0]
    assert set(dict(model.named_buffers())) == {"scale", "order"}


UNRELATED_SETATTR = """\
import torch
from torch import nn


class Table(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.ones(3)

    def forward(self, x):
        return x + self.table


class Configurable(nn.Module):
    def __init__(self, **options):
        super().__init__()
        for key, value in options.items():
            setattr(self, key, value)


def build():
    return Table(), (torch.randn(2, 3),)
"""


def _framework_helper(module: torch.nn.Module) -> None:
    """What a framework sets on nn.Module (transformers sets ``smart_apply`` there)."""


def test_a_function_a_framework_sets_on_nn_module_makes_no_user_class_of_it(
    project: Project, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: with a function set on ``nn.Module`` from outside torch, ``nn.Module`` counted as
    a class of the model's own: every module of the project was read as a subclass of it, and
    ``Configurable``'s ``setattr`` loop held ``Table.table`` back."""
    monkeypatch.setattr(torch.nn.Module, "framework_helper", _framework_helper, raising=False)
    project.write("m", UNRELATED_SETATTR)
    status, out, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer")
    assert status == 1
    assert 'self.register_buffer("table", torch.ones(3), persistent=False)' in out, err
    assert "left for you to edit" not in err


# A private name inside class C is the attribute _C__name (Python mangles it): forward's state
# under self.__avg, which reset() sets to a float, and a mask under self.__mask.
MANGLED = """\
import torch
from torch import nn


class Smoother(nn.Module):
    def __init__(self, n=4):
        super().__init__()
        self.lin = nn.Linear(n, n)

    def reset(self):
        self.__avg = 0.0

    def forward(self, x):
        y = self.lin(x)
        self.__avg = 0.1 * y.detach()
        return y + self.__avg


class _Attn(nn.Module):
    def __init__(self, n=4):
        super().__init__()
        self.__mask = torch.ones(n)

    def forward(self, x):
        return x * self.__mask


def build():
    return nn.Sequential(Smoother(), _Attn()), (torch.ones(2, 4),)
"""


def test_a_private_name_is_matched_as_python_mangles_it(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: reset()'s float store of ``self.__avg`` was not seen as a store of
    ``_Smoother__avg``, which was registered as None (reset() then raised TypeError), and
    ``self.__mask`` was listed as "not stored by a plain statement"."""
    source = project.write("m", MANGLED).read_text()
    status, out, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer")
    assert status == 1
    added = [line[1:].strip() for line in out.splitlines() if line[:2] == "+ "]
    assert added == ['self.register_buffer("_Attn__mask", torch.ones(n), persistent=False)']
    line = source.splitlines().index("        self.__avg = 0.0") + 1
    assert (
        f"  {project.name}/m.py:{line}: Smoother._Smoother__avg: stores a value that is not a "
        "tensor here, where register_buffer takes only a tensor or None\n"
    ) in err


POS_ENC_PRIVATE = POS_ENC_ALONE.replace("self.scale", "self.__scale")
# A subclass of the same name: its self.__scale is _PosEnc__scale too.
SUBCLASS_PRIVATE = """\
from . import m


class PosEnc(m.PosEnc):
    def __init__(self, dim):
        super().__init__(dim)
        self.__scale = 2.0
"""


@pytest.mark.parametrize("loaded", [False, True], ids=["nothing-imports-it", "loaded"])
def test_a_subclass_storing_the_mangled_name_holds_the_buffer_style_back(
    project: Project, capsys: pytest.CaptureFixture[str], loaded: bool
) -> None:
    """``self.__scale`` in ``PosEnc`` is ``_PosEnc__scale``, which the subclass of the same name
    stores with a float. Before: its store was not matched, ``PosEnc`` got ``register_buffer``,
    and the subclass raised TypeError."""
    assert "self.__scale" in POS_ENC_PRIVATE
    project.write("m", POS_ENC_PRIVATE + ("\nfrom . import variants  # noqa\n" if loaded else ""))
    (project.root / project.name / "variants.py").write_text(SUBCLASS_PRIVATE)
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer")
    assert status == 1
    assert "PosEnc._PosEnc__scale: its subclass PosEnc stores it too" in err


LINKED_BLOCK = """\
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, n=4):
        super().__init__()
        self.mask = torch.ones(n)

    def forward(self, x):
        return x * self.mask
"""


@pytest.mark.parametrize("style", ["base", "buffer"])
def test_a_file_reached_through_a_symbolic_link_to_elsewhere_is_listed_never_edited(
    project: Project, capsys: pytest.CaptureFixture[str], tmp_path: Path, style: str
) -> None:
    """``vendored`` under the working directory links to a folder outside it. Before: fix
    rewrote the file there, outside the working directory."""
    outside = tmp_path / "outside" / "vendored"
    outside.mkdir(parents=True)
    (outside / "__init__.py").write_text("")
    (outside / "blocks.py").write_text(LINKED_BLOCK)
    (project.root / project.name / "vendored").symlink_to(outside, target_is_directory=True)
    project.write(
        "m",
        "import torch\nfrom .vendored.blocks import Block\n\n\ndef build():\n"
        "    return Block(), (torch.ones(2, 4),)\n",
    )
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--style", style, "--write")
    assert status == 1
    assert (outside / "blocks.py").read_text() == LINKED_BLOCK
    assert (
        f"Block.mask: stored by Block, defined in {outside / 'blocks.py'} (through a symbolic "
        f"link), outside {project.root}"
    ) in err


# A setter that `self.scale = ...` runs and `register_buffer("scale", ...)` skips: in a subclass
# (a property, another data descriptor, its own __setattr__) or in the class or a base of it.
SETTERS_ELSEWHERE = {
    "property": (
        "Clamped.scale is a property",
        """\
from .m import PosEnc


class Clamped(PosEnc):
    @property
    def scale(self):
        return self._scale

    @scale.setter
    def scale(self, value):
        self._scale = value.clamp(min=0.5)
""",
    ),
    "descriptor": (
        "Clamped.scale is a data descriptor",
        """\
from .m import PosEnc


class Clamp:
    def __get__(self, obj, owner=None):
        return obj.__dict__["_scale"]

    def __set__(self, obj, value):
        obj.__dict__["_scale"] = value.clamp(min=0.5)


class Clamped(PosEnc):
    scale = Clamp()
""",
    ),
    "setattr": (
        "Clamped's own __setattr__",
        """\
from .m import PosEnc


class Clamped(PosEnc):
    def __setattr__(self, name, value):
        self.__dict__.setdefault("_scale", []).append(name)
        super().__setattr__(name, value)
""",
    ),
}


@pytest.mark.parametrize("loaded", [False, True], ids=["nothing-imports-it", "loaded"])
@pytest.mark.parametrize("variant", list(SETTERS_ELSEWHERE))
def test_a_subclass_with_a_setter_for_the_name_holds_the_buffer_style_back(
    project: Project, capsys: pytest.CaptureFixture[str], variant: str, loaded: bool
) -> None:
    """``self.scale = ...`` in ``PosEnc`` runs the setter that ``Clamped`` defines (a property,
    a descriptor with ``__set__``, its own ``__setattr__``); ``register_buffer`` skips it.
    Before: ``PosEnc`` got ``register_buffer``, and ``Clamped(4)`` never ran its setter."""
    words, source = SETTERS_ELSEWHERE[variant]
    project.write("m", POS_ENC_ALONE + ("\nfrom . import variants  # noqa\n" if loaded else ""))
    (project.root / project.name / "variants.py").write_text(source)
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer", "--write")
    assert status == 1
    assert f"PosEnc.scale: {words}" in err
    project.load()
    assert "_scale" in vars(project.load("variants").Clamped(4))  # its setter ran


OWN_SETATTR = {
    "in-the-class": """\
import torch
from torch import nn


class PosEnc(nn.Module):
    def __setattr__(self, name, value):
        if isinstance(value, torch.Tensor):
            self.__dict__.setdefault("tracked", []).append(name)
        super().__setattr__(name, value)

    def __init__(self, dim):
        super().__init__()
        self.scale = torch.tensor(1.0)

    def forward(self, x):
        return x * self.scale


def build():
    return PosEnc(4), (torch.randn(2, 4),)
""",
    "in-a-base": """\
import torch
from torch import nn


class Tracked(nn.Module):
    def __setattr__(self, name, value):
        if isinstance(value, torch.Tensor):
            self.__dict__.setdefault("tracked", []).append(name)
        super().__setattr__(name, value)


class PosEnc(Tracked):
    def __init__(self, dim):
        super().__init__()
        self.scale = torch.tensor(1.0)

    def forward(self, x):
        return x * self.scale


def build():
    return PosEnc(4), (torch.randn(2, 4),)
""",
}


@pytest.mark.parametrize("variant", list(OWN_SETATTR))
def test_a_class_with_its_own_setattr_is_not_given_register_buffer(
    project: Project, capsys: pytest.CaptureFixture[str], variant: str
) -> None:
    """A ``__setattr__`` of the class's or of a base of it sees ``self.scale = ...`` and not
    ``register_buffer``. Before: the buffer style rewrote the store, and ``tracked`` lost it."""
    project.write("m", OWN_SETATTR[variant])
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer", "--write")
    assert status == 1
    owner = "PosEnc" if variant == "in-the-class" else "Tracked"
    assert f"PosEnc.scale: {owner}'s own __setattr__" in err
    assert project.load().build()[0].tracked == ["scale"]


SUBCLASS_STORES_NONE = {
    # after construction, or after the base registered the buffer: nn.Module takes None there
    "reset": "    def reset(self):\n        self.scale = None\n",
    "after-super": (
        "    def __init__(self, dim):\n        super().__init__(dim)\n        self.scale = None\n"
    ),
    # the base never runs (a subclass building itself, as litgpt's adapters do)
    "no-base-init": (
        "    def __init__(self, dim):\n"
        "        nn.Module.__init__(self)\n"
        "        self.scale = None\n"
    ),
    # annotated, as litgpt's adapter and LoRA GPTs write it (`self.mask_cache: Tensor | None`)
    "annotated": (
        "    def __init__(self, dim):\n"
        "        nn.Module.__init__(self)\n"
        "        self.scale: torch.Tensor | None = None\n"
    ),
}


@pytest.mark.parametrize("loaded", [False, True], ids=["nothing-imports-it", "loaded"])
@pytest.mark.parametrize("where", list(SUBCLASS_STORES_NONE))
def test_a_subclass_that_stores_none_holds_nothing_back(
    project: Project, capsys: pytest.CaptureFixture[str], where: str, loaded: bool
) -> None:
    """A buffer takes None (litgpt's ``GPT.mask_cache``, which its subclasses set to None): no
    reason to list the name. Before: listed, "its subclass ... stores it too", and ``.to()``
    left the tensor behind in the buffer style."""
    project.write("m", POS_ENC_ALONE + ("\nfrom . import variants  # noqa\n" if loaded else ""))
    imports = "import torch\nfrom torch import nn\n\nfrom .m import PosEnc\n\n\n"
    source = imports + "class Cached(PosEnc):\n"
    project.write("variants", source + SUBCLASS_STORES_NONE[where])
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer", "--write")
    assert "stores it too" not in err
    assert status == 0, err
    project.load()
    model = project.load("variants").Cached(4)
    getattr(model, "reset", lambda: None)()
    if where not in ("no-base-init", "annotated"):
        assert "scale" in model._buffers


def test_a_subclass_that_stores_none_before_the_base_registers_holds_the_name_back(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """``self.scale = None`` before ``super().__init__()``: ``register_buffer`` would then find
    the attribute and raise KeyError ("attribute 'scale' already exists"): still listed."""
    project.write("m", POS_ENC_ALONE)
    project.write(
        "variants",
        "from .m import PosEnc\n\n\nclass Early(PosEnc):\n"
        "    def __init__(self, dim):\n        self.scale = None\n        super().__init__(dim)\n",
    )
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer")
    assert status == 1
    assert "PosEnc.scale: its subclass Early stores it too" in err


PLAIN_MIXIN_STATS = """\
import torch


class RunningStats{bases}:
    \"\"\"A running mean, kept by modules and by a data pipeline alike.\"\"\"

    def init_stats(self, n):
        self.mean = torch.zeros(n)
        self.count = 0

    def update(self, x):
        self.count += 1
        self.mean += (x.mean(0) - self.mean) / self.count
"""

PLAIN_MIXIN_MODEL = """\
import torch
from torch import nn

from .stats import RunningStats


class Norm(RunningStats, nn.Module):
    def __init__(self, n=4):
        nn.Module.__init__(self)
        self.lin = nn.Linear(n, n)
        self.init_stats(n)

    def forward(self, x):
        if self.training:
            self.update(x.detach())
        return self.lin(x - self.mean)


class Tracker(RunningStats):  # not a module
    def __init__(self, n):
        self.init_stats(n)


def build():
    return Norm(), (torch.randn(2, 4),)
"""


@pytest.mark.parametrize("bases", ["(object)", ""], ids=["object", "bare"])
@pytest.mark.parametrize("style", ["buffer", "base"])
def test_a_tensor_a_plain_mixin_stores_is_never_made_a_buffer_in_the_mixin(
    project: Project, capsys: pytest.CaptureFixture[str], style: str, bases: str
) -> None:
    """``RunningStats`` is no module, and a data pipeline uses it too. Before: the buffer style
    wrote ``self.register_buffer`` in it (``Tracker`` raised AttributeError), and the base
    style proposed ``class RunningStats(autoreg.AutoRegisterMixin, object)``, which cannot be
    imported (put back, unexplained), or listed the bare class with an edit that cannot work.
    Now the mixin is left as it is: the base style makes the module class autoreg's (its
    construction runs the mixin's store, which autoreg registers), the buffer style lists it."""
    project.write("stats", PLAIN_MIXIN_STATS.format(bases=bases))
    project.write("m", PLAIN_MIXIN_MODEL)
    stats = project.read("stats")
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--style", style, "--write")
    assert project.read("stats") == stats
    loaded = project.load()
    tracker = loaded.Tracker(4)
    tracker.update(torch.ones(3, 4))
    assert tracker.mean.tolist() == [1.0] * 4
    if style == "base":
        assert status == 0, err
        assert "class Norm(RunningStats, autoreg.Module):" in project.read("m")
        assert loaded.Norm().double().mean.dtype == torch.float64
    else:
        assert status == 1
        assert "Norm.mean: stored by RunningStats, which is not a module" in err, err


REGISTRY = """\
import torch
from torch import nn

LAYERS = {{}}


class Layer(nn.Module):
    def __init_subclass__(cls, name=None{kwargs}):
        {call}LAYERS[name or cls.__name__.lower()] = cls

    def __init__(self, n=4):
        super().__init__()
        self.lin = nn.Linear(n, n)
        self.scale = torch.full((n,), 0.5)

    def forward(self, x):
        return self.lin(x) * self.scale


class Gated(Layer, name="gated"):
    pass


def build():
    return LAYERS["gated"](), (torch.randn(2, 4),)
"""


@pytest.mark.parametrize("calls", [False, True], ids=["without-super", "with-super"])
def test_a_class_whose_init_subclass_calls_no_super_is_not_made_autoregs(
    project: Project, capsys: pytest.CaptureFixture[str], calls: bool
) -> None:
    """A registry's ``__init_subclass__`` that does not call ``super().__init_subclass__()``:
    made ``autoreg.Module``, its subclasses raised ClassDefinitionError when built (fix exited
    0). Listed now; one that calls it is rewritten."""
    call = "super().__init_subclass__(**kwargs)\n        " if calls else ""
    project.write("m", REGISTRY.format(kwargs=", **kwargs" if calls else "", call=call))
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--style", "base", "--write")
    if calls:
        assert status == 0, err
        assert "class Layer(autoreg.Module):" in project.read("m")
    else:
        assert status == 1
        assert "Layer: its __init_subclass__ does not call super().__init_subclass__()" in err
        assert "class Layer(nn.Module):" in project.read("m")
    model = project.load().LAYERS["gated"]()
    assert model.double().scale.dtype == (torch.float64 if calls else torch.float32)


SCALED = """\
import torch
from torch import nn


class Scaled(nn.Module):
    def __init__(self, n=3):
        super().__init__()
        self.lin = nn.Linear(n, n)
        self.scale = torch.ones(n)

    def forward(self, x):
        return self.lin(x) * self.scale


def build():
    return Scaled(), (torch.ones(2, 3),)
"""

# A subclass migrated by hand, in a file the factory never imports: the mixin first, then the
# class fix would make autoreg's (an order Python refuses once that class has the mixin).
MIGRATED = """\
import autoreg
import torch

from .m import Scaled


class Biased(autoreg.AutoRegisterMixin, Scaled):
    def __init__(self, n=3):
        super().__init__(n)
        self.bias = torch.zeros(n)
"""


# A registry one level down: a subclass's __init_subclass__ calls no super, so autoreg's would
# not run for the classes deriving from it once Scaled is autoreg's.
REGISTRY_BELOW = """\
from .m import Scaled

LAYERS = {}


class Registered(Scaled):
    def __init_subclass__(cls, **kwargs):
        LAYERS[cls.__name__] = cls


class Doubled(Registered):
    def forward(self, x):
        return 2 * super().forward(x)
"""


@pytest.mark.parametrize(
    ("variants", "listed"),
    [
        pytest.param(
            MIGRATED,
            "its subclass Biased puts autoreg's mixin before it in its bases, an order Python "
            "refuses once Scaled is autoreg's (TypeError: no consistent method resolution order)",
            id="mixin-first-below",
        ),
        pytest.param(
            REGISTRY_BELOW,
            "its subclass Registered's __init_subclass__ does not call "
            "super().__init_subclass__(): once Scaled is autoreg's, autoreg would not see the "
            "subclasses of Registered, which would raise ClassDefinitionError when built",
            id="init-subclass-below",
        ),
    ],
)
def test_a_class_a_subclass_of_yours_would_break_on_is_listed_not_made_autoregs(
    project: Project, capsys: pytest.CaptureFixture[str], variants: str, listed: str
) -> None:
    """Before, Scaled became autoreg.Module, and then: a subclass that already puts the mixin
    first no longer imported (TypeError: Cannot create a consistent method resolution order);
    one whose __init_subclass__ calls no super hid its own subclasses, and building Doubled
    raised ClassDefinitionError (autoreg never saw its class statement)."""
    project.write("m", SCALED)
    project.write("variants", variants)
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--write")
    assert status == 1
    assert project.read("m") == SCALED
    assert f"{project.name}/m.py:5: Scaled: {listed}" in err


# Subclasses, in a file the factory may or may not import, that make hasattr(self, "scale")
# true before Scaled.__init__ stores it: register_buffer there raises KeyError.
HIDING = {
    "class-value": """\
from .m import Scaled


class Unscaled(Scaled):
    scale = None
""",
    "cached-property": """\
import functools

import torch

from .m import Scaled


class Lazy(Scaled):
    @functools.cached_property
    def scale(self):
        return torch.full((3,), 2.0)
""",
    "getattr": """\
from .m import Scaled


class Configurable(Scaled):
    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return None
""",
}

HIDDEN_BY = {
    "class-value": "in its subclass Unscaled, 'scale' is defined on the class (a class-level",
    "cached-property": "in its subclass Lazy, 'scale' is defined on the class (a class-level",
    "getattr": "Configurable's own __getattr__ may answer for scale",
}


@pytest.mark.parametrize("loaded", [False, True], ids=["unloaded", "loaded"])
@pytest.mark.parametrize("variant", sorted(HIDING))
def test_a_name_a_subclass_defines_on_the_class_or_answers_for_is_never_registered(
    project: Project, capsys: pytest.CaptureFixture[str], variant: str, loaded: bool
) -> None:
    """Before: register_buffer("scale", ...) in Scaled.__init__, and building the subclass
    raised KeyError ("attribute 'scale' already exists")."""
    source = SCALED + ("\nfrom . import variants  # noqa: E402, F401\n" if loaded else "")
    project.write("m", source)
    project.write("variants", HIDING[variant])
    status, out, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer")
    assert status == 1
    assert "register_buffer" not in out
    assert f"{project.name}/m.py:9: Scaled.scale: {HIDDEN_BY[variant]}" in err


# A class decorator that returns a subclass and gives it the decorated class's __name__ (as
# StyleGAN's persistence.persistent_class does): the run's class is the decorator's.
DECORATED = """\
import numpy as np
import torch
from torch import nn


def persistent_class(orig_class):
    class Decorator(orig_class):
        pass

    Decorator.__name__ = orig_class.__name__
    return Decorator


@persistent_class
class Input(nn.Module):
    def __init__(self, size=4):
        super().__init__()
        self.size = np.broadcast_to(np.asarray(size, dtype=np.float32), [2])
        self.proj = nn.Linear(2, 3)

    def forward(self, w):
        return self.proj(torch.zeros(int(self.size[0]), 2)) + w.mean()


def build():
    return Input(), (torch.ones(2, 3),)
"""


def test_a_decorated_class_is_named_as_the_audit_names_it(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: listed as Decorator.size, the decorator's class, where the audit says Input."""
    project.write("m", DECORATED)
    status, _, err = project.fix(capsys, f"{project.name}.m:build")
    assert status == 1
    assert f"{project.name}/m.py:18: Input.size: " in err
    assert "Decorator" not in err


# Another file's own class of the same name, migrated in place there: its ``Scaled`` base is that
# file's class, not the one fix edits.
SAME_NAME_ELSEWHERE = """\
import autoreg
from torch import nn


class Scaled(nn.Module):
    pass


class Scaled(autoreg.AutoRegisterMixin, Scaled):  # noqa: F811 - migrated in place
    pass
"""


def test_a_same_named_class_migrated_in_place_in_another_file_holds_nothing_back(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """A class of another file with the same name, whose own ``Scaled`` derives from that file's
    class: no reason to hold this one back. The check read every class statement whose base was
    named ``Scaled`` as a subclass, and listed the class (the repository's own docs example,
    beside a test file migrating a ``Net`` in place)."""
    project.write("m", SCALED)
    project.write("elsewhere", SAME_NAME_ELSEWHERE)
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--write")
    assert "class Scaled(autoreg.Module):" in project.read("m"), err
    assert status == 0, err
    project.load("elsewhere")  # still imports


DICT_READS = """\
import torch
from torch import nn


class Masked(nn.Module):
    def __init__(self, n=3):
        super().__init__()
        self.lin = nn.Linear(n, n)
        self.mask = torch.full((n,), 2.0)
        self.shift = torch.ones(n)

    def forward(self, x):
        return self.lin(x) * {read} + self.shift


def build():
    return Masked(), (torch.ones(2, 3),)
"""


@pytest.mark.parametrize(
    "read",
    [
        'self.__dict__["mask"]',
        'vars(self)["mask"]',
        'vars(self).get("mask", 1.0)',
        '(self.__dict__["mask"] if "mask" in self.__dict__ else 1.0)',
    ],
)
@pytest.mark.parametrize("style", ["buffer", "base"])
def test_a_name_read_through_the_instances_dict_is_never_made_a_buffer(
    project: Project, capsys: pytest.CaptureFixture[str], read: str, style: str
) -> None:
    """A buffer lives in ``_buffers``, not in the instance's ``__dict__``. Before: ``mask``
    became a buffer in both styles and fix said "now clean"; the forward then raised KeyError,
    or silently multiplied by 1.0 in place of the mask. The name is listed, the others are
    rewritten."""
    project.write("m", DICT_READS.format(read=read))
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--style", style, "--write")
    assert status == 1
    assert "Masked.mask: Masked reads it through the instance's __dict__" in err
    model, inputs = project.load().build()
    assert "mask" in vars(model)
    assert "shift" not in vars(model)  # a buffer now
    expected = model.lin(inputs[0]) * 2.0 + 1.0
    torch.testing.assert_close(model(*inputs), expected)


# A subclass, in a file nothing imports, that names the class by the package's re-export.
REEXPORTED = {
    "from-package": """\
from {package} import Layer


class Quarter(Layer):
    def __init__(self, n=3):
        super().__init__(n)
        self.scale = 0.25
""",
    "package-attribute": """\
import {package}


class Quarter({package}.Layer):
    def __init__(self, n=3):
        super().__init__(n)
        self.scale = 0.25
""",
}


@pytest.mark.parametrize("spelling", sorted(REEXPORTED))
def test_a_subclass_naming_the_class_by_a_package_reexport_holds_the_name_back(
    project: Project, capsys: pytest.CaptureFixture[str], spelling: str
) -> None:
    """``pkg/__init__.py`` has ``from .m import Scaled as Layer``. Before: register_buffer in
    Scaled, and Quarter() raised TypeError (a float stored over the buffer): an alias was known
    only in the file that made it."""
    project.write("m", SCALED)
    project.write("__init__", "from .m import Scaled as Layer\n")
    (project.root / "contrib.py").write_text(REEXPORTED[spelling].format(package=project.name))
    status, out, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer")
    assert status == 1
    assert "register_buffer" not in out
    assert f"{project.name}/m.py:9: Scaled.scale: its subclass Quarter stores it too" in err


# Another file's own class of the same name, and a subclass of it that stores a float.
OTHER_SCALED = """\
from torch import nn


class Scaled(nn.Module):
    pass


class Half(Scaled):
    def __init__(self):
        super().__init__()
        self.scale = 0.5
"""


def test_a_subclass_of_a_same_named_class_elsewhere_holds_nothing_back(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """A base is read as its file names it: ``Half``'s ``Scaled`` is its own file's class, not
    the one fix edits. Before: classes were matched by name alone, and ``scale`` was listed."""
    project.write("m", SCALED)
    project.write("other", OTHER_SCALED)
    status, _, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer", "--write")
    assert 'self.register_buffer("scale", torch.ones(n), persistent=False)' in project.read("m")
    assert status == 0, err
    assert project.load("other").Half().scale == 0.5


# Subclasses made by type(), in a file nothing imports, whose __init__ stores a float.
TYPE_MADE = {
    "factory": """\
from .m import Scaled


def _fixed(value):
    def __init__(self, n=3):
        Scaled.__init__(self, n)
        self.scale = value

    return __init__


PRESETS = {{name: type(name, (Scaled,), {{"__init__": _fixed(v)}}) for name, v in {presets}}}
""",
    "function": """\
from .m import Scaled


def _init(self, n=3):
    Scaled.__init__(self, n)
    self.scale = 0.5


Half = type("Half", (Scaled,), {{"__init__": _init}})
""",
    "unread-namespace": """\
from . import m

NAMESPACE = dict(__init__=lambda self: setattr(self, "scale", 0.5))
Half = type("Half", (m.Scaled,), NAMESPACE)
""",
}

TYPE_MADE_NAMES = {
    "factory": "type(name, ...)",
    "function": "Half",
    "unread-namespace": "Half",
}


@pytest.mark.parametrize("variant", sorted(TYPE_MADE))
def test_a_subclass_made_by_type_holds_the_name_back(
    project: Project, capsys: pytest.CaptureFixture[str], variant: str
) -> None:
    """Before: only class statements were read, Scaled got register_buffer, and the class
    type() made raised TypeError when built (a float stored over the buffer)."""
    project.write("m", SCALED)
    project.write("variants", TYPE_MADE[variant].format(presets='[("Half", 0.5)]'))
    status, out, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer")
    assert status == 1
    assert "register_buffer" not in out
    subclass = TYPE_MADE_NAMES[variant]
    assert f"{project.name}/m.py:9: Scaled.scale: its subclass {subclass} stores it too" in err


# State forward stores, and a subclass that asks whether it exists yet.
CELL = """\
import torch
from torch import nn


class Cell(nn.Module):
    def __init__(self, n=3):
        super().__init__()
        self.lin = nn.Linear(n, n)

    def forward(self, x):
        y = torch.tanh(self.lin(x))
        self.last = y.detach()
        return y


def build():
    return Cell(), (torch.ones(2, 3),)
"""

SMOOTH_CELL = """\
from .m import Cell


class SmoothCell(Cell):
    def forward(self, x):
        if hasattr(self, "last"):  # from the second step on
            x = x + self.last
        return super().forward(x)
"""


@pytest.mark.parametrize("loaded", [False, True], ids=["unloaded", "loaded"])
def test_state_a_subclass_probes_is_not_registered_as_none(
    project: Project, capsys: pytest.CaptureFixture[str], loaded: bool
) -> None:
    """Before: register_buffer("last", None) in Cell.__init__, and SmoothCell's first forward
    found the name and added None (TypeError): only the class edited was read for probes."""
    project.write("m", CELL + ("\nfrom . import smooth  # noqa: E402, F401\n" if loaded else ""))
    project.write("smooth", SMOOTH_CELL)
    status, out, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer")
    assert status == 1
    assert "register_buffer" not in out
    assert (
        f"{project.name}/m.py:12: Cell.last: first stored at run time, and its subclass "
        "SmoothCell asks whether it exists"
    ) in err


# The value stored comes from a method, which a subclass in a file nothing imports overrides.
MAKE_SCALE = "    def make_scale(self, n):\n        return torch.full((n,), 0.5)\n\n"
GATE = SCALED.replace("self.scale = torch.ones(n)", "self.scale = self.make_scale(n)").replace(
    "    def forward(self, x):", MAKE_SCALE + "    def forward(self, x):"
)

SCALAR_GATE = """\
from .m import Scaled


class ScalarGate(Scaled):
    def make_scale(self, n):
        return 0.5  # a plain number broadcasts just as well
"""


def test_a_subclass_overriding_the_method_whose_result_is_stored_holds_the_name_back(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: register_buffer("scale", self.make_scale(n)) in Scaled, and ScalarGate() raised
    TypeError: only an override in the store's own file was read."""
    assert "self.scale = self.make_scale(n)" in GATE
    project.write("m", GATE)
    project.write("variants", SCALAR_GATE)
    status, out, err = project.fix(capsys, f"{project.name}.m:build", "--style", "buffer")
    assert status == 1
    assert "register_buffer" not in out
    assert f"{project.name}/m.py:9: Scaled.scale: its subclass ScalarGate stores it too" in err
