"""Every relative Markdown link in README.md, VERIFYING.md and docs/*.md resolves (issue 29:
README's sections moved to docs/, so a link to a moved heading must follow it): the file
exists in this checkout, and a ``#fragment`` into a Markdown file names one of its headings
(GitHub's slug: lower case, punctuation other than ``-`` and ``_`` dropped, spaces to ``-``,
a repeated slug numbered) or an explicit ``<a id=...>``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "VERIFYING.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)


def slugs(markdown: str) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in FENCE.sub("", markdown).splitlines():
        heading = re.match(r"#{1,6} +(.*?) *#* *$", line)
        if not heading:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        found.add(slug if n == 0 else f"{slug}-{n}")
    found |= set(re.findall(r'<a (?:id|name)="([^"]+)"', markdown))
    return found


def test_slugs_follow_githubs_rule():
    text = "# Every path a server takes (H200, 2026-12-01)\n## A `b` c\n## A `b` c\n"
    assert slugs(text) == {"every-path-a-server-takes-h200-2026-12-01", "a-b-c", "a-b-c-1"}


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(doc: Path):
    text = doc.read_text("utf-8")
    broken = []
    for target in LINK.findall(FENCE.sub("", text)):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not checked offline
        path, _, fragment = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        if not file.exists():
            broken.append(target)
        elif fragment and file.suffix == ".md" and fragment not in slugs(file.read_text("utf-8")):
            broken.append(target)
    assert not broken, f"{doc.relative_to(ROOT)}: {broken}"
