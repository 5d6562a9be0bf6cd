"""harness/present: verify-once loading, the marker sections, and pages that escape evidence.

Bundles here are SYNTHETIC ones, written by the real bundle writer with the test-only key."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "assets"))

import synthetic  # noqa: E402

from harness.core.errors import SectionInputError  # noqa: E402
from harness.core.keys import load_public_key  # noqa: E402
from harness.present import sections, site  # noqa: E402
from harness.present.model import (  # noqa: E402
    BundleModel,
    Case,
    Evidence,
    Mutant,
    MutationRun,
    RefusedBundle,
    Row,
    Side,
    page_name,
)
from harness.present.verified import Checked, Refused, checked, verified_checked  # noqa: E402

PUB = load_public_key(synthetic.SIGNING_PUB)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("present") / "smoke"
    synthetic.write(path)
    return path


def test_a_verified_bundle_is_verified_once_per_process(bundle: Path):
    first = checked(bundle, key=PUB)
    assert isinstance(first, Checked) and first.verified.verdict["verdict"] == "PASS"
    assert first.view.payload_sha256 == first.verified.payload_sha256
    assert checked(bundle, key=PUB) is first  # the same result: not verified again


def test_a_tampered_bundle_is_refused_with_the_cores_reason(bundle: Path, tmp_path: Path):
    copy = tmp_path / "copy"
    shutil.copytree(bundle, copy)
    rows = copy / "results" / "rows.json"
    rows.write_bytes(rows.read_bytes().replace(b"true", b"True", 1))
    refused = checked(copy, key=PUB)
    assert isinstance(refused, Refused) and refused.code == "binding_mismatch"
    with pytest.raises(SectionInputError, match="copy does not verify: binding_mismatch"):
        verified_checked(copy, PUB)


def test_another_signer_is_refused_and_all_trusted_keys_are_named(bundle: Path):
    other = checked(bundle, key=load_public_key(synthetic.OTHER_PUB))
    assert isinstance(other, Refused) and other.code == "bad_signature"
    # no key given: the built-in project keys are tried, none signed the test bundle
    untrusted = checked(bundle)
    assert isinstance(untrusted, Refused) and "key ids tried" in untrusted.reason


def test_sections_find_replace_and_refuse_missing_markers():
    s = sections.IMPLS
    text = f"a\n{s.begin}\nold\n{s.end}\nb\n"
    new = f"{s.begin}\nnew\n{s.end}\n"
    assert sections.current(s, text) == f"{s.begin}\nold\n{s.end}\n"
    assert sections.replaced(s, text, new) == f"a\n{new}b\n"
    assert not sections.check(s, text, new) and sections.check(s, f"a\n{new}b\n", new)
    with pytest.raises(SectionInputError, match="exactly one"):
        sections.current(s, text + s.begin)
    with pytest.raises(SectionInputError):
        sections.current(sections.DEPLOY, text)


def test_every_generated_section_is_marked_once_in_its_home():
    assert set(sections.HOMES) == set(sections.SECTIONS)
    for section in sections.SECTIONS.values():
        text = (ROOT / sections.HOMES[section.name]).read_text("utf-8")
        assert sections.current(section, text).endswith(section.end + "\n"), section.name
        for other in {*sections.HOMES.values()} - {sections.HOMES[section.name]}:
            assert not sections.holds(section, (ROOT / other).read_text("utf-8")), other


HOSTILE = '<script>alert(1)</script>"\'&<img src=x onerror=alert(2)>'


def _model() -> BundleModel:
    side = Side(HOSTILE, HOSTILE, HOSTILE, (HOSTILE,), "kernel_crash", HOSTILE)
    row = Row(HOSTILE, 0, HOSTILE, (HOSTILE,), 10, {"stock": 9, "patched": 10},
              {"stock": 0.25, "patched": None}, {"stock": 0.5, "patched": 0.0})
    return BundleModel(
        path=f"evidence/bundles/{HOSTILE}", group="bundles", name=HOSTILE,
        description=HOSTILE, sides={"stock": side, "patched": side},
        cases=(Case(HOSTILE, {"stock": HOSTILE, "patched": None}, {}),), rows=(row,),
        workload=(),
        rules=HOSTILE, report_format=HOSTILE, verdict="STOP", reasons=(HOSTILE,),
        rows_total=1, rows_stopped=1, stop_rows={HOSTILE: 1},
        base_defects={"rows": 1, "reasons": {HOSTILE: 1}},
        base_defect_rows=({"row": HOSTILE, "faults": [HOSTILE], "altered": True},),
        broken_rows={HOSTILE: [HOSTILE]}, signer=HOSTILE, payload_sha256=HOSTILE,
        manifest_sha256=HOSTILE, harness={"algorithm": HOSTILE, "sha256": HOSTILE,
                                          "matches": False, "source": {"commit": HOSTILE}},
        devices=(HOSTILE,), backend=HOSTILE, library_binding=HOSTILE)


def _run() -> MutationRun:
    mutant = Mutant(HOSTILE, HOSTILE, False, "PASS", (HOSTILE,), (HOSTILE,), True, HOSTILE,
                    (HOSTILE,))
    return MutationRun(f"evidence/mutation/{HOSTILE}", HOSTILE, HOSTILE, HOSTILE, HOSTILE,
                       "PASS", 0, (0, 1), (1, 1), (mutant,), (HOSTILE,), HOSTILE)


def test_every_page_escapes_evidence_and_holds_no_script(tmp_path: Path):
    evidence = Evidence([_model(), RefusedBundle(f"evidence/bundles/x{HOSTILE}", "bundles",
                                                 "bad_signature", HOSTILE)], [_run()])
    pages = site.write_site(evidence, tmp_path)
    assert len(pages) == 4
    for page in pages:
        text = page.read_text("utf-8")
        assert "<script" not in text.lower() and "<img" not in text.lower(), page
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text, page
        # the policy allows exactly the page's one stylesheet, by its hash
        style = re.search(r"<style>(.*?)</style>", text, re.S)
        assert style is not None
        digest = base64.b64encode(hashlib.sha256(style.group(1).encode()).digest()).decode()
        assert f"style-src 'sha256-{digest}'" in text and "default-src 'none'" in text
        assert " style=" not in text  # no inline style attribute: the policy would block it


def test_the_front_page_grid_colours_cells_by_verdict(tmp_path: Path):
    model = _model()
    quiet = tuple(Row(r.case, r.row, r.kind, (), r.oracle, r.kept, r.mass_outside,
                      r.mass_dropped) for r in model.rows)
    passing = BundleModel(**{**model.__dict__, "path": "evidence/sweep/bundles/p",
                             "verdict": "PASS", "rows": quiet})
    html = site.index_page(Evidence([model, passing, RefusedBundle("evidence/x", "bundles",
                                                                   "bad_signature", "no")]))
    grid = html[html.index('<table id="grid">'):]
    grid = grid[:grid.index("</table>")]
    assert 'class="v-mixed"' in grid  # one STOP and one PASS in the same cell
    assert 'class="v-refused"' in grid and "did not verify" in grid
    assert "nothing broke: p" in grid  # a cell names what broke there


def test_a_path_column_is_stop_only_where_a_row_on_that_path_stopped():
    model = _model()
    side = Side("vllm-triton", "0.33.0", "split", ("monolithic", "split"), "ok", "")
    split = Row("a", 0, "ordinary", ("under_keep",), 10, {"stock": 9, "patched": 9},
                {}, {})
    mono = Row("b", 0, "ordinary", (), 10, {"stock": 10, "patched": 10}, {}, {})
    b = BundleModel(**{**model.__dict__, "sides": {"stock": side, "patched": side},
                       "cases": (Case("a", {"stock": "split", "patched": "split"}, {}),
                                 Case("b", {"stock": "monolithic", "patched": "monolithic"},
                                      {})), "rows": (split, mono)})
    html = site.index_page(Evidence([b]))
    grid = html[html.index('<table id="grid">'):]
    cells = re.findall(r'<td class="(v-[a-z]+)"><a[^>]*>([^<]*)</a>', grid)
    assert [(c, t.split(":")[0]) for c, t in cells] == [("v-pass", "nothing broke"),
                                                        ("v-stop", "under_keep")]


def test_the_presentation_wing_imports_no_torch():
    code = ("import sys, harness.present.build, harness.present.site, "
            "harness.mutation.mutate, harness.mutation.mutation_check, "
            "harness.mutation.mutant_outputs, harness.commands.site; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('torch', 'triton', 'matplotlib', 'vllm')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, check=True)
    assert json.loads(done.stdout.replace("'", '"')) == []


def test_site_refuses_a_non_empty_out_folder_and_a_missing_evidence_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    from harness.cli import main

    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    assert main(["site", str(tmp_path), "--out", str(out)]) == 2
    assert "not an empty folder" in capsys.readouterr().err
    assert (out / "keep.txt").read_text() == "mine"
    assert main(["site", str(tmp_path / "none"), "--out", str(tmp_path / "new")]) == 2
    assert "no evidence folder" in capsys.readouterr().err
    assert main(["site", str(tmp_path), "--out", str(tmp_path / "new")]) == 2
    assert "no bundle or mutation run" in capsys.readouterr().err


def test_a_site_of_one_verified_and_one_refused_bundle(bundle: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]):
    """In-process, one worker: the test-only key given with --pubkey; a copy signed by
    another key is refused (no trusted key verifies it) and shown with its reason only."""
    from harness.cli import main

    evidence = tmp_path / "evidence"
    shutil.copytree(bundle, evidence / "bundles" / "good")
    synthetic.write(evidence / "bundles" / "other", key=synthetic.OTHER_KEY)
    out = tmp_path / "site"
    assert main(["site", str(evidence), "--out", str(out), "--workers", "1",
                 "--pubkey", str(synthetic.SIGNING_PUB)]) == 0
    err = capsys.readouterr().err
    assert "evidence/bundles/good: verified, PASS" in err
    assert "evidence/bundles/other: refused: no signature verifies" in err
    refused = (out / "bundles" / f"{page_name('evidence/bundles/other')}.html").read_text()
    assert "refused" in refused and "verified verdict" not in refused
    good = (out / "bundles" / f"{page_name('evidence/bundles/good')}.html").read_text()
    assert "verified verdict: <strong>PASS</strong>" in good


def test_a_refused_mutation_run_page_shows_only_its_reason(tmp_path: Path):
    from harness.present.model import RefusedRun

    page = site.mutation_page(RefusedRun(f"evidence/mutation/{HOSTILE}", "bad_signature",
                                         HOSTILE))
    assert "refused" in page and "<h2>Mutants</h2>" not in page and "<script" not in page


def test_a_pull_request_page_opens_with_its_answer():
    from harness.ci.changes import BrokenFigures, Changes

    model = _model()
    side = Side("vllm-triton", "0.33.0", "split", ("split",), "ok", "")
    broken = Row("a", 0, "ordinary", ("under_keep",), 10, {"stock": 10, "patched": 9}, {}, {})
    defect = Row("b", 0, "forced", ("count_bound",), 1, {"stock": 8001, "patched": 8000},
                 {}, {})
    same = Row("b", 1, "ordinary", (), 5, {"stock": 5, "patched": 5}, {}, {})
    b = BundleModel(**{
        **model.__dict__, "name": "pr-cuda-v4", "sides": {"stock": side, "patched": side},
        "cases": (Case("a", {"stock": "split", "patched": "split"}, {}),
                  Case("b", {"stock": "monolithic", "patched": "monolithic"}, {})),
        "rows": (broken, defect, same), "rows_total": 3, "rows_stopped": 1,
        "broken_rows": {"under_keep": ["a[0]"]},
        "base_defects": {"rows": 1, "reasons": {"count_bound": 1}},
        "base_defect_rows": ({"row": "b[0]", "faults": ["count_bound"], "altered": True},),
        "changes": Changes(3, 2, 1, (BrokenFigures("a[0]", ("under_keep",), "split", 10, 10,
                                                    9),), None, "report.md"),
        "compared": {"stock": {"family": "vllm-triton", "version": "0.33.0",
                               "pin": "pins/vllm-0.33.0.json"},
                     "patched": {"family": "vllm-triton", "version": "0.33.0",
                                 "patch_sha256": "ab" * 32}}})
    page = site.bundle_page(b)
    answer = page[page.index('<section class="answer"'):page.index("</section>")]
    assert page.index('<section class="answer"') < page.index("What was compared")
    text = re.sub(r"<[^>]+>", "", answer)
    assert "STOP: the change broke 1 of 3 rows (reasons: under_keep)." in text
    assert "base: vllm-triton 0.33.0, pin pins/vllm-0.33.0.json" in text
    assert "change: vllm-triton 0.33.0" in text and "patch abababababababab" in text
    assert "2 of 3 rows have outputs that differ from the base's (1 of them rows the base " \
        "got right)" in text
    assert "the change altered 1 of them" in text
    row = re.search(r'<table id="broken">.*?</table>', answer, re.S)
    assert row is not None
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(0))
    assert [re.sub(r"<[^>]+>", "", c) for c in cells] == [
        "a[0]", "under_keep", "split", "10", "10", "9"]
    failed = BundleModel(**{**b.__dict__, "changes": Changes(
        3, 3, 2, (), "kernel_crash: ModuleNotFoundError: No module named 'vllm._C'", None)})
    text = re.sub(r"<[^>]+>", "", site.bundle_page(failed))
    assert "BASE FAILED: kernel_crash: ModuleNotFoundError: No module named &#x27;vllm._C&#x27;" \
        in text and "the change broke" not in text
