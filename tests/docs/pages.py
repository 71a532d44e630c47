"""The documentation's pages and their code blocks, as the tests in this folder read them.

The conventions (CONTRIBUTING.md, "Documentation"):

- A ```python block runs, in order with the page's other blocks, in one namespace per page. An
  HTML comment on the line right above its fence may say otherwise: ``<!-- raises: Error -->``
  (it must raise that exception; a ```text block right after it is the exception's message),
  ``<!-- requires: module, module -->`` (it runs when those can be imported) or
  ``<!-- not-run: reason -->`` (not run; the reason is required). Any other comment there is an
  error, so that a misspelt marker cannot turn a block off.
- A ```python block whose first line is ``# path/to/file.py`` quotes that file, which a test runs.
- A ```console block runs its ``$ `` commands and compares their output.

In expected output, a line ``...`` stands for any number of lines and ``...`` inside a line for
any text; trailing spaces do not count.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
ELLIPSIS = "..."

MARKER = re.compile(r"<!--\s*(?P<kind>[\w-]+)\s*:?\s*(?P<argument>.*?)\s*-->")
MARKERS = ("raises", "requires", "not-run")
FENCE = re.compile(r"^```(?P<language>[\w-]*)\n(?P<body>.*?)^```$", re.MULTILINE | re.DOTALL)
QUOTE_HEADER = re.compile(r"# ((?:[\w.-]+/)+[\w.-]+\.py)\n")  # e.g. "# examples/model.py"
QUOTABLE = ("examples/", "tests/", "benchmarks/")  # files that tests run
# Pages that other work writes, linked and in the nav before they land: remove an entry once its
# page is merged (mkdocs build --strict fails without them).
PENDING: dict[str, str] = {}


def pages() -> list[Path]:
    """Every page whose blocks are checked: the README, CONTRIBUTING.md and docs/*.md."""
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted(DOCS.glob("*.md"))]


def page_id(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    body: str
    marker: str | None  # the kind of the comment right above the fence, if any
    argument: str  # what the marker says after its kind
    comment: str | None  # that comment, verbatim
    message: str | None  # for ``raises``: the ```text block right after, if any

    @property
    def id(self) -> str:
        return f"{page_id(self.page)}:{self.line}"

    @property
    def quoted_file(self) -> str | None:
        """The path a quote block quotes (``# examples/net.py``), or None."""
        match = QUOTE_HEADER.match(self.body)
        return match.group(1) if match else None


def blocks(page: Path, language: str | None = None) -> list[Block]:
    text = page.read_text()
    found: list[Block] = []
    matches = list(FENCE.finditer(text))
    for position, match in enumerate(matches):
        line = text.count("\n", 0, match.start()) + 1
        above = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        comment = above.strip() if above.strip().startswith("<!--") else None
        marker = MARKER.fullmatch(comment) if comment else None
        message = None
        if position + 1 < len(matches):
            after = matches[position + 1]
            between = text[match.end() : after.start()]
            if after.group("language") == "text" and not between.strip():
                message = after.group("body")
        found.append(
            Block(
                page=page,
                line=line,
                language=match.group("language"),
                body=match.group("body"),
                marker=marker.group("kind") if marker else ("?" if comment else None),
                argument=marker.group("argument") if marker else "",
                comment=comment,
                message=message,
            )
        )
    return [block for block in found if language is None or block.language == language]


def output_pattern(expected: list[str]) -> re.Pattern[str]:
    parts = []
    for line in expected:
        if line == ELLIPSIS:
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*".join(re.escape(piece) for piece in line.split(ELLIPSIS)) + r"\n")
    return re.compile("".join(parts))


def matches(expected: list[str], actual: str) -> bool:
    """Whether ``actual`` (text) is what the ``expected`` lines describe."""
    actual = "".join(line.rstrip() + "\n" for line in actual.splitlines())
    return output_pattern(expected).fullmatch(actual) is not None
