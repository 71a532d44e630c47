"""Every link of README.md, CONTRIBUTING.md, CHANGELOG.md and docs/ works in both views: in the
repository (GitHub renders each file from its own folder) and on the documentation site, built
here with mkdocs and browsed from the file system. The checker is ``links.py``; docs/hooks.py
maps links written for the repository onto the site.

A link to a file outside docs/ is written as the repository resolves it (``../examples/net.py``
from docs/audits.md); the site has the file under the same path.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .links import Broken, check_repository_view, check_site, github_slugs, markdown_links
from .pages import DOCS, ROOT, pages
from .sources import source_files

LINKED_PAGES = [*pages(), ROOT / "CHANGELOG.md"]


def _sources() -> set[str]:
    files = source_files()
    if files is None:  # an unpacked sdist: its tree is the sources
        return {p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*") if p.is_file()}
    return set(files)


def test_every_link_works_in_the_repository_view() -> None:
    broken = check_repository_view(ROOT, LINKED_PAGES, _sources())
    assert [str(b) for b in broken] == []


@pytest.mark.parametrize(
    ("markdown", "broken"),
    [
        pytest.param("[a](docs/nowhere.md)", ["no such file"], id="missing-file"),
        pytest.param("[a](docs/contract.md#nowhere)", ["no heading #nowhere"], id="missing-anchor"),
        pytest.param("[a](#nowhere)", ["no heading #nowhere"], id="missing-own-anchor"),
        pytest.param("[a](../outside.md)", ["outside the repository"], id="outside"),
        pytest.param("[a](/docs/contract.md)", ["absolute"], id="absolute"),
        pytest.param("[a][r]\n\n[r]: docs/gone.md", ["no such file"], id="reference"),
        pytest.param('<a href="docs/gone.md">a</a>', ["no such file"], id="html"),
        pytest.param("[a](docs/contract.md#the-table) [b](examples/)", [], id="fine"),
        pytest.param("`[a](docs/gone.md)`\n```\n[b](gone.md)\n```", [], id="code-is-no-link"),
        pytest.param("[a](https://example.org/gone)", [], id="external-not-followed"),
    ],
)
def test_the_repository_checker_finds_what_github_cannot_follow(
    tmp_path: Path, markdown: str, broken: list[str]
) -> None:
    page = tmp_path / "PAGE.md"
    page.write_text(f"# Page\n\n{markdown}\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "contract.md").write_text("# The contract\n\n## The table\n")
    sources = {"PAGE.md", "docs/contract.md", "examples/net.py"}
    found = check_repository_view(tmp_path, [page], sources)
    assert len(found) == len(broken), found
    assert all(why in b.why for b, why in zip(found, broken, strict=True)), found


def test_github_slugs_of_headings_with_code_links_and_duplicates() -> None:
    markdown = (
        "# Whose assignment it is (row 4)\n## `AUTOREG_MODE`\n## What [it](x.md) reports, and"
        " what it does not\n## Step 0: let `autoreg fix` write it\n## Notes\n## Notes\n"
        "```\n# not a heading\n```\n"
    )
    assert github_slugs(markdown) == {
        "whose-assignment-it-is-row-4",
        "autoreg_mode",
        "what-it-reports-and-what-it-does-not",
        "step-0-let-autoreg-fix-write-it",
        "notes",
        "notes-1",
    }
    assert markdown_links("see [a](b.md#c) and ![i](img.png) `[x](y)`") == ["b.md#c", "img.png"]


# --- the site ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The documentation site, built as `nox -s docs` builds it (strict), in a temporary folder."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return out


@pytest.mark.slow
def test_every_link_of_the_site_ends_at_a_file(site: Path) -> None:
    assert [str(b) for b in check_site(site)] == []


@pytest.mark.slow
def test_the_site_browses_from_a_file_system(site: Path) -> None:
    for page in DOCS.glob("*.md"):
        assert (site / page.with_suffix(".html").name).is_file(), page.name
        assert not (site / page.stem / "index.html").exists(), page.name
    assert (site / "examples" / "net.py").is_file()  # a file the pages link to
    assert (site / "benchmarks" / "results" / "cpu-2026-12-03.html").is_file()
    # search from the file system: the index inlined in a script (the offline plugin)
    assert (site / "search" / "search_index.js").is_file()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("page", "source", "heading"),
    [
        pytest.param("changelog", "CHANGELOG.md", "Unreleased", id="changelog"),
        pytest.param("contributing", "CONTRIBUTING.md", "Release checklist", id="contributing"),
    ],
)
def test_a_page_that_stands_for_a_repository_file_shows_it(
    site: Path, page: str, source: str, heading: str
) -> None:
    stand_in = (DOCS / f"{page}.md").read_text()
    assert stand_in.startswith(f"<!-- site-page: ../{source} -->\n")
    assert f"](../{source})" in stand_in  # in the repository view: a link to the file
    assert f"## {heading}" in (ROOT / source).read_text()
    shown = (site / f"{page}.html").read_text()
    assert f">{heading}<" in shown  # on the site: the file itself
    assert "<!-- site-page" not in shown  # the pointer is not what the site shows


@pytest.mark.parametrize(
    ("html", "why"),
    [
        pytest.param('<a href="folder/">x</a>', "a folder", id="folder"),
        pytest.param('<a href="gone.html">x</a>', "no such file", id="missing"),
        pytest.param('<a href="other.html#gone">x</a>', "no id #gone", id="anchor"),
        pytest.param('<a href="#gone">x</a>', "no id #gone", id="own-anchor"),
        pytest.param('<a href="other.html#there">x</a> <a href="https://x.org">', "", id="fine"),
    ],
)
def test_the_site_checker_finds_what_a_browser_cannot_open(
    tmp_path: Path, html: str, why: str
) -> None:
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "index.html").write_text("<p>a folder</p>")
    (tmp_path / "other.html").write_text('<h2 id="there">There</h2>')
    (tmp_path / "page.html").write_text(html)
    found: list[Broken] = check_site(tmp_path)
    assert [why in b.why for b in found] == ([True] if why else []), found
