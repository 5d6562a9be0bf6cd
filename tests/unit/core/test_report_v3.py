"""report/v3 (issue 29): the forced table never shows a side as holding the forced token on a
row where it failed a forced rule, and a pull request judged by regression/v1 is told in the
base/change words, with the rows the change stopped on listed by reason. report/v1 and v2
stay as they were (committed bundles bind their bytes)."""

from __future__ import annotations

import math
import struct

import pytest

from harness.core import gate
from harness.core.oracle import top_k_top_p
from harness.core.report import (
    DEFAULT_REPORT,
    REPORT_FORMATS,
    REPORT_V2,
    REPORT_V3,
    ReportInputs,
    render_markdown,
)
from harness.core.rulesets import RowInput, rule_set

NEG = -math.inf
V1 = rule_set("regression/v1")
FORCED = [0.5, 1e30, -0.25, 0.0] + [0.1] * 60  # token 1 forced; the oracle keeps it alone


def _f32(values) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def _judge(rules, logits, base_kept, change_kept, *, p=0.75, forced=1, split=True, row=0):
    oracle = top_k_top_p(logits, p32=p, k=None)
    stock = [v if i in set(base_kept) else NEG for i, v in enumerate(logits)]
    patched = [v if i in set(change_kept) else NEG for i, v in enumerate(logits)]
    data = RowInput(gate.Row("c", row, "forced" if forced is not None else "ordinary", logits,
                             p, forced, None),
                    oracle, gate.SideOutput("ok", stock), gate.SideOutput("ok", patched),
                    split, None, _f32(logits), {"stock": _f32(stock), "patched": _f32(patched)},
                    False)
    return rules.judge(data)


def _report(rules_id, rows, report_format):
    rules = rule_set(rules_id)
    return render_markdown(ReportInputs("m", "interpreter", rows, rules.verdict(rows),
                                        cases={"cases": [{"id": "c", "vocab": len(FORCED),
                                                          "rows": [{"label": "value=1e30"}] * 4}]},
                                        rules=rules_id), report_format)


def _whole_vocabulary_rows():
    """Four forced rows on which the change keeps every token on the split path (as 0.33.0
    kept 2048): each stops for forced_failure, the base holding the forced token."""
    everything = list(range(len(FORCED)))
    return [_judge(V1, FORCED, [1], everything, row=i) for i in range(4)]


def test_the_rows_stop_for_forced_failure():
    assert all("forced_failure" in r["stops"] for r in _whole_vocabulary_rows())


def test_report_v2_said_the_change_held_on_rows_it_failed():
    """The defect, kept as it was: report/v2 bytes are bound into committed bundles."""
    text = _report("regression/v1", _whole_vocabulary_rows(), REPORT_V2)
    assert "patched held on 4 of 4" in text
    assert "| 1e30 | 64 | 4 | 0/4 | none | 4/4 | none |" in text


def test_report_v3_counts_the_failed_forced_rows_and_names_the_failure():
    text = _report("regression/v1", _whole_vocabulary_rows(), REPORT_V3)
    assert "change held on 0 of 4" in text
    assert "| 1e30 | 64 | 4 | 0/4 | none | 0/4 | forced_failure x4 |" in text
    assert "held on 4 of 4" not in text


def test_report_v3_a_patched_failure_named_by_serve_rules_is_shown_as_before():
    """serve/v1 names the forced rules: the table shows them (as report/v2 did)."""
    serve = rule_set("serve/v1")
    everything = list(range(len(FORCED)))
    rows = [_judge(serve, FORCED, [1], everything, row=i) for i in range(4)]
    assert all("forced_failure" in r["stops"] for r in rows)
    text = _report("serve/v1", rows, REPORT_V3)
    assert "patched held on 0 of 4" in text and "not_exactly_one x4" in text


def test_report_v3_speaks_the_pull_request_words_for_regression_v1():
    rows = _whole_vocabulary_rows()
    v2 = _report("regression/v1", rows, REPORT_V2)
    v3 = _report("regression/v1", rows, REPORT_V3)
    fix_words = ("Passing proves only that the forced masking defect is fixed",
                 "Stock failures are the reproduced defect")
    assert all(w in v2 for w in fix_words)  # the old wording, still bound in old bundles
    assert not any(w in v3 for w in fix_words)
    assert "Judged as a change (patched) against its base (stock)" in v3
    assert "| rows | side | exact mask equality" in v3 and "change (patched)" in v3


def test_report_v3_lists_the_rows_the_change_broke_by_reason_for_regression_v1():
    rows = _whole_vocabulary_rows()
    assert "Rows the change broke" not in _report("regression/v1", rows, REPORT_V2)
    v3 = _report("regression/v1", rows, REPORT_V3)
    assert "## Rows the change broke" in v3
    for reason in sorted({s for r in rows for s in r["stops"]}):
        assert f"- `{reason}` (4): c\\[0\\], c\\[1\\], c\\[2\\], c\\[3\\]" in v3


def test_report_v3_a_clean_change_broke_no_row():
    rows = [_judge(V1, FORCED, [1], [1], row=i) for i in range(4)]
    assert "The change broke no row." in _report("regression/v1", rows, REPORT_V3)


@pytest.mark.parametrize("rules_id", ["seed/v2", "regression/v2"])
def test_report_v3_keeps_each_rule_sets_own_words(rules_id):
    rows = [_judge(rule_set(rules_id), FORCED, [1], [1], row=i) for i in range(4)]
    text = _report(rules_id, rows, REPORT_V3)
    assert "report format `report/v3`" in text
    if rules_id == "seed/v2":
        assert "Passing proves only that the forced masking defect is fixed" in text
        assert "Stock lost the forced token on 0 of 4 forced rows; patched held on 4 of 4" in text
    else:
        assert "Judged as a change (patched) against its base (stock) on every row" in text


def test_new_bundles_are_written_in_report_v3():
    assert DEFAULT_REPORT == REPORT_V3 and REPORT_V3 in REPORT_FORMATS
