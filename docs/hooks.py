"""mkdocs hook: a link written for the repository works on the site too.

Every link in README.md, CONTRIBUTING.md and docs/ is written as the repository view (GitHub)
resolves it, relative to the file's own folder: from docs/audits.md, ``../examples/net.py``; from
CONTRIBUTING.md, ``docs/contract.md``. On the site, ``docs/X.md`` is ``X.html``. This hook:

- adds to the site the repository files outside docs/ that the pages link to, under their
  repository paths (``examples/net.py``; a Markdown file such as ``benchmarks/results/*.md`` is
  rendered as a page);
- rewrites each link to a repository path into the site's path of that file;
- shows a repository file in place of the docs/ page that stands for it: a page whose first line
  is ``<!-- site-page: ../CHANGELOG.md -->`` is, in the repository view, a pointer to that file,
  and on the site the file itself; a link to the file goes to the page.

``mkdocs build --strict`` fails on a link to a file that does not exist; tests/docs/test_links.py
checks the links of both views.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files, InclusionLevel

ROOT = Path(__file__).resolve().parents[1]
DOCS = "docs"
STAND_IN = re.compile(r"<!-- site-page: (?P<path>\S+) -->\n")
# Fenced blocks and code spans, whose text is code, not links.
CODE = re.compile(
    r"^[ \t]*(?P<fence>`{3,}|~{3,})[^\n]*\n.*?^[ \t]*(?P=fence)[ \t]*$"
    r"|(?P<ticks>`+)[^`].*?(?<!`)(?P=ticks)(?!`)",
    re.MULTILINE | re.DOTALL,
)
LINK = re.compile(r"(?P<head>!?\[[^\]\n]*\]\()(?P<target>[^)\s]+)")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:|^//|^#|^/", re.IGNORECASE)

# Built by on_files: repository path -> site path, for the files outside docs/ on the site.
_site_paths: dict[str, str] = {}


def repository_links(markdown: str, folder: str) -> list[str]:
    """The repository paths the relative links of ``markdown`` point to (``folder``: where it
    lies), outside code."""
    found = []
    for match in _links(markdown):
        target = match.group("target").partition("#")[0]
        if target and not EXTERNAL.match(target):
            found.append(posixpath.normpath(posixpath.join(folder, target)))
    return found


def on_files(files: Files, config: Any) -> Files:
    _site_paths.clear()
    sources = [Path(f.abs_src_path) for f in files if f.src_uri.endswith(".md") and f.abs_src_path]
    for page in sources:
        text = page.read_text(encoding="utf-8")
        if stand_in := STAND_IN.match(text):
            folder = page.parent.relative_to(ROOT).as_posix()
            target = posixpath.normpath(posixpath.join(folder, stand_in.group("path")))
            _site_paths[target] = page.relative_to(ROOT / DOCS).as_posix()
    shared: set[str] = set()
    texts = [*sources, *(ROOT / path for path in _site_paths)]  # the pages, what stand-ins show
    for text in texts:
        folder = text.relative_to(ROOT).parent.as_posix()
        for path in repository_links(text.read_text(encoding="utf-8"), folder):
            if not path.startswith(("..", DOCS + "/")) and (ROOT / path).is_file():
                shared.add(path)
    for uri in sorted(shared - set(_site_paths)):
        _site_paths[uri] = uri
        if files.get_file_from_path(uri) is None:
            # NOT_IN_NAV: a file a page links to (a results page, an example), not a nav entry.
            files.append(
                File.generated(
                    config, uri, abs_src_path=str(ROOT / uri), inclusion=InclusionLevel.NOT_IN_NAV
                )
            )
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    source = Path(page.file.abs_src_path).resolve().relative_to(ROOT).as_posix()
    if stand_in := STAND_IN.match(markdown):
        source = posixpath.normpath(posixpath.join(posixpath.dirname(source), stand_in["path"]))
        markdown = (ROOT / source).read_text(encoding="utf-8")
    folder, here = posixpath.dirname(source), posixpath.dirname(page.file.src_uri)
    code = _code(markdown)

    def rewrite(match: re.Match[str]) -> str:
        if _in_code(match.start(), code):
            return match.group(0)
        target, hash_, anchor = match.group("target").partition("#")
        if not target or EXTERNAL.match(target):
            return match.group(0)
        path = posixpath.normpath(posixpath.join(folder, target))
        site = path[len(DOCS) + 1 :] if path.startswith(DOCS + "/") else None
        site = _site_paths.get(path, site)
        if site is None:  # not on the site: mkdocs --strict says so
            return match.group(0)
        return match.group("head") + posixpath.relpath(site, here or ".") + hash_ + anchor

    return LINK.sub(rewrite, markdown)


def _code(markdown: str) -> list[tuple[int, int]]:
    """Where ``markdown``'s fenced blocks and code spans are."""
    return [code.span() for code in CODE.finditer(markdown)]


def _in_code(position: int, code: list[tuple[int, int]]) -> bool:
    return any(start <= position < end for start, end in code)


def _links(markdown: str) -> list[re.Match[str]]:
    """The links of ``markdown`` that begin outside code (their text may hold a code span:
    ``[`cpu.md`](../benchmarks/results/cpu.md)``)."""
    code = _code(markdown)
    return [match for match in LINK.finditer(markdown) if not _in_code(match.start(), code)]
