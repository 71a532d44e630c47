"""Every ```python block of the README and the docs runs as written, or says why it cannot.

Blocks run in page order, in one namespace per page (a later block may use what an earlier one
defined), on a CPU, from a temporary directory. The markers are in ``pages.py`` and
CONTRIBUTING.md; this file enforces them: a block with a marker it does not know fails, so does a
``not-run`` without a reason, and an unmarked block always runs.
"""

from __future__ import annotations

import builtins
import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import autoreg

from .pages import MARKERS, QUOTABLE, ROOT, Block, blocks, matches, page_id, pages

PYTHON_BLOCKS = [block for page in pages() for block in blocks(page, "python")]
RUN = [block for block in PYTHON_BLOCKS if block.quoted_file is None and block.marker != "not-run"]
QUOTES = [block for block in PYTHON_BLOCKS if block.quoted_file is not None]
REQUIRE_INTEGRATIONS = os.environ.get("AUTOREG_REQUIRE_INTEGRATIONS") == "1"


@dataclass
class PageRun:
    """One page's namespace and how far its blocks have run."""

    directory: Path
    namespace: dict[str, object] = field(default_factory=lambda: {"__name__": "__docs__"})
    done: dict[int, str] = field(default_factory=dict)  # block line -> "ok" / "skipped" / error


@pytest.fixture(scope="session")
def page_runs() -> dict[Path, PageRun]:
    """Each page's run, shared by the tests of its blocks (they run in page order)."""
    return {}


def missing_modules(block: Block) -> list[str]:
    if block.marker != "requires":
        return []
    names = [name.strip() for name in block.argument.split(",")]
    return [name for name in names if importlib.util.find_spec(name) is None]


def exception_class(name: str, namespace: dict[str, object]) -> type[BaseException]:
    """The exception a ``raises:`` marker names: a builtin, autoreg's, or the page's own."""
    public = {name: getattr(autoreg, name) for name in autoreg.__all__}  # imported when used
    for place in (vars(builtins), public, namespace):
        found = place.get(name)
        if isinstance(found, type) and issubclass(found, BaseException):
            return found
    raise AssertionError(f"no builtin, autoreg or page exception is called {name}")


def execute(block: Block, run: PageRun) -> None:
    """Run ``block`` in its page's namespace, as its marker says; raise what the check finds."""
    code = compile(block.body, f"{page_id(block.page)}:{block.line}", "exec", dont_inherit=True)
    if block.marker != "raises":
        exec(code, run.namespace)
        return
    with pytest.raises(exception_class(block.argument, run.namespace)) as raised:
        exec(code, run.namespace)
    if block.message is not None:
        assert matches(block.message.splitlines(), str(raised.value)), (
            f"{block.id}: the message of {block.argument} differs from the text block after it:\n"
            f"{raised.value}"
        )


def run_up_to(block: Block, runs: dict[Path, PageRun], tmp: Path, chdir: pytest.MonkeyPatch) -> str:
    """Run the page's blocks before ``block`` (once per session), then ``block``; its outcome."""
    run = runs.setdefault(block.page, PageRun(directory=tmp / page_id(block.page)))
    run.directory.mkdir(parents=True, exist_ok=True)
    chdir.chdir(run.directory)
    for earlier in [b for b in RUN if b.page == block.page and b.line <= block.line]:
        if earlier.line in run.done:
            continue
        if missing_modules(earlier):
            run.done[earlier.line] = "skipped"
            continue
        try:
            execute(earlier, run)
        except BaseException as error:
            run.done[earlier.line] = f"{type(error).__name__}: {error}"
            raise
        run.done[earlier.line] = "ok"
    return run.done[block.line]


@pytest.mark.parametrize("block", RUN, ids=[block.id for block in RUN])
def test_each_python_block_runs(
    block: Block,
    page_runs: dict[Path, PageRun],
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    missing = missing_modules(block)
    if missing and REQUIRE_INTEGRATIONS:
        pytest.fail(f"{block.id} requires {', '.join(missing)} (AUTOREG_REQUIRE_INTEGRATIONS=1)")
    if missing:
        pytest.skip(f"{block.id} requires {', '.join(missing)}, which cannot be imported")
    tmp = tmp_path_factory.getbasetemp() / "docs-pages"
    earlier_failed = [
        f"{page_id(block.page)}:{line}: {outcome}"
        for line, outcome in page_runs.get(block.page, PageRun(tmp)).done.items()
        if line < block.line and outcome not in ("ok", "skipped")
    ]
    assert not earlier_failed, f"an earlier block of the page failed: {earlier_failed}"
    assert run_up_to(block, page_runs, tmp, monkeypatch) == "ok"


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=[block.id for block in PYTHON_BLOCKS])
def test_each_python_block_is_run_quoted_or_says_why_not(block: Block) -> None:
    if block.quoted_file is not None:
        assert block.marker is None, f"{block.id}: a quote is checked, not run; drop the marker"
        return
    assert block.marker in (None, *MARKERS), (
        f"{block.id}: unknown marker {block.comment!r} right above the block; "
        f"the markers are {', '.join(MARKERS)} (CONTRIBUTING.md, 'Documentation')"
    )
    if block.marker is not None:
        assert block.argument, f"{block.id}: {block.comment!r} needs its argument (a reason)"
    if block.marker == "not-run":
        assert len(block.argument.split()) >= 3, f"{block.id}: say why it cannot run on a CPU"


@pytest.mark.parametrize("block", QUOTES, ids=[block.id for block in QUOTES])
def test_each_quoted_file_excerpt_is_in_the_file(block: Block) -> None:
    path = block.quoted_file
    assert path is not None
    assert path.startswith(QUOTABLE), f"{block.id} quotes {path}, which no test runs"
    excerpt = block.body.partition("\n")[2]
    assert excerpt in (ROOT / path).read_text()


def test_the_pages_have_the_blocks_this_file_runs() -> None:
    """A change to the parser that finds no blocks must not pass silently."""
    assert len(RUN) >= 15
    assert {block.marker for block in PYTHON_BLOCKS} >= {None, "raises", "requires", "not-run"}
    assert len(QUOTES) >= 4
