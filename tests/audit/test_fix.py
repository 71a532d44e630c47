"""``autoreg fix``: the audit's findings rewritten with LibCST, in both styles.

The fixture project (``fix_fixture/``) is copied to a temporary directory and rewritten there;
the rewritten model is then built and checked in a fresh process. The exact diffs are asserted:
they show every line the rewrite touches, and that it touches no other.
"""

from __future__ import annotations

import difflib
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autoreg._cli import main

FIXTURE = Path(__file__).parent / "fix_fixture"
TARGET = "fixproj.model:build_with_inputs"


# The exact diffs, one file per style: every line each style touches, and no other.
EXPECTED = Path(__file__).parent / "fix_expected"
DIFFS = {style: (EXPECTED / f"{style}.diff").read_text() for style in ("base", "buffer")}

_HEADER = "{count} left for you to edit (autoreg fix does not guess these):\n"
_BLOCKS = """\
  fixproj/model.py:{line}: Model.blocks: a plain list of modules: .to(), state_dict() and \
parameters() never see them, with or without autoreg (--style buffer writes this edit)
      self.blocks = nn.ModuleList(...): their parameters and buffers then move, train and join \
state_dict()
"""
_ANCHORS = """\
  fixproj/model.py:51: Model.anchors: a list of tensors, and plain PyTorch has no buffer container
      one buffer per tensor (self.register_buffer("anchors_0", t, persistent=False), ...), or \
keep autoreg: autoreg.BufferList / autoreg.BufferDict, or --style base
"""
_SETATTR = """\
  fixproj/model.py:53: Model.freq_0, Model.freq_1: stored through setattr(), under a computed name
      self.register_buffer(name, value, persistent=False) in place of setattr(self, name, value)
"""
_OFFSET = """\
  fixproj/model.py:{line}: Model.offset: cannot be a buffer: 'offset' is defined on the class \
(a class-level NoneType) and hides any buffer of that name
      rename the attribute (or remove a class-level value of your own), then run autoreg fix again
"""
_TEMPERATURE = """\
  fixproj/model.py:{line}: Model.temperature: requires grad: a weight to train wants \
nn.Parameter, a constant does not, and only you know which
      self.temperature = nn.Parameter(...) if it is a weight to train; if not, create it with \
requires_grad=False (or .detach() it)
"""


def hand_list(style: str, shift: int = 0) -> str:
    """What ``fix`` lists in ``style``; ``shift``: lines added above them (``import autoreg``)."""
    if style == "base":
        entries = [_BLOCKS, _OFFSET, _TEMPERATURE]
        lines = [50, 54, 55]
    else:
        entries = [_ANCHORS, _SETATTR, _OFFSET, _TEMPERATURE]
        lines = [51, 53, 54, 55]
    text = "".join(e.format(line=n + shift) for e, n in zip(entries, lines, strict=True))
    return _HEADER.format(count=len(entries)) + text


# What .to() still leaves behind once each style is applied: the hand edits, and nothing else.
LEFT = {
    "base": {
        *(f"blocks[{i}].{name}" for i in (0, 1) for name in ("weight", "bias", "gain")),
        "offset",
        "temperature",
    },
    "buffer": {
        "anchors[0]",
        "anchors[1]",
        "freq_0",
        "freq_1",
        "offset",
        "temperature",
    },
}

# Built in a fresh process: the model's state_dict keys, the forward audit, what .to() leaves
# behind after one step, and which floating tensors .double() does not reach.
CHECK = """\
import json
import os

import torch

import autoreg
from autoreg._walk import iter_tensors
from fixproj.model import build_with_inputs

model, (x,) = build_with_inputs()
keys = sorted(model.state_dict())
forward = sorted(
    [f.kind, os.path.relpath(f.filename), f.lineno, f.attribute]
    for f in autoreg.audit_forward(model, x)
)
model(x)  # stores the recurrent state
model.double()
left = sorted(f.path for f in autoreg.find_unregistered(model))
reached = dict(model.named_parameters())
reached.update(model.named_buffers())
for prefix, module in model.named_modules():
    for name, value in vars(module).items():
        if not name.startswith("_"):
            base = f"{prefix}.{name}" if prefix else name
            reached.update(iter_tensors(value, base))
not_double = sorted(
    path for path, t in reached.items() if t.is_floating_point() and t.dtype != torch.float64
)
steps = "raised"
try:
    model(x.double())
    steps = str(model.recurrent.h.dtype)
except RuntimeError:
    pass
print(json.dumps({"keys": keys, "forward": forward, "left": left, "not_double": not_double,
                  "h": str(model.recurrent.h.dtype), "step": steps}))
"""


def _forget(package: str) -> None:
    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
        del sys.modules[name]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A copy of the fixture project, the working directory, importable."""
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root)
    monkeypatch.chdir(root)
    monkeypatch.syspath_prepend(str(root))
    _forget("fixproj")
    yield root
    _forget("fixproj")


def fix(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``autoreg fix *args`` in this process, on freshly imported code."""
    _forget("fixproj")
    try:
        status = main(["fix", *args])
    finally:
        _forget("fixproj")
    out, err = capsys.readouterr()
    return status, out, err


def fresh(directory: Path, code: str) -> Any:
    """Run ``code`` in a fresh Python in ``directory``; the JSON it prints."""
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def sources(root: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((root / "fixproj").glob("*.py"))}


@pytest.fixture(scope="module")
def before(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The fixture model as written, checked in a fresh process."""
    root = tmp_path_factory.mktemp("original") / "project"
    shutil.copytree(FIXTURE, root)
    return fresh(root, CHECK)


@pytest.mark.slow
def test_the_fixture_leaves_tensors_behind_before_the_fix(before: Any) -> None:
    """The checks below can fail: on the code as written, they see every stray."""
    assert set(before["left"]) == LEFT["base"] | LEFT["buffer"] | {
        "rotary.inv_freq",
        "causal.mask",
        "head.bias_table",
        "recurrent.h",
    }
    assert ["stored", "fixproj/model.py", 21, "h"] in before["forward"]
    assert before["h"] == "torch.float32"


@pytest.mark.parametrize("style", ["base", "buffer"])
def test_diff_only_prints_the_exact_diff_and_writes_nothing(
    project: Path, capsys: pytest.CaptureFixture[str], style: str
) -> None:
    original = sources(project)
    status, out, err = fix(capsys, TARGET, "--style", style)
    assert (status, out) == (1, DIFFS[style])
    assert hand_list(style) in err
    assert err.endswith("autoreg fix: 3 files would change (the diff above); --write applies it.\n")
    assert sources(project) == original


@pytest.mark.slow
@pytest.mark.parametrize("style", ["base", "buffer"])
def test_write_then_a_fresh_process_finds_only_what_is_listed(
    project: Path, capsys: pytest.CaptureFixture[str], style: str, before: Any
) -> None:
    original = sources(project)
    status, out, err = fix(capsys, TARGET, "--style", style, "--write")
    # What was written is exactly the diff that diff-only mode prints.
    written = "".join(
        "".join(
            difflib.unified_diff(
                original[name].splitlines(keepends=True),
                text.splitlines(keepends=True),
                f"a/fixproj/{name}",
                f"b/fixproj/{name}",
            )
        )
        for name, text in sources(project).items()
    )
    assert written == DIFFS[style]
    # Listed at the lines of the rewritten files; the re-audit (fresh process) agrees.
    assert hand_list(style, shift=1 if style == "base" else 0) in err
    assert f"re-auditing in a fresh process: python -m autoreg audit {TARGET} --forward\n" in err
    assert err.endswith(
        f"autoreg fix: {TARGET} still leaves tensors behind (the audit above); "
        "edit them as listed.\n"
    )
    assert status == 1
    rows = out.split("\n\n")[0].splitlines()[1:]  # the re-audit's table; a wrapped FIX indents
    assert {row.split()[0] for row in rows if not row.startswith(" ")} == LEFT[style]

    after = fresh(project, CHECK)
    assert set(after["left"]) == LEFT[style]
    # Nothing the style can fix is left: no stored state, no stray but from listed attributes.
    assert all(kind in ("device", "dtype") for kind, *_ in after["forward"])
    assert after["h"] == "torch.float64"
    listed = {path for path in LEFT[style] if not path.startswith("blocks")}
    assert set(after["not_double"]) == listed
    if style == "base":
        assert after["keys"] == before["keys"]
        assert after["step"] == "raised"  # the listed plain list of modules stays float32
    else:
        gained = {f"blocks.{i}.{name}" for i in (0, 1) for name in ("weight", "bias")}
        assert set(after["keys"]) == set(before["keys"]) | gained
        assert after["step"] == "torch.float64"


@pytest.mark.slow
@pytest.mark.filterwarnings(
    r"ignore:Model\.temperature = Tensor.* is a leaf tensor that requires grad"
    ":autoreg.AutoRegisterWarning"
)
@pytest.mark.parametrize("style", ["base", "buffer"])
def test_a_second_run_changes_nothing(
    project: Path, capsys: pytest.CaptureFixture[str], style: str
) -> None:
    assert fix(capsys, TARGET, "--style", style, "--write")[0] == 1
    written = sources(project)
    status, out, err = fix(capsys, TARGET, "--style", style)
    assert (status, out) == (1, "")  # nothing to rewrite, but edits are left: as --write says
    assert hand_list(style, shift=1 if style == "base" else 0) in err
    assert err.endswith("autoreg fix: nothing to rewrite.\n")
    assert sources(project) == written


# --- exit statuses and usage ------------------------------------------------------------------


def test_exit_status_0_when_nothing_needs_changing(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert fix(capsys, "fixproj.model:clean") == (0, "", "autoreg fix: nothing to rewrite.\n")


def test_several_targets_are_one_plan(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = fix(capsys, "fixproj.model:clean", TARGET, TARGET)
    assert (status, out) == (1, DIFFS["base"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["fixproj.model:nope"], "module 'fixproj.model' has no attribute 'nope'"),
        (
            ["fixproj.model:make_head"],
            "fixproj.model:make_head() raised TypeError: make_head() missing 1 required "
            "positional argument: 'dim'",
        ),
        (["fixproj.model"], "'fixproj.model' is not a target: write package.module:factory"),
    ],
    ids=["missing-name", "factory-raises", "malformed"],
)
def test_exit_status_2_and_one_line_for_a_usage_error(
    project: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    status, out, err = fix(capsys, *args)
    assert (status, out) == (2, "")
    assert err.startswith(f"python -m autoreg fix: error: {message}")
    assert err.count("\n") == 1


def test_an_unknown_style_is_a_usage_error(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        fix(capsys, TARGET, "--style", "nope")
    assert exit_info.value.code == 2
    assert "argument --style: invalid choice: 'nope'" in capsys.readouterr().err


def test_files_outside_the_working_directory_are_listed_never_edited(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    original = sources(project)
    elsewhere = project / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    status, out, err = fix(capsys, TARGET)
    assert (status, out) == (1, "")  # nothing rewritten, everything left to edit
    assert sources(project) == original
    outside = f"defined outside {elsewhere} (autoreg fix edits only files under the current"
    refused = [line for line in err.splitlines() if outside in line]
    names = {name for line in refused for name in line.split(": ")[1].split(", ")}
    assert names == {
        "CausalMask.mask",
        "ScaledLinear.gain",
        "Rotary.inv_freq",
        "Recurrent.h",
        "Head.bias_table",
        "Model.anchors",
        "Model.freq_0",
        "Model.freq_1",
    }


# --- LibCST is the fix command's alone -----------------------------------------------------


@pytest.mark.slow
def test_a_missing_libcst_is_one_line_and_exit_status_2(project: Path) -> None:
    code = (
        "import sys; sys.modules['libcst'] = None\n"
        "from autoreg._cli import main\n"
        "sys.exit(main(['fix', 'fixproj.model:build']))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=project, capture_output=True, text=True, check=False
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "python -m autoreg fix: error: autoreg fix rewrites source with LibCST, which is not "
        'installed: pip install "torch-autoreg[fix]" (from a clone: pip install -e ".[fix]")\n'
    )


def test_importing_autoreg_and_its_command_line_does_not_import_libcst() -> None:
    code = "import sys, autoreg, autoreg._cli; print('libcst' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout == "False\n"


# --- a real file from an installed package ----------------------------------------------------

# transformers' Wav2Vec2BertRotaryPositionalEmbedding keeps the rotary table its forward
# computes in a plain attribute: after .double() (or .to("cuda")) it returns the stale one.
W2V = "wav2vec2_bert"
W2V_FACTORY = """\
import torch

from w2v.configuration_wav2vec2_bert import Wav2Vec2BertConfig
from w2v.modeling_wav2vec2_bert import Wav2Vec2BertModel


def build():
    config = Wav2Vec2BertConfig(
        hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
        feature_projection_input_dim=8, position_embeddings_type="rotary",
        conv_depthwise_kernel_size=3, add_adapter=False,
    )
    return Wav2Vec2BertModel(config).eval(), (torch.randn(1, 5, 8),)
"""
W2V_CHECK = """\
import json

from w2v.factory import build

model, (x,) = build()
model(x)
model.double()
table = model.encoder.embed_positions.cached_rotary_positional_embedding
print(json.dumps(str(table.dtype)))
"""
W2V_CHANGES = {
    "base": [
        "+import autoreg",
        "-class Wav2Vec2BertRotaryPositionalEmbedding(nn.Module):",
        "+class Wav2Vec2BertRotaryPositionalEmbedding(autoreg.Module):",
    ],
    "buffer": [
        "-        self.cached_rotary_positional_embedding = None",
        '+        self.register_buffer("cached_rotary_positional_embedding", None, '
        "persistent=False)",
    ],
}


@pytest.fixture(scope="module")
def w2v(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """transformers' wav2vec2_bert model and configuration files, copied into a package ``w2v``
    (their relative imports of transformers made absolute), with a factory."""
    transformers = pytest.importorskip("transformers")
    source = Path(transformers.__file__).parent / "models" / W2V
    modeling = (source / f"modeling_{W2V}.py").read_text()
    if "self.cached_rotary_positional_embedding = None" not in modeling:
        pytest.skip(f"this transformers ({transformers.__version__}) no longer keeps the table")
    root = tmp_path_factory.mktemp("third_party")
    package = root / "w2v"
    package.mkdir()
    for name in (f"modeling_{W2V}.py", f"configuration_{W2V}.py"):
        text = (source / name).read_text()
        text = text.replace("from ... import", "from transformers import")
        (package / name).write_text(text.replace("from ...", "from transformers."))
    (package / "__init__.py").write_text("")
    (package / "factory.py").write_text(W2V_FACTORY)
    assert fresh(root, W2V_CHECK) == "torch.float32"  # as written, .double() leaves it behind
    return root


@pytest.mark.slow
@pytest.mark.parametrize("style", ["base", "buffer"])
def test_a_real_transformers_file_is_fixed_and_audits_clean(
    w2v: Path, tmp_path: Path, style: str
) -> None:
    root = tmp_path / "project"
    shutil.copytree(w2v, root)
    modeling = root / "w2v" / f"modeling_{W2V}.py"
    original = modeling.read_text()
    command = [sys.executable, "-m", "autoreg", "fix", "w2v.factory:build", "--style", style]
    result = subprocess.run(
        [*command, "--write"], cwd=root, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.endswith(
        "autoreg fix: w2v.factory:build is now clean: .to() leaves nothing behind.\n"
    )
    diff = difflib.unified_diff(original.splitlines(), modeling.read_text().splitlines())
    changes = [line for line in diff if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert changes == W2V_CHANGES[style]
    assert fresh(root, W2V_CHECK) == "torch.float64"


# --- docs/fix.md shows what the tool prints --------------------------------------------------

PAGE = Path(__file__).resolve().parents[2] / "docs" / "fix.md"
DEMO = Path(__file__).parent / "fix_demo"


@pytest.mark.parametrize("style", ["base", "buffer"])
def test_the_docs_page_shows_what_fix_prints_on_its_example(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, style: str
) -> None:
    """tests/docs runs the page's console blocks as written; this checks the two diffs here too."""
    monkeypatch.chdir(DEMO)
    monkeypatch.syspath_prepend(str(DEMO))
    sys.modules.pop("demo", None)
    try:
        status, out, err = fix(capsys, "demo:build", "--style", style)
    finally:
        sys.modules.pop("demo", None)
    assert status == 1
    shown = "".join(line.rstrip() + "\n" for line in (out + err).splitlines())
    option = "--style buffer " if style == "buffer" else ""
    command = f"$ cd tests/audit/fix_demo && python -m autoreg fix {option}demo:build\n"
    assert f"{command}{shown}$ echo $?\n1\n" in PAGE.read_text()
