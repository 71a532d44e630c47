"""The README's Python examples run as written (on the meta device when there is no GPU)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

import autoreg

README = Path(__file__).resolve().parents[2] / "README.md"
DEVICE = "cuda" if torch.cuda.is_available() else "meta"


def python_blocks() -> list[str]:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    return [
        block.replace(".cuda()", f'.to("{DEVICE}")').replace('"cuda"', f'"{DEVICE}"')
        for block in blocks
    ]


def run(block: str) -> dict[str, object]:
    namespace: dict[str, object] = {"__name__": "readme"}
    # dont_inherit: run the examples as a user would, without this file's __future__ import.
    exec(compile(block, str(README), "exec", dont_inherit=True), namespace)
    return namespace


def test_the_readme_has_the_examples_this_file_checks() -> None:
    assert len(python_blocks()) >= 5


def test_the_first_example_is_the_bug() -> None:
    with pytest.raises(RuntimeError, match=r"device"):
        run(python_blocks()[0])


def test_changing_the_base_class_fixes_it() -> None:
    bug, fix = python_blocks()[:2]
    fixed = bug.split("model = ")[0].replace("(nn.Module)", "(autoreg.Module)")
    namespace = run(f"import autoreg\n{fixed}\nmodel = Attention(8).to('{DEVICE}')\n")
    model = namespace["model"]
    assert model.mask.device.type == DEVICE  # type: ignore[attr-defined]
    assert model.state_dict().keys() == {"proj.weight", "proj.bias"}  # type: ignore[attr-defined]
    assert "class Attention(autoreg.Module):  # was: nn.Module" in fix


@pytest.mark.parametrize("index", range(2, 4), ids=["usage", "options"])
def test_the_other_examples_run(index: int) -> None:
    run(python_blocks()[index])


def test_the_options_example_does_what_its_comments_say() -> None:
    namespace = run(python_blocks()[3])
    stats = namespace["RunningStats"]()  # type: ignore[operator]
    assert stats.state_dict().keys() == {"mean"}
    declarations = namespace["Rotary"].__autoreg__.declarations  # type: ignore[attr-defined]
    assert {name: d.value for name, d in declarations.items()} == {
        "inv_freq": "non-persistent buffer",
        "step": "persistent buffer",
        "cache": "buffer",
        "lookup": "plain attribute",
    }


def test_the_meta_device_example_recomputes_the_derived_buffer() -> None:
    (block,) = [
        block
        for block in python_blocks()
        if "autoreg.reset_buffers(model)" in block and 'torch.device("meta")' in block
    ]
    model = run(block)["model"]
    assert model.inv_freq.device.type == "cpu"  # type: ignore[attr-defined]


def test_the_strict_example_raises_on_the_undeclared_tensor() -> None:
    namespace = run("import torch\nimport autoreg\n" + python_blocks()[4])
    with pytest.raises(autoreg.UnregisteredTensorError, match=r"Encoder\.table"):
        namespace["Encoder"]()  # type: ignore[operator]
