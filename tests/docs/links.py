"""A link checker for the two views of the documentation.

- The repository view: README.md, CONTRIBUTING.md, CHANGELOG.md and docs/*.md as GitHub renders
  them, each relative link resolved from the file's own folder. The target must be a file or a
  folder git would commit, and an anchor into a Markdown file one of its headings (GitHub's slugs).
- The site: the HTML mkdocs builds. Every relative link must end at a file (a link to a folder
  does not browse from a file system), and an anchor at an ``id`` of the target page.

External links (``https://``, ``mailto:``) are not followed: the tests run offline.
"""

from __future__ import annotations

import html.parser
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

# Fenced blocks and code spans: their text is code, not links.
CODE = re.compile(
    r"^[ \t]*(?P<fence>`{3,}|~{3,})[^\n]*\n.*?^[ \t]*(?P=fence)[ \t]*$"
    r"|(?P<ticks>`+)[^`].*?(?<!`)(?P=ticks)(?!`)",
    re.MULTILINE | re.DOTALL,
)
INLINE = re.compile(
    r"!?\[(?:[^\[\]\n]|\[[^\]\n]*\])*\]\(\s*<?(?P<target>[^)\s>]*)>?(?:\s+\"[^\"]*\")?\)"
)
DEFINITION = re.compile(r"^ {0,3}\[[^\]\n]+\]:\s*<?(?P<target>\S+?)>?(?:\s.*)?$", re.MULTILINE)
ATTRIBUTE = re.compile(r"<(?:a|img)\s[^>]*?\b(?:href|src)=\"(?P<target>[^\"]*)\"", re.IGNORECASE)
HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(?P<text>.*?)[ \t#]*$", re.MULTILINE)
HTML_ANCHOR = re.compile(r"<a\s[^>]*?\b(?:id|name)=\"(?P<id>[^\"]+)\"", re.IGNORECASE)
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:|^//", re.IGNORECASE)


@dataclass(frozen=True, order=True)
class Broken:
    page: str  # the file the link is in, from the repository root
    target: str  # the link as written
    why: str

    def __str__(self) -> str:
        return f"{self.page}: {self.target} ({self.why})"


def prose(markdown: str) -> str:
    """``markdown`` with its code blocks and code spans blanked out (line numbers kept)."""
    return CODE.sub(lambda code: re.sub(r"[^\n]", " ", code.group(0)), markdown)


def markdown_links(markdown: str) -> list[str]:
    """Every link target of ``markdown`` outside code: inline links and images, reference
    definitions, and the ``href``/``src`` of HTML ``<a>`` and ``<img>``, in order."""
    text = prose(markdown)
    found = [
        (match.start(), match.group("target"))
        for pattern in (INLINE, DEFINITION, ATTRIBUTE)
        for match in pattern.finditer(text)
    ]
    return [target for _, target in sorted(found)]


def github_slugs(markdown: str) -> set[str]:
    """The anchors GitHub gives the headings of ``markdown`` (and its HTML anchors)."""
    text = prose(markdown)
    slugs: set[str] = set(HTML_ANCHOR.findall(text))
    seen: dict[str, int] = {}
    for match in HEADING.finditer(markdown):
        if text[markdown.index("#", match.start())] != "#":
            continue  # inside a code block (blanked out in ``text``)
        # what GitHub renders: code without its backticks, a link's text, no emphasis marks
        heading = CODE.sub(lambda code: code.group(0).strip("`"), match.group("text"))
        heading = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
        heading = re.sub(r"<[^>]+>", "", heading)
        slug = re.sub(r"[^\w\- ]", "", heading.lower().replace("*", "")).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        slugs.add(slug if count == 0 else f"{slug}-{count}")
    return slugs


def check_repository_view(root: Path, pages: list[Path], sources: set[str]) -> list[Broken]:
    """The links of ``pages`` that GitHub cannot follow. ``sources``: the files git would commit,
    relative to ``root``."""
    folders = {posixpath.dirname(name) for name in sources}
    folders |= {parent for folder in folders for parent in _parents(folder)}
    broken = []
    for page in pages:
        name = page.relative_to(root).as_posix()
        markdown = page.read_text(encoding="utf-8")
        for link in markdown_links(markdown):
            if EXTERNAL.match(link):
                continue
            path, _, anchor = link.partition("#")
            if path.startswith("/"):
                broken.append(Broken(name, link, "absolute: GitHub and the site differ"))
                continue
            target = posixpath.normpath(posixpath.join(posixpath.dirname(name), unquote(path)))
            if not path:
                target = name
            if target.startswith(".."):
                broken.append(Broken(name, link, "outside the repository"))
            elif target not in sources and target.rstrip("/") not in folders:
                broken.append(Broken(name, link, "no such file in the repository"))
            elif anchor and target.endswith(".md") and anchor not in _slugs(root / target):
                broken.append(Broken(name, link, f"no heading #{anchor} in {target}"))
    return sorted(broken)


class _Page(html.parser.HTMLParser):
    """The ids of an HTML page, and the URLs its elements link to."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        for key in ("id", "name") if tag == "a" else ("id",):
            if values.get(key):
                self.ids.add(values[key] or "")
        link = {"a": "href", "link": "href", "img": "src", "script": "src"}.get(tag)
        if link and values.get(link):
            self.urls.append(values[link] or "")


def read_page(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def check_site(site: Path) -> list[Broken]:
    """The relative links of the built site that do not end at a file, or at an id of it."""
    pages = {path: read_page(path) for path in site.rglob("*.html") if path.name != "404.html"}
    broken = []
    for path, page in pages.items():
        name = path.relative_to(site).as_posix()
        for url in page.urls:
            parts = urlsplit(url)
            if EXTERNAL.match(url) or parts.scheme:
                continue
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if not target.is_relative_to(site.resolve()):
                broken.append(Broken(name, url, "outside the site"))
            elif not target.is_file():
                why = "a folder: no page to show from a file system" if target.is_dir() else ""
                broken.append(Broken(name, url, why or "no such file in the site"))
            elif parts.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else read_page(target).ids
                if unquote(parts.fragment) not in ids:
                    broken.append(Broken(name, url, f"no id #{parts.fragment} in it"))
    return sorted(broken)


def _slugs(page: Path) -> set[str]:
    return github_slugs(page.read_text(encoding="utf-8"))


def _parents(folder: str) -> list[str]:
    parts = folder.split("/")
    return ["/".join(parts[:end]) for end in range(1, len(parts))]
