"""`topp-gate site` in a real browser (issue 29): Debian's chromium, headless.

A site is built from a few real committed bundles and one mutation run, plus one tampered
copy of a bundle, which must show as refused (its reason, never its claims). Every page is
loaded by chromium with its console logged to stderr (the pages hold no script, so any
console line is a Content-Security-Policy violation or a failed load: an error); every
local link must name a file (and an anchor) that exists; and the front page's screenshot
must show the layout's landmarks where the layout puts them: the header band across the
top, the verdict legend under it, the grid's coloured cells under the legend, right of the
implementation and release columns.

Skipped, saying why, only when chromium is not installed (`apt-get install -y chromium`).
"""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import numpy as np
import pytest

from harness.cli import main
from harness.present.model import page_name

ROOT = Path(__file__).resolve().parents[2]
BUNDLES = {  # committed bundle -> the key that signed it (evidence/verdicts.tsv)
    "bundles/smoke-interpreter-20261129": "keys/topp-gate-evidence.pub",
    "impls/bundles/h200-flashinfer-0.7.2.post1-top-p-sampling-cuda":
        "keys/topp-gate-evidence-4.pub",
    "sweep/bundles/sweep-vllm-0.31.0-cuda": "keys/topp-gate-evidence-2.pub",
}
MUTATION = "mutation/pr-interpreter-cpu-20261201"  # a mutation run, and its frozen manifest
FROZEN = ("manifests/pr/pr-interpreter.json", "manifests/pr/pr-interpreter.json.sha256")
TAMPERED = "bundles/smoke-interpreter-tampered"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")

# the site's own colours (harness/present/site.py's CSS), as a screenshot shows them
HEADER = (0x1F, 0x2D, 0x3D)
STOP = (0xF2, 0xA3, 0xA3)
PASS = (0x9F, 0xD8, 0xA4)
REFUSED = (0xBD, 0xBD, 0xBD)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("site")
    evidence = base / "evidence"
    table = []
    for bundle, key in BUNDLES.items():
        shutil.copytree(ROOT / "evidence" / bundle, evidence / bundle)
        (evidence / key).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / "evidence" / key, evidence / key)
        table.append(f"evidence/{bundle}\tevidence/{key}\tSTOP")
    (evidence / "verdicts.tsv").write_text("\n".join(table) + "\n", "utf-8")
    shutil.copytree(ROOT / "evidence" / MUTATION, evidence / MUTATION)
    for name in FROZEN:
        (evidence / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / "evidence" / name, evidence / name)
    # one tampered copy: a row's kept count changed after signing
    shutil.copytree(ROOT / "evidence/bundles/smoke-interpreter-20261129", evidence / TAMPERED)
    rows = evidence / TAMPERED / "results/rows.json"
    text = rows.read_text("utf-8")
    assert '"kept":1,' in text
    rows.write_text(text.replace('"kept":1,', '"kept":2,', 1), "utf-8")
    out = base / "out"
    assert main(["site", str(evidence), "--out", str(out), "--workers", "2"]) == 0
    return out


def _page(folder: str, shown: str) -> str:
    """The page of the piece shown as ``shown`` (its path under the site)."""
    return f"{folder}/{page_name(shown)}.html"


def test_the_tampered_copy_is_refused_with_its_reason_and_none_of_its_claims(site: Path):
    page = (site / _page("bundles", f"evidence/{TAMPERED}")).read_text()
    assert "refused" in page and "sha256" in page
    assert "verified verdict" not in page and "Kept count" not in page
    index = (site / "index.html").read_text()
    assert 'class="v-refused"' in index
    good = (site / _page("bundles", "evidence/bundles/smoke-interpreter-20261129")).read_text()
    assert "verified verdict: <strong>STOP</strong>" in good and "<svg" in good
    run = (site / _page("mutation", f"evidence/{MUTATION}")).read_text()
    assert "the gate killed <strong>18 of 28</strong> mutants" in run
    # a table, a row per mutant: each survivor says what its outputs did (10 in this run)
    table = run[run.index('<table id="mutants">'):]
    table = table[:table.index("</table>")]
    assert table.count("<tr>") == 1 + 28
    assert table.count(">survived (PASS") == 10 and table.count(">killed (STOP") == 18


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("href", "src") and value is not None:
                self.links.append(value)
            if name == "id" and value is not None:
                self.ids.add(value)


def _parse(path: Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text("utf-8"))
    return parser


def broken_links(site: Path) -> list[str]:
    """Every local link (href or src) whose file or anchor is missing; a link off the site
    (a scheme or a host) is broken too: the site needs no network."""
    broken = []
    pages = sorted(site.rglob("*.html"))
    parsed = {p.resolve(): _parse(p) for p in pages}
    for page, links in parsed.items():
        for link in links.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc:
                broken.append(f"{page.name}: {link} (off the site)")
                continue
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if not target.is_file():
                broken.append(f"{page.name}: {link}")
            elif parts.fragment and parts.fragment not in parsed.get(target, _Links()).ids:
                broken.append(f"{page.name}: {link} (no such anchor)")
    return broken


def test_every_local_link_resolves(site: Path):
    assert len(list(site.rglob("*.html"))) == 1 + len(BUNDLES) + 1 + 1
    assert broken_links(site) == []


def test_the_link_checker_finds_a_broken_link(tmp_path: Path):
    (tmp_path / "index.html").write_text('<a href="missing.html">x</a><a href="#nope">y</a>'
                                         '<a href="https://example.org/">z</a>')
    assert len(broken_links(tmp_path)) == 3


def _chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--enable-logging=stderr", "--v=0", f"--user-data-dir={profile}", *args],
        capture_output=True, text=True, timeout=120, check=False)


def console_lines(page: Path, profile: Path) -> tuple[str, list[str]]:
    """The page's DOM as chromium built it, and every console line it logged."""
    done = _chromium("--dump-dom", page.as_uri(), profile=profile)
    return done.stdout, [line for line in done.stderr.splitlines() if ":CONSOLE" in line]


@needs_chromium
def test_every_page_loads_in_chromium_without_a_console_error(site: Path, tmp_path: Path):
    pages = sorted(site.rglob("*.html"))
    for page in pages:
        dom, console = console_lines(page, tmp_path / "profile")
        assert console == [], f"{page.relative_to(site)}: {console}"
        assert 'id="title"' in dom and "</main>" in dom, page


@needs_chromium
def test_the_console_check_sees_a_policy_violation(tmp_path: Path):
    page = tmp_path / "bad.html"
    page.write_text("<!DOCTYPE html><html><head><meta http-equiv=\"Content-Security-Policy\" "
                    "content=\"default-src 'none'\"><style>p{color:red}</style></head>"
                    "<body><p id=\"title\">x</p></body></html>")
    _, console = console_lines(page, tmp_path / "profile")
    assert console, "an inline style under default-src 'none' must log a console error"


def read_png(path: Path) -> np.ndarray:
    """A screenshot as an array of RGB (Pillow: the gpu extra's matplotlib brings it)."""
    from PIL import Image

    with Image.open(path) as image:
        return np.asarray(image.convert("RGB"), dtype=np.int32)


def bands(image: np.ndarray, colour: tuple[int, int, int]) -> list[tuple[int, int, int, int]]:
    """Vertical runs of rows holding a solid fill of the colour: (top, bottom, left, right)
    each, in order."""
    near = np.abs(image - np.array(colour)).max(axis=2) <= 3
    hit = near.copy()  # solid fills only: 16 pixels in a row (no anti-aliased text)
    for k in range(1, 16):
        hit[:, :-k] &= near[:, k:]
        hit[:, -k:] = False
    rows = np.flatnonzero(hit.any(axis=1))
    out: list[tuple[int, int, int, int]] = []
    for y in rows:
        if out and y <= out[-1][1] + 12:  # a line of text inside a cell splits no cell
            top, _, _, _ = out[-1]
            out[-1] = (top, int(y), 0, 0)
        else:
            out.append((int(y), int(y), 0, 0))
    result = []
    for top, bottom, _, _ in out:
        cols = np.flatnonzero(hit[top:bottom + 1].any(axis=0))
        result.append((top, bottom, int(cols.min()), int(cols.max()) + 15))
    return result


@needs_chromium
def test_the_front_page_layout_has_its_landmarks(site: Path, tmp_path: Path):
    shot = tmp_path / "index.png"
    _chromium("--window-size=1200,1000", "--hide-scrollbars", f"--screenshot={shot}",
              (site / "index.html").as_uri(), profile=tmp_path / "profile")
    image = read_png(shot)
    assert image.shape[:2] == (1000, 1200)
    header = bands(image, HEADER)
    assert header and header[0][0] == 0 and 60 <= header[0][1] <= 200
    assert header[0][2] == 0 and header[0][3] == 1199  # across the whole width
    below = header[0][1]
    for colour in (STOP, PASS, REFUSED):
        found = [b for b in bands(image, colour) if b[0] > below]
        # the legend's swatch (one text line high), then the grid's cells (36 px or more)
        legend, cells = found[0], [b for b in found[1:] if b[1] - b[0] >= 30]
        assert legend[1] - legend[0] < 30, (colour, found)
        assert cells, (colour, found)
        assert cells[0][0] > legend[1]  # the grid sits under the legend
        assert 150 <= cells[0][2] and cells[0][3] < 1200  # right of the two heading columns


SITE_ENV = "TOPP_GATE_SITE"


@needs_chromium
def test_the_whole_committed_evidence_site_loads_in_chromium(tmp_path: Path):
    """The site of every committed bundle, built by ``scripts/test``'s evidence step
    (``topp-gate site evidence --check``, the base install) and named in $TOPP_GATE_SITE:
    every page loads without a console line and every local link resolves."""
    import os

    named = os.environ.get(SITE_ENV)
    if not named:
        pytest.skip(f"${SITE_ENV} names no site (scripts/test builds the committed "
                    "evidence's and sets it)")
    site = Path(named)
    pages = sorted(site.rglob("*.html"))
    index = (site / "index.html").read_text("utf-8")
    bundles = [line for line in (ROOT / "evidence/verdicts.tsv").read_text().splitlines()
               if line.strip() and not line.startswith("#")]
    # a page per bundle (and per bundle of the PR archive), none shown as refused
    assert len(pages) > len(bundles) and '<td class="v-refused"' not in index
    assert broken_links(site) == []
    for page in pages:
        dom, console = console_lines(page, tmp_path / "profile")
        assert console == [], f"{page.relative_to(site)}: {console}"
        assert 'id="title"' in dom and "</main>" in dom, page
