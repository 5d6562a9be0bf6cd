"""report.py: the Markdown report and the PNG plot, from real judge results."""

from __future__ import annotations

import math
import random

import pytest

from harness.capture.report_png import render_png
from harness.core.f32 import encode, to_float32
from harness.core.gate import verdict
from harness.core.judge import CaseBytes, RowSpec, judge_cases
from harness.core.oracle import reference
from harness.core.report import ReportInputs, render_markdown, summarize

NEG = -math.inf
VOCAB = 64


def _row(rnd: random.Random) -> list[float]:
    return [to_float32(rnd.gauss(0, 1)) for _ in range(VOCAB)]


def _forced_case() -> tuple[CaseBytes, dict]:
    """Two forced rows at 1e30: stock masks the whole first row (the defect), keeps the
    forced token on the second; patched keeps exactly the forced token on both."""
    rnd = random.Random(0)
    logits, outs_stock, outs_patched = [], [], []
    labels = []
    for token in (0, 33):
        row = _row(rnd)
        row[token] = to_float32(1e30)
        logits += row
        only = [v if i == token else NEG for i, v in enumerate(row)]
        outs_patched += only
        outs_stock += [NEG] * VOCAB if token == 0 else only
        labels.append(f"value=1e30 p=0.9 id={token}")
    p = encode([to_float32(0.9)] * 2)
    case = CaseBytes("forced-v64", VOCAB, [RowSpec("forced", 0), RowSpec("forced", 33)],
                     encode(logits), p, encode(outs_stock), encode(outs_patched), True)
    index = {"id": "forced-v64", "kind": "forced", "batch": 2, "vocab": VOCAB,
             "rows": [{"judge": "forced", "forced_id": t, "label": lab}
                      for t, lab in zip((0, 33), labels, strict=True)]}
    return case, index


def _ordinary_case(drop_patched: bool) -> tuple[CaseBytes, dict]:
    """Three rows; stock over-keeps two tokens on row 0; patched drops an oracle token on
    row 1 when ``drop_patched``."""
    rnd = random.Random(1)
    logits, ps, stock, patched = [], [], [], []
    for i in range(3):
        row = _row(rnd)
        p = to_float32(0.5)
        order = sorted(range(VOCAB), key=lambda t: (-row[t], t))
        kept = list(reference(row, p).kept)
        stock_kept = set(order[: len(kept) + (2 if i == 0 else 0)])
        patched_kept = set(kept)
        if drop_patched and i == 1:
            patched_kept.discard(kept[-1])
        logits += row
        ps.append(p)
        stock += [v if t in stock_kept else NEG for t, v in enumerate(row)]
        patched += [v if t in patched_kept else NEG for t, v in enumerate(row)]
    case = CaseBytes("ordinary-v64", VOCAB, [RowSpec("ordinary")] * 3, encode(logits),
                     encode(ps), encode(stock), encode(patched), True)
    index = {"id": "ordinary-v64", "kind": "ordinary", "batch": 3, "vocab": VOCAB,
             "rows": [{"judge": "ordinary", "forced_id": None, "label": f"row={i}"}
                      for i in range(3)]}
    return case, index


def _inputs(drop_patched: bool = False, backend: str = "interpreter") -> ReportInputs:
    forced, forced_index = _forced_case()
    ordinary, ordinary_index = _ordinary_case(drop_patched)
    rows = judge_cases([forced, ordinary])
    evidence = {side: {"backend": backend, "interpreter": backend == "interpreter",
                       "device": "cpu", "vllm_version": v,
                       "cases": {"forced-v64": {"split_slices": 4, "seconds": 0.5,
                                                "output_sha256": "ab" * 32}}}
                for side, v in (("stock", "0.30.0"), ("patched", "0.33.0"))}
    return ReportInputs("tiny", backend, rows, verdict(rows), evidence,
                        {"schema": "topp-gate/cases/v1", "cases": [forced_index,
                                                                   ordinary_index]})


def test_pass_report_shows_verdict_forced_table_and_figures():
    inputs = _inputs()
    assert inputs.verdict["verdict"] == "PASS"
    md = render_markdown(inputs)
    lines = md.splitlines()
    assert lines[2] == "**Verdict: PASS**"
    # the forced row where stock masked everything appears as a dropped forced token
    row = next(line for line in lines if line.startswith("| 1e30 | 64 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3] == "1/2"
    assert "forced_token_dropped x1" in cells[4] and "all_masked x1" in cells[4]
    assert cells[5] == "2/2" and cells[6] == "none"
    assert "Stock lost the forced token on 1 of 2 forced rows; patched held on 2 of 2" in md
    assert "Triton's interpreter on the CPU" in md and "not GPU evidence" in md
    # stock over-keeps by 2 on one row; patched matches the oracle: 1 better, 2 equal
    s = summarize(inputs)
    assert s["envelope"]["stock"]["max_abs_diff"] == 2
    assert s["envelope"]["patched"]["max_abs_diff"] == 0
    assert s["symdiff"] == {"better": 1, "equal": 2, "worse": 0}
    assert s["diagnostics"]["ordinary"]["patched"]["exact"] == 3
    assert s["diagnostics"]["ordinary"]["stock"]["minimal_no"] == 1
    assert "1 better, 2 equal, 0 worse" in md
    assert "| split_slices | 4 | 4 |" in md and "ab" * 32 not in md


def test_stop_report_lists_its_reasons_first():
    inputs = _inputs(drop_patched=True)
    assert inputs.verdict["verdict"] == "STOP"
    md = render_markdown(inputs)
    head = md.split("## Forced rows")[0]
    assert "**Verdict: STOP**" in head
    for reason in inputs.verdict["reasons"]:
        assert f"- `{reason}`: 1 row(s)" in head
    assert "missing_oracle_token" in inputs.verdict["reasons"]
    assert "1 better, 1 equal, 1 worse" in md


def test_cuda_backend_is_not_called_interpreter():
    md = render_markdown(_inputs(backend="cuda"))
    assert "Backend: cuda (cpu)." in md and "interpreter" not in md.split("## Forced")[0]


def test_markdown_is_deterministic_and_tolerates_missing_evidence():
    inputs = _inputs()
    bare = ReportInputs(inputs.manifest_name, "cuda", inputs.rows, inputs.verdict)
    assert render_markdown(bare) == render_markdown(bare)
    assert "No kernel-path evidence was recorded" in render_markdown(bare)
    assert "| forced value | vocab |" in render_markdown(bare)


def test_png_is_valid_and_byte_identical():
    pytest.importorskip("matplotlib")
    inputs = _inputs(drop_patched=True)
    first, second = render_png(inputs), render_png(_inputs(drop_patched=True))
    assert first[:8] == b"\x89PNG\r\n\x1a\n"
    assert first[12:16] == b"IHDR"
    assert first == second
    assert b"tIME" not in first and b"Software" not in first
    assert render_png(_inputs()) != first  # the plot depends on the results


def _exact_records(drop_patched: bool) -> tuple[ReportInputs, list[dict]]:
    """The report inputs and each row's exact-real record, computed from the same bytes."""
    from harness.core.f32 import decode
    from harness.diagnostics.exact import exact_count
    from harness.diagnostics.exact_bundle import ExactRow

    inputs = _inputs(drop_patched=drop_patched)
    cases = [_forced_case()[0], _ordinary_case(drop_patched)[0]]
    records = []
    rows = iter(inputs.rows)
    for case in cases:
        logits, ps = decode(case.logits), decode(case.p)
        for i in range(case.batch):
            r = next(rows)
            out = exact_count(logits[i * VOCAB : (i + 1) * VOCAB], ps[i])
            records.append(ExactRow(r["case"], r["row"], r["kind"], tuple(r["stops"]),
                                    r["oracle"]["count"], out,
                                    {s: r[s].get("kept") for s in ("stock", "patched")}
                                    ).to_json())
    return inputs, records


def test_exact_lines_show_stopped_rows_and_one_summary_line():
    pytest.importorskip("flint")
    from harness.diagnostics.exact_report import exact_lines

    inputs, records = _exact_records(drop_patched=True)
    assert "Exact-real" not in render_markdown(inputs)  # a report has no exact section
    section = "\n".join(exact_lines(records))
    stopped = [r for r in records if r["stops"]]
    assert len(stopped) == 1
    row = next(line for line in section.splitlines() if line.startswith("| ordinary-v64[1] |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    exact_count = stopped[0]["exact_count"]
    assert cells[2] == str(stopped[0]["binary64_count"]) and cells[3].startswith(
        f"{exact_count} (")
    assert cells[5] == str(exact_count - 1) and cells[6] == "patched under-keeps"
    agree = sum(r["binary64_vs_exact"] == "agree" for r in records)
    assert f"binary64 and exact-real counts agree on {agree} of {len(records)} rows." in section
