"""``pr``'s answer says what changed, and a base that did not run is the base's failure
(issue 37, items 3 and 4): :mod:`harness.ci.changes` on a hand-made bundle, and the lines
``pr`` prints from it."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from harness.ci.changes import changes_of, first_line
from harness.commands.pr import render
from harness.core.bundle import output_name
from harness.pr.flow import BrokenRow, PrAnswer

VOCAB = 2


def _f32(*values: float) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def _row(n: int, stops: list[str], base_defect: bool) -> dict:
    return {"case": "c", "row": n, "stops": stops,
            "oracle": {"status": "certified", "count": 1},
            "stock": {"status": "ok", "kept": 1}, "patched": {"status": "ok", "kept": 2},
            "diagnostics": {"base_defect": base_defect}}


def _files(stock: bytes, patched: bytes) -> dict[str, bytes]:
    return {"cases.json": json.dumps({"cases": [{"id": "c", "vocab": VOCAB, "batch": 3}]})
            .encode(), output_name("stock", "c"): stock, output_name("patched", "c"): patched,
            "report.md": b"# report\n"}


def test_rows_changed_count_output_bytes_and_broken_rows_carry_kept_counts():
    ninf = float("-inf")
    stock = _f32(1, ninf, 1, ninf, 1, ninf)
    patched = _f32(1, ninf, 1, 0.5, 1, 2)  # rows 1 and 2 differ
    files = _files(stock, patched)
    rows = [_row(0, [], False), _row(1, ["symdiff_growth"], False), _row(2, [], True)]
    found = changes_of(rows, files.__getitem__, lambda case: "split", {}, files.__contains__)
    assert (found.rows, found.rows_changed, found.rows_changed_base_right) == (3, 2, 1)
    (broken,) = found.broken
    assert (broken.row, broken.reasons, broken.path) == ("c[1]", ("symdiff_growth",), "split")
    assert broken.kept_text() == "kept: oracle 1, base 1, change 2"
    assert found.report == "report.md" and found.base_failed is None
    assert found.to_json()["broken"][0]["kept"] == {"oracle": 1, "base": 1, "change": 2}


def test_a_crashed_base_is_named_with_its_first_line():
    reason = ("child exit status 1: ModuleNotFoundError: No module named "
              "'vllm._C_stable_libtorch'")  # as the runner words a crash
    predicate = {"environment": {"side_results": {
        "stock": {"status": "kernel_crash", "reason": reason, "returncode": 1},
        "patched": {"status": "kernel_crash", "reason": reason, "returncode": 1}}}}
    files = _files(b"", b"")
    rows = [{**_row(0, ["kernel_crash"], False), "diagnostics": {},
             "stock": {"status": "kernel_crash"}, "patched": {"status": "kernel_crash"}}]
    found = changes_of(rows, files.__getitem__, lambda case: None, predicate,
                       files.__contains__)
    assert found.base_failed == f"kernel_crash: {reason}"
    assert first_line("Traceback (most recent call last):\n  x\nValueError: y") == \
        "ValueError: y"
    answer = _answer(base_failed="kernel_crash: ModuleNotFoundError: No module named "
                                 "'vllm._C_stable_libtorch'",
                     broken=(BrokenRow("c[0]", ("kernel_crash",), None, ""),))
    text = "\n".join(render(answer))
    assert text.startswith("BASE FAILED: the base could not run (kernel_crash: "
                           "ModuleNotFoundError")
    assert "the change broke" not in text and "base defects" not in text


def test_the_answer_lists_kept_counts_rows_changed_and_the_report():
    answer = _answer(broken=(BrokenRow("c[1]", ("symdiff_growth",), "split",
                                       "kept: oracle 1, base 1, change 2"),),
                     rows_changed=2, rows_changed_base_right=1,
                     report=Path("out/bundle/report.md"))
    lines = render(answer)
    assert lines[0].startswith("STOP: the change broke 1 of 3 rows")
    assert "  c[1]  symdiff_growth  split  kept: oracle 1, base 1, change 2" in lines
    assert ("outputs: 2 of 3 rows differ from the base's; 1 of them are rows the base got "
            "right") in lines
    assert "report: out/bundle/report.md" in lines


def _answer(**changes: object) -> PrAnswer:
    fields: dict = dict(verdict="STOP", rows=3, broken=(), run_stops=(), base_defects=0,
                        touched=(), base_reused_from=None, base_kept=False, matrix="m",
                        rules="regression/v2", manifest=Path("out/pr.json"),
                        bundle=Path("out/bundle"), keyid="0" * 64)
    fields.update(changes)
    return PrAnswer(**fields)
