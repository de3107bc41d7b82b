"""The documentation's links (no MPI, no MkDocs): every relative link in README.md and docs/
reaches a file, and a ``#anchor`` a heading of it; nothing points outside the repository; the
README stays short; the wire layouts' marker renders a row a tag."""

from __future__ import annotations

import importlib.util
import re
import unicodedata
from pathlib import Path

import pytest

from mpicoded.core.protocol import Tag

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def prose(path: Path) -> list[str]:
    """The lines of a Markdown file outside code fences, with inline code removed."""
    lines, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append(re.sub(r"`[^`]*`", "", line))
    return lines


def slug(heading: str) -> str:
    """A heading's anchor as MkDocs makes it (Python-Markdown's toc slugify)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(path: Path) -> set[str]:
    headings, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and (m := re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)):
            headings.append(m.group(1))
    return {slug(h) for h in headings}


def links(path: Path) -> list[str]:
    return [target for line in prose(path) for target in LINK.findall(line)
            if not re.match(r"[a-z][a-z0-9+.-]*:", target)]  # http:, https:, mailto:


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    for target in links(page):
        name, _, anchor = target.partition("#")
        dest = (page.parent / name).resolve() if name else page
        assert dest.is_file(), f"{page.relative_to(ROOT)}: {target} is no file"
        if anchor:
            assert dest.suffix == ".md", f"{page.relative_to(ROOT)}: {target}: an anchor in a non-page"
            assert anchor in anchors(dest), f"{page.relative_to(ROOT)}: {target}: no such heading"


def test_nothing_points_outside_the_repository():
    files = [*PAGES, *(ROOT / "docs").rglob("*.py"), ROOT / "mkdocs.yml", ROOT / "CITATION.cff"]
    for path in files:
        assert "../shared/" not in path.read_text(encoding="utf-8"), path.relative_to(ROOT)


def test_the_readme_is_short():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 150


def test_slug_matches_mkdocs():
    assert slug("Real slow ranks: `--throttle`") == "real-slow-ranks-throttle"
    assert slug("Paper 001's constructions") == "paper-001s-constructions"
    assert slug("Idle waits: `--wait`") == "idle-waits-wait"


def _generate():  # docs/generate.py, which is not in a package
    spec = importlib.util.spec_from_file_location("generate", ROOT / "docs" / "generate.py")
    assert spec is not None and spec.loader is not None
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    return generate


def test_the_wire_layouts_are_rendered_a_row_a_tag():
    """docs/generate.py turns LAYOUTS into a table, every tag a row of its own."""
    rows = _generate().layouts_markdown().splitlines()[2:]
    assert [row.split("|")[1].strip() for row in rows] == [f"`{t.name}` ({int(t)})" for t in Tag]


def test_the_generated_tables_are_current():
    """Every generated table in docs/ is what ``python docs/generate.py`` writes now, and no
    cell holds a pipe (shown as ``\\|`` in code on the site)."""
    generate = _generate()
    for page in {where for where, _ in generate.TABLES.values()}:
        text = (ROOT / "docs" / page).read_text(encoding="utf-8")
        assert generate.refreshed(page, text) == text, f"run python docs/generate.py ({page})"
        assert "\\|" not in text, page
