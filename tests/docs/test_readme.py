"""The README's first five minutes: the problem runs on a CPU, the one-line fix fixes it, the quick
start does what it says, every page of the docs is one link away, and the page stays short.

test_blocks.py runs every Python block of the README; this file checks what the blocks claim.
"""

from __future__ import annotations

import re

import pytest
import torch

from .pages import DOCS, PENDING, ROOT, blocks

README = ROOT / "README.md"
PYTHON = [block.body for block in blocks(README, "python")]
DIFFS = [block.body for block in blocks(README, "diff")]
LINKS = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text())


def run(code: str, namespace: dict[str, object] | None = None) -> dict[str, object]:
    namespace = {"__name__": "readme"} if namespace is None else namespace
    # dont_inherit: run the examples as a user would, without this file's __future__ import.
    exec(compile(code, str(README), "exec", dont_inherit=True), namespace)
    return namespace


def apply(diff: str, code: str) -> str:
    """``code`` with the lines the diff removes replaced by those it adds (a one-hunk diff)."""
    removed = [line[1:] for line in diff.splitlines() if line.startswith("-")]
    added = [line[1:] for line in diff.splitlines() if line.startswith("+")]
    head, _, tail = code.partition("\n".join(removed) + "\n")
    assert tail, f"the diff's removed lines are not in the example:\n{removed}"
    return head + "\n".join(added) + "\n" + tail


def test_the_first_example_is_the_bug_on_a_cpu_and_shows_its_error() -> None:
    with pytest.raises(RuntimeError, match=r"same dtype") as raised:
        run(PYTHON[0])
    assert f"# RuntimeError: {raised.value}" in PYTHON[0]


def test_the_diff_after_it_fixes_the_bug_and_keeps_the_checkpoint() -> None:
    (diff,) = DIFFS
    namespace = run(apply(diff, PYTHON[0]))
    model = namespace["model"]
    assert model.mask.dtype == torch.float64  # type: ignore[attr-defined]
    assert list(model.state_dict()) == ["proj.weight", "proj.bias"]  # type: ignore[attr-defined]


def test_the_quick_start_test_passes_and_can_fail() -> None:
    namespace = run(PYTHON[2], run(PYTHON[1]))
    test = namespace["test_the_model_moves_with_everything_it_uses"]
    test()  # type: ignore[operator]
    # The companion: the same test on the first example's model (a plain nn.Module) fails.
    bug = run(PYTHON[0].split("model = ")[0])
    namespace["Model"] = lambda: bug["Causal"](4)  # type: ignore[operator]
    with pytest.raises(AssertionError, match=r"mask"):
        test()  # type: ignore[operator]


def test_the_readme_says_how_to_install_before_it_is_published() -> None:
    text = README.read_text()
    assert "**not on PyPI yet**" in text
    assert "pip install -e ." in text
    for paragraph in text.split("\n\n"):
        if "pip install torch-autoreg" in paragraph:
            assert "Once it is published" in paragraph, paragraph


def test_every_page_of_the_docs_is_one_link_away() -> None:
    linked = {link for link in LINKS if link.startswith("docs/")}
    # changelog.md and contributing.md include CHANGELOG.md and CONTRIBUTING.md, linked as such.
    included = {"docs/changelog.md": "CHANGELOG.md", "docs/contributing.md": "CONTRIBUTING.md"}
    for page in sorted(DOCS.glob("*.md")):
        name = page.relative_to(ROOT).as_posix()
        if name == "docs/index.md":
            continue  # the site's home page: the README itself stands in for it
        assert included.get(name, name) in LINKS or name in linked, f"the README never links {name}"


def test_every_link_of_the_readme_exists() -> None:
    missing = [link for link in LINKS if "://" not in link and not (ROOT / link).exists()]
    assert set(missing) <= set(PENDING), missing


def test_the_readme_stays_short() -> None:
    assert len(README.read_text().splitlines()) <= 250
