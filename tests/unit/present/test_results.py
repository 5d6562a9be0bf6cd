"""harness/present/results.py: the results section rendered from the evidence model.

Bundles here are SYNTHETIC ones, written by the real bundle writer with the test-only key,
except in the committed-evidence test, which renders the committed bundles."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import shutil
import struct
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "assets"))

import synthetic  # noqa: E402

from harness.capture.bundle_writer import write_bundle  # noqa: E402
from harness.capture.signing import load_private_key  # noqa: E402
from harness.core import gate  # noqa: E402
from harness.core.errors import SectionInputError  # noqa: E402
from harness.core.keys import load_public_key  # noqa: E402
from harness.core.oracle import top_k_top_p  # noqa: E402
from harness.core.report import REPORT_V2, REPORT_V3  # noqa: E402
from harness.core.rulesets import RowInput, rule_set  # noqa: E402
from harness.present import model as evidence_model  # noqa: E402
from harness.present import results, sections  # noqa: E402
from harness.present.model import row_bytes, verified_model  # noqa: E402
from harness.present.verified import verified_checked  # noqa: E402
from harness.probes import fixture  # noqa: E402

PUB = load_public_key(synthetic.SIGNING_PUB)
CUDA = dict(synthetic.MANIFEST, name="synthetic-cuda",
            backend={**synthetic.MANIFEST["backend"], "required": "cuda"})
HOSTILE = "<script>alert(1)</script> *x* | [a](b) `c` <img src=x onerror=alert(2)>"


def _cuda(path: Path, **kwargs: Any) -> Path:
    """A 'cuda' bundle (the synthetic manifest with its backend changed) that verifies."""
    write_bundle(path, fixture.content(CUDA, **kwargs), load_private_key(synthetic.SIGNING_KEY),
                 max_bytes=None)
    return path


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("results") / "smoke"
    synthetic.write(path)
    return path


def _matches(cuda: Path, interp: Path) -> list[results.RowMatch]:
    ids = {c.id for c in verified_model(cuda, PUB).workload}
    return results.shared_rows(row_bytes(cuda, PUB, ids), row_bytes(interp, PUB, ids))


def test_row_fingerprints_count_what_the_judged_rows_kept(smoke: Path) -> None:
    bundle = verified_model(smoke, PUB)
    assert bundle.figures["interpreter"] is True and bundle.exact is None
    prints = row_bytes(smoke, PUB, {"forced-v64"})
    assert [(r.case, r.row) for r in prints] == [("forced-v64", i) for i in range(4)]
    judged = {(r.case, r.row): r.kept for r in bundle.rows}
    for r in prints:
        for side in ("stock", "patched"):
            assert r.outputs[side].kept == judged[(r.case, r.row)][side]
    # the synthetic stock side masks every forced row; patched keeps the forced token
    assert {r.outputs["stock"].kept for r in prints} == {0}


def _whole_vocabulary_rows() -> list[dict[str, Any]]:
    """Forced rows judged by regression/v1 on which the change keeps every token: each stops
    for forced_failure, and regression/v1 names no forced rule (report/v2 misread them)."""
    logits = [0.5, 1e30, -0.25, 0.0] + [0.1] * 60
    neg = -math.inf
    f32 = struct.Struct(f"<{len(logits)}f").pack
    stock = [v if i == 1 else neg for i, v in enumerate(logits)]
    rows = []
    for i in range(4):
        data = RowInput(gate.Row("c", i, "forced", logits, 0.75, 1, None),
                        top_k_top_p(logits, p32=0.75, k=None), gate.SideOutput("ok", stock),
                        gate.SideOutput("ok", logits), True, None, f32(*logits),
                        {"stock": f32(*stock), "patched": f32(*logits)}, False)
        rows.append(rule_set("regression/v1").judge(data))
    return rows


def test_figures_read_forced_failures_as_the_bundles_report_format(smoke: Path) -> None:
    """The defect report/v3 mends (a change shown holding the forced token on rows that stop
    for forced_failure) stays out of the model: it reads as the report format reads."""
    rows = _whole_vocabulary_rows()
    assert all("forced_failure" in r["stops"] for r in rows)
    view = verified_checked(smoke, PUB).view
    manifest = json.loads(view.raw("manifest.json"))
    verdict = rule_set("regression/v1").verdict(rows)
    v3 = evidence_model._figures(view, manifest, rows, verdict, REPORT_V3)
    v2 = evidence_model._figures(view, manifest, rows, verdict, REPORT_V2)
    assert (v3["patched_held"], v2["patched_held"]) == (0, 4)


def test_outputs_that_differ_on_one_row_are_counted_as_such(smoke: Path,
                                                           tmp_path: Path) -> None:
    """A verified 'cuda' bundle whose patched side dropped the top token of the last
    ordinary row: every row is shared (same captured bytes), that one differs."""
    matches = _matches(_cuda(tmp_path / "h200", damage=True), smoke)
    assert len(matches) == 7
    last = next(m for m in matches if m.case.startswith("ordinary") and m.row == 2)
    differ = last.sides["patched"]
    assert (differ.bytes_equal, differ.kept_equal) == (False, False)
    assert differ.kept_cuda == differ.kept_interpreter - 1
    assert all(m.sides["stock"].bytes_equal for m in matches)
    assert all(m.sides["patched"].bytes_equal for m in matches if m is not last)
    text = "\n".join(results.compare_section(verified_model(tmp_path / "h200", PUB),
                                             verified_model(smoke, PUB), matches))
    assert (f"counts differ on {last.case}[2] {differ.kept_cuda}/{differ.kept_interpreter}."
            in text)
    assert "- stock: output bytes identical on 7 of 7" in text


def test_rows_of_other_captured_bytes_are_not_shared(smoke: Path, tmp_path: Path) -> None:
    folder = tmp_path / "bundles"
    shutil.copytree(smoke, folder / "smoke")
    other = _cuda(folder / "h200", seed=1)  # every row drawn again
    assert _matches(other, folder / "smoke") == []
    text = results.generate(folder, public_key=PUB, exact=False)
    assert ("### CUDA (`h200`) against the interpreter (`smoke`)\n\n- No shared rows: no row "
            "is in both bundles") in text
    assert "- Backend: cuda." in text  # a synthetic bundle names no device
    assert "Triton's interpreter on the CPU (not GPU evidence)" in text


def test_a_tampered_bundle_is_refused_and_nothing_is_rendered(smoke: Path,
                                                             tmp_path: Path) -> None:
    folder = tmp_path / "bundles"
    shutil.copytree(smoke, folder / "smoke")
    _cuda(folder / "h200")
    rows = folder / "h200" / "results" / "rows.json"
    rows.write_bytes(rows.read_bytes().replace(b"true", b"True", 1))  # same size, new bytes
    with pytest.raises(SectionInputError, match="h200 does not verify: binding_mismatch"):
        results.generate(folder, public_key=PUB, exact=False)
    with pytest.raises(SectionInputError, match="does not verify"):
        row_bytes(folder / "h200", PUB, {"forced-v64"})


def test_markdown_and_html_in_evidence_strings_are_escaped(smoke: Path) -> None:
    bundle = verified_model(smoke, PUB)
    figures = dict(bundle.figures)
    figures["forced"] = [{**g, "value": HOSTILE} for g in figures["forced"]]
    envelope = {side: {**e, "max_abs_row": f"{HOSTILE}[3]", "max_rel_row": HOSTILE}
                for side, e in figures["envelope"].items()}
    exact = ({"case": HOSTILE, "row": 0, "kind": "ordinary", "binary64_count": 1,
              "exact_count": 2, "exact_method": "ball", "exact_bits": 64,
              "binary64_vs_exact": "differ", "stock_kept": 1, "patched_kept": 2,
              "stock_vs_exact": "under_keep", "patched_vs_exact": "exact",
              "stops": [HOSTILE]},)
    hostile = dataclasses.replace(
        bundle, name=HOSTILE, backend=HOSTILE, devices=(HOSTILE,), reasons=(HOSTILE,),
        verdict=HOSTILE, figures={**figures, "interpreter": False, "envelope": envelope},
        exact=exact)
    text = "\n".join(results.bundle_section(hostile, Path("evidence/bundles")))
    assert "<script" not in text and "<img" not in text and "[a](b)" not in text
    escaped = r"&lt;script&gt;alert(1)&lt;/script&gt; \*x\* \| \[a\](b) \`c\`"
    # name, verdict, backend, device, reasons, forced value, row refs, exact table and summary
    assert text.count(escaped) >= 9
    assert f"({escaped} &lt;img src=x onerror=alert(2)&gt;[3])" in text  # the row index kept
    # the stopped-rows table keeps its seven cells: no pipe of the evidence splits a row
    table = [line for line in text.split("\n") if line.startswith("| ")]
    assert len(table) == 2 and all(len(re.findall(r"(?<!\\)\|", line)) == 8 for line in table)


def _results_file() -> Path:
    """The file that holds the results section (:data:`sections.HOMES`)."""
    return ROOT / sections.HOMES["results"]


def _without_exact(section: str) -> str:
    """The section less its exact-real lines and stopped-row tables (rendered apart)."""
    out, lines = [], iter(section.split("\n"))
    for line in lines:
        if not line.startswith("- Exact-real counts"):
            out.append(line)
            continue
        if line.endswith(" Stopped rows:"):
            assert next(lines) == ""
            for row in lines:
                if not row.startswith("|"):
                    out.append(row)
                    break
    return "\n".join(out)


def test_the_committed_evidence_renders_the_section_it_holds() -> None:
    """The committed bundles, verified with the project's key, render the very section the
    repository holds (the exact-real counts, minutes on two cores, are checked by
    ``scripts/readme_sections.py`` in CI and left out here)."""
    bundles = ROOT / "evidence" / "bundles"
    if not bundles.is_dir():
        pytest.skip("the committed evidence bundles are not in this checkout")
    comparison = Path("benchmarks/cuda_vs_interpreter.json")
    text = results.generate(bundles, Path("evidence/bundles"),
                            public_key=load_public_key(ROOT / "evidence" / "keys"
                                                       / "topp-gate-evidence.pub"),
                            comparison=ROOT / comparison, comparison_display=comparison,
                            exact=False)
    held = sections.current(sections.RESULTS, _results_file().read_text("utf-8"))
    assert "- Exact-real counts" in held and "- Exact-real counts" not in text
    assert text == _without_exact(held)
    assert "### CUDA (`h200-forced-logit-gate-cuda-20261129`) against the interpreter " \
           "(`smoke-interpreter-20261129`)" in text
