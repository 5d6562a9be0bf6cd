"""Rule set regression/v1 on real rows: the change stops where it fails and the base does not,
or where its symmetric difference grows; rows the base already fails are base defects,
counted in the verdict (schema-valid) and listed in report.md; never a pass of the base."""

from __future__ import annotations

import math
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core import gate
from harness.core.oracle import top_k_top_p
from harness.core.report import ReportInputs, render_markdown
from harness.core.rulesets import ALL_STOP_REASONS, RowInput, rule_set
from harness.core.schema import load as load_schema

NEG = -math.inf
REG = rule_set("regression/v1")


def _f32(values) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def _output(logits, kept):
    return [v if i in kept else NEG for i, v in enumerate(logits)]


def judge(logits, base_kept, change_kept, *, p=None, k=None, forced=None, split=False,
          change_values=None):
    oracle = top_k_top_p(logits, p32=p, k=k)
    stock = _output(logits, set(base_kept))
    patched = change_values or _output(logits, set(change_kept))
    row = gate.Row("c", 0, "forced" if forced is not None else "ordinary", logits,
                   p if p is not None else 1.0, forced, k)
    data = RowInput(row, oracle, gate.SideOutput("ok", stock), gate.SideOutput("ok", patched),
                    split, None, _f32(logits), {"stock": _f32(stock), "patched": _f32(patched)},
                    False)
    return REG.judge(data), oracle


def _canonical(logits):
    return sorted(range(len(logits)), key=lambda i: (-logits[i], i))


# Known-answer row: softmax masses of ids in canonical order 0, 4, {1, 2, 6} (tied), ...
ROW = [3.0, 1.0, 1.0, 0.5, 2.0, -1.0, 1.0, 0.0]
P = 0.84375  # exactly a float32; the oracle keeps ids 0, 4, 1, 2 (4 tokens, mass .852)


def test_known_answer_oracle_row():
    oracle = top_k_top_p(ROW, p32=P, k=None)
    assert list(oracle.kept) == [0, 4, 1, 2] and oracle.count == 4


def test_an_unchanged_correct_base_passes_and_reports_no_defect():
    oracle = top_k_top_p(ROW, p32=P, k=None)
    result, _ = judge(ROW, oracle.kept, oracle.kept, p=P)
    assert result["stops"] == []
    assert result["diagnostics"]["base_defect"] is False
    assert REG.verdict([result]) == {"verdict": "PASS", "reasons": [], "rows": 1,
                                     "rows_stopped": 0,
                                     "base_defects": {"rows": 0, "reasons": {}}}


def test_a_new_fault_on_a_row_the_base_passes_stops_the_change():
    order = _canonical(ROW)
    under, _ = judge(ROW, order[:4], order[:3], p=P)
    assert under["stops"] == ["missing_oracle_token", "symdiff_growth", "under_keep"]
    tie, _ = judge(ROW, order[:4], [0, 4, 1, 6], p=P)  # id 6 instead of id 2 at the tie
    assert tie["stops"] == ["missing_oracle_token", "noncanonical_tie", "symdiff_growth"]
    hole, _ = judge(ROW, order[:4], [0, 1, 2, 6, 3], p=P)  # id 4 (logit 2.0) dropped
    assert "non_prefix" in hole["stops"]


def test_a_base_defect_is_reported_not_a_stop_unless_the_change_is_worse():
    order = _canonical(ROW)
    same, _ = judge(ROW, order[:3], order[:3], p=P)  # both under-keep the same way
    assert same["stops"] == []
    assert same["diagnostics"]["stock_faults"] == ["missing_oracle_token", "under_keep"]
    assert same["diagnostics"]["base_defect"] is True
    worse, _ = judge(ROW, order[:3], order[:2], p=P)
    assert worse["stops"] == ["symdiff_growth"]
    better, _ = judge(ROW, order[:3], order[:4], p=P)  # the change fixes the base's defect
    assert better["stops"] == []
    verdict = REG.verdict([same, worse, better])
    assert verdict["verdict"] == "STOP" and verdict["reasons"] == ["symdiff_growth"]
    assert verdict["base_defects"] == {"rows": 3, "reasons": {"missing_oracle_token": 3,
                                                              "under_keep": 3}}


def test_a_rewritten_kept_value_stops_even_where_the_base_fails():
    order = _canonical(ROW)
    values = _output(ROW, set(order[:3]))
    values[0] = 7.0
    result, _ = judge(ROW, order[:3], order[:3], p=P, change_values=values)
    assert result["stops"] == ["kept_value_changed"]


def test_forced_rows_hold_both_sides_to_the_forced_rules_and_the_envelope():
    logits = [0.5, 1e30, -0.25, 0.0] + [0.1] * 60
    ok, oracle = judge(logits, [1], [1], p=0.75, forced=1, split=True)
    assert list(oracle.kept) == [1] and ok["stops"] == []
    dropped, _ = judge(logits, [1], [], p=0.75, forced=1, split=True)
    assert dropped["stops"] == ["forced_failure", "symdiff_growth"]
    # the base's own forced defect (stock 0.30.0 masks the row) is reported, not a stop
    fixed, _ = judge(logits, [], [1], p=0.75, forced=1, split=True)
    assert fixed["stops"] == [] and fixed["diagnostics"]["stock_faults"] == ["forced_failure"]
    everything = list(range(len(logits)))
    whole, _ = judge(logits, [1], everything, p=0.75, forced=1, split=False)
    assert whole["stops"] == ["count_bound", "symdiff_growth"]


def test_top_k_only_rows_must_be_the_exact_k_prefix():
    order = _canonical(ROW)
    result, _ = judge(ROW, order[:3], [*order[:2], 6], k=3)
    assert result["stops"] == ["symdiff_growth", "topk_mismatch"]


def test_every_stop_reason_is_in_the_receipt_schema_enum_and_the_verdict_validates():
    import jsonschema

    schema = load_schema("receipt.schema.json")
    assert set(REG.stop_reasons) <= set(ALL_STOP_REASONS)
    order = _canonical(ROW)
    rows = [judge(ROW, order[:3], order[:2], p=P)[0], judge(ROW, order[:4], order[:4], p=P)[0]]
    verdict = REG.verdict(rows)
    validator = jsonschema.Draft202012Validator(
        {"$defs": schema["$defs"], "$ref": "#/$defs/verdict"})
    validator.validate(verdict)
    bad = {**verdict, "base_defects": {"rows": 1, "reasons": {"not_a_reason": 1}}}
    assert list(validator.iter_errors(bad))


def test_report_v2_lists_every_base_defect_row_and_report_without_it_has_no_section():
    order = _canonical(ROW)
    rows = [judge(ROW, order[:3], order[:3], p=P)[0], judge(ROW, order[:4], order[:4], p=P)[0]]
    inputs = ReportInputs("m", "interpreter", rows, REG.verdict(rows), rules="regression/v1")
    text = render_markdown(inputs, "report/v2")
    assert "## Base defects" in text
    assert "fails 1 of 2 rows" in text and "| c\\[0\\] | missing_oracle_token, under_keep" in text
    seed = rule_set("seed/v2")
    plain = ReportInputs("m", "interpreter", rows, seed.verdict(rows), rules="seed/v2")
    assert "Base defects" not in render_markdown(plain, "report/v2")
    assert "Base defects" not in render_markdown(plain, "report/v1")


def _bf16(value: float) -> float:
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("<f", struct.pack("<I", bits))[0]


rows_strategy = st.lists(st.floats(-8, 8, width=32).map(_bf16), min_size=2, max_size=80)
p_strategy = st.floats(0.0625, 0.9375, width=32)


@given(rows_strategy, p_strategy, st.data())
@settings(max_examples=120, deadline=None)
def test_an_unchanged_base_never_stops_itself(logits, p, data):
    """Whatever the base keeps (right or wrong), the same output on the change never stops:
    a pull request that changes nothing passes, and the base's faults are all reported."""
    kept = data.draw(st.sets(st.integers(0, len(logits) - 1)))
    result, _ = judge(logits, kept, kept, p=p)
    assert result["stops"] == []
    assert result["diagnostics"]["stock_faults"] == result["diagnostics"]["patched_faults"]
    verdict = REG.verdict([result])
    assert verdict["verdict"] == "PASS"
    assert verdict["base_defects"]["rows"] == (1 if result["diagnostics"]["stock_faults"]
                                               else 0)


@given(rows_strategy, p_strategy, st.data())
@settings(max_examples=120, deadline=None)
def test_the_oracle_base_makes_regression_equal_to_the_change_judged_alone(logits, p, data):
    """Against a base that keeps exactly the oracle's set, a change stops exactly when it
    has a fault of its own or differs from the oracle at all."""
    oracle = top_k_top_p(logits, p32=p, k=None)
    kept = data.draw(st.sets(st.integers(0, len(logits) - 1)))
    result, _ = judge(logits, oracle.kept, kept, p=p)
    faults = result["diagnostics"]["patched_faults"]
    assert result["diagnostics"]["stock_faults"] == []
    growth = set(kept) != set(oracle.kept)
    assert set(result["stops"]) == set(faults) | ({"symdiff_growth"} if growth else set())
