"""``topp-gate site`` gives every bundle folder a page of its own (issue 35, item 6): page
names are a readable slug plus a short sha256 of the exact folder path, so folders whose
slugs agree (``a b`` and ``a-b``, names differing only in case or in characters the slug
drops) never share a page, and each front-page link opens its own bundle's page.

Real bundles, really verified: written by the real bundle writer and signed with real
Ed25519 test keys; one is signed by a key that is not trusted, so a refused bundle sits
beside verified ones whose slugs agree with its own."""

from __future__ import annotations

import re
import shutil
import sys
from html import unescape
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "assets"))

import synthetic  # noqa: E402

from harness.cli import main  # noqa: E402

# folder -> signed by a trusted key (given with --pubkey)? "a b" (refused) and "a-b"
# (verified PASS) are the pair: one page used to serve both.
FOLDERS = {"a b": False, "a-b": True, "A-b": True, "a+b": True, "a\u00e9b": True}


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, Path]:
    base = tmp_path_factory.mktemp("page-names")
    good, other = base / "good", base / "other"
    synthetic.write(good)
    synthetic.write(other, key=synthetic.OTHER_KEY)
    return {True: good, False: other}


def test_page_names_differ_where_slugs_agree():
    from harness.present.model import RefusedBundle, page_name

    paths = [f"evidence/bundles/{name}" for name in FOLDERS] + [
        "evidence/bundles/a_b", "evidence/bundles/a.b", "evidence/bundles/-a-b-"]
    names = [page_name(p) for p in paths]
    assert len(set(names)) == len(paths)
    assert len({n.lower() for n in names}) == len(paths)  # case-insensitive file systems
    for name in names:
        assert re.fullmatch(r"[A-Za-z0-9._-]+", name) and len(name) < 120, name
    assert page_name("evidence/bundles/a b") == page_name("evidence/bundles/a b")
    long = page_name("evidence/bundles/" + "x" * 1000)
    assert len(long) < 120 and long != page_name("evidence/bundles/" + "x" * 999)
    # the name the pages are written under
    assert RefusedBundle("evidence/bundles/a b", "bundles", "c", "r").slug == \
        page_name("evidence/bundles/a b")


def test_each_link_opens_its_own_bundles_page(signed: dict[bool, Path], tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]):
    evidence = tmp_path / "evidence"
    for name, trusted in FOLDERS.items():
        shutil.copytree(signed[trusted], evidence / "bundles" / name)
    site = tmp_path / "site"
    assert main(["site", str(evidence), "--out", str(site), "--no-mutation", "--workers", "1",
                 "--pubkey", str(synthetic.SIGNING_PUB)]) == 0
    capsys.readouterr()
    pages = sorted((site / "bundles").glob("*.html"))
    assert len(pages) == len(FOLDERS)
    index = (site / "index.html").read_text("utf-8")
    links = {unescape(shown): href for href, shown in
             re.findall(r'<tr><td><a href="([^"]+)">([^<]+)</a></td>', index)}
    assert sorted(links) == sorted(f"evidence/bundles/{name}" for name in FOLDERS)
    assert len(set(links.values())) == len(FOLDERS)
    for name, trusted in FOLDERS.items():
        shown = f"evidence/bundles/{name}"
        page = (site / unescape(links[shown])).read_text("utf-8")
        assert unescape(re.findall(r"<code>([^<]*)</code>", page)[0]) == shown
        if trusted:
            assert "verified verdict: <strong>PASS</strong>" in page, name
        else:
            assert 'class="v-refused"' in page and "verified verdict" not in page, name
