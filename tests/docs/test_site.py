"""The documentation site's structure: every page is in the nav, every public name in the API
reference. ``nox -s docs`` builds the site with ``mkdocs build --strict`` (links, anchors, API
references); these checks run with the suite, without mkdocs. The built site's links:
test_links.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import autoreg
import autoreg.testing

from .pages import DOCS, PENDING, ROOT

MKDOCS = (ROOT / "mkdocs.yml").read_text()
NAV = re.findall(r"^  - [^:\n]+: (\S+\.md)$", MKDOCS, flags=re.MULTILINE)
API = (DOCS / "api.md").read_text()


def test_the_nav_lists_every_page_once() -> None:
    pages = {page.name for page in DOCS.glob("*.md")} | {Path(path).name for path in PENDING}
    assert len(NAV) == len(set(NAV))
    assert set(NAV) == pages


def test_the_api_reference_documents_every_public_name() -> None:
    documented = set(re.findall(r"^::: (\S+)$", API, flags=re.MULTILINE))
    public = {f"autoreg.{name}" for name in autoreg.__all__}
    public |= {f"autoreg.testing.{name}" for name in autoreg.testing.__all__}
    assert documented == public
