"""Rule set regression/v2 on real rows: on every row, base defect or not, the change stops
where it is worse than the base (a new fault, a lost oracle token, missing-oracle, symdiff or
binary64 mass growth, a rewritten kept value); an unchanged base passes by construction;
minimal follows the seed's mass test on p = 1 rows (issue 27); regression/v1 stays frozen."""

from __future__ import annotations

import math
import struct

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core import gate
from harness.core.f32 import to_float32
from harness.core.oracle import Certified, top_k_top_p
from harness.core.regression_v2 import CHANGE_STOPS, minimal
from harness.core.report import ReportInputs, render_markdown
from harness.core.rulesets import ALL_STOP_REASONS, RULE_SETS, RowInput, rule_set
from harness.core.schema import load as load_schema

NEG = -math.inf
V1 = rule_set("regression/v1")
V2 = rule_set("regression/v2")


def _f32(values) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def _output(logits, kept):
    return [v if i in kept else NEG for i, v in enumerate(logits)]


def _data(logits, base_kept, change_kept, *, p=None, k=None, forced=None, split=False,
          change_values=None, base_values=None, split_sides=None):
    oracle = top_k_top_p(logits, p32=p, k=k)
    stock = base_values or _output(logits, set(base_kept))
    patched = change_values or _output(logits, set(change_kept))
    row = gate.Row("c", 0, "forced" if forced is not None else "ordinary", logits,
                   p if p is not None else 1.0, forced, k)
    return RowInput(row, oracle, gate.SideOutput("ok", stock), gate.SideOutput("ok", patched),
                    split, split_sides, _f32(logits),
                    {"stock": _f32(stock), "patched": _f32(patched)}, False)


def judge(logits, base_kept, change_kept, rules=V2, **kw):
    return rules.judge(_data(logits, base_kept, change_kept, **kw))


def _canonical(logits):
    return sorted(range(len(logits)), key=lambda i: (-logits[i], i))


ROW = [3.0, 1.0, 1.0, 0.5, 2.0, -1.0, 1.0, 0.0]
P = 0.84375  # the oracle keeps ids 0, 4, 1, 2 (canonical order 0, 4, 1, 2, 6, 3, 7, 5)


def _attack_row():
    """A 100-token row whose oracle keeps 21 tokens (p found by bisection on float32)."""
    logits = [to_float32(4.0 - 0.05 * i) for i in range(100)]
    lo, hi = 0.01, 0.99
    for _ in range(60):
        mid = to_float32((lo + hi) / 2)
        count = top_k_top_p(logits, p32=mid, k=None).count
        if count < 21:
            lo = mid
        else:
            hi = mid
    p = to_float32(hi)
    assert top_k_top_p(logits, p32=p, k=None).count == 21
    return logits, p


def test_the_over_keep_attack_passes_regression_v1_and_stops_regression_v2():
    logits, p = _attack_row()
    oracle = set(top_k_top_p(logits, p32=p, k=None).kept)
    change = set(_canonical(logits)[21:79])  # 58 tokens, none of the oracle's 21
    assert len(change) == 58 and not change & oracle
    old = judge(logits, range(100), change, rules=V1, p=p)
    new = judge(logits, range(100), change, p=p)
    assert old["stock"]["symdiff"] == new["patched"]["symdiff"] == 79  # same symdiff
    assert old["stops"] == [] and V1.verdict([old])["verdict"] == "PASS"
    assert new["stops"] == ["lost_oracle_token", "mass_dropped_growth",
                            "missing_oracle_growth", "new_fault"]
    assert new["diagnostics"]["base_defect"] is True
    assert new["diagnostics"]["altered"] is True
    assert new["diagnostics"]["new_faults"] == ["non_prefix", "missing_oracle_token"]
    verdict = V2.verdict([new])
    assert verdict["verdict"] == "STOP"
    assert verdict["base_defect_rows"] == [{"row": "c[0]", "faults": ["count_bound"],
                                            "altered": True}]
    assert verdict["base_defects_altered"] == 1
    assert verdict["broken_rows"]["lost_oracle_token"] == ["c[0]"]


# --- one test per stop reason: each stops where the base does not, and only by it ----------


def test_new_fault_alone():
    # the base keeps the oracle plus the next token (a canonical prefix of 5); the change keeps
    # as many, with id 3 (0.5) instead of id 6 (1.0): not a prefix. Same symdiff, same missing
    # count, no oracle token lost, less mass outside: only the new fault tells
    base = [0, 4, 1, 2, 6]
    assert _canonical(ROW)[:5] == base
    result = judge(ROW, base, [0, 4, 1, 2, 3], p=P)
    assert result["stops"] == ["new_fault"]
    assert result["diagnostics"]["new_faults"] == ["non_prefix"]
    assert judge(ROW, base, base, p=P)["stops"] == []


def test_new_fault_on_a_row_the_base_already_fails():
    # regression/v1 judges this row by symdiff growth alone and passes it
    base = [0, 4, 1]  # under-keeps: missing_oracle_token, under_keep
    change = [0, 4, 2]  # as many, but id 2 before its tie partner id 1: noncanonical_tie
    assert judge(ROW, base, change, rules=V1, p=P)["stops"] == []
    result = judge(ROW, base, change, p=P)
    assert result["diagnostics"]["new_faults"] == ["noncanonical_tie"]
    assert result["stops"] == ["lost_oracle_token", "new_fault"]


def test_new_fault_compares_forced_rules_one_by_one():
    # the base (no split path proved) masks the whole forced row: forced token dropped, all
    # masked, no argmax; the change proved the split path and keeps the forced token and one
    # more: not exactly one token. Both have "forced_failure" and the same symdiff, so
    # regression/v1 passes it; the forced rule the change breaks is not one the base breaks
    logits = [0.5, 1e30, -0.25, 0.0, 0.1]
    sides = (False, True)
    old = judge(logits, [], [1, 4], rules=V1, p=0.75, forced=1, split_sides=sides)
    assert old["stops"] == []
    result = judge(logits, [], [1, 4], p=0.75, forced=1, split_sides=sides)
    diagnostics = result["diagnostics"]
    assert diagnostics["stock_forced_failures"] == ["forced_token_dropped", "all_masked",
                                                    "argmax_not_forced"]
    assert diagnostics["patched_forced_failures"] == ["not_exactly_one"]
    assert diagnostics["new_faults"] == ["forced_failure"]
    assert result["stops"] == ["new_fault"]
    fixed = judge(logits, [], [1], p=0.75, forced=1, split_sides=sides)  # the fix passes
    assert fixed["stops"] == [] and fixed["diagnostics"]["patched_forced_failures"] == []


def test_lost_oracle_token_alone():
    # the base keeps id 2 out of canonical order; the change keeps its tie partner id 1 and
    # drops id 2. Same missing count, same symdiff, same masses (a tie), fewer faults: only
    # the oracle token the base kept and the change dropped tells
    result = judge(ROW, [0, 4, 2], [0, 4, 1], p=P)
    assert result["stops"] == ["lost_oracle_token"]
    assert result["diagnostics"]["new_faults"] == []


def test_missing_oracle_growth_on_a_base_defect_row():
    # both under-keep; the change misses one more oracle token (v1 saw symdiff only)
    result = judge(ROW, [0, 4, 1], [0, 4], p=P)
    assert result["stops"] == ["lost_oracle_token", "mass_dropped_growth",
                               "missing_oracle_growth", "symdiff_growth"]
    # the change keeps one wrong token fewer where it misses one more: the symdiff does not
    # grow, missing_oracle_growth is named
    swapped = judge(ROW, [0, 4, 1, 2, 6, 3], [0, 4, 1, 6], p=P)
    assert "symdiff_growth" not in swapped["stops"]
    assert "missing_oracle_growth" in swapped["stops"]


def test_symdiff_growth_alone():
    # both keep the oracle (id 0) and over-keep; the change keeps one more token of zero
    # binary64 mass (exp(-810) underflows): no lost token, no mass growth, same faults
    logits = [10.0, 9.0, -800.0, -800.0, -800.0]
    result = judge(logits, [0, 1], [0, 1, 2], p=0.5)
    assert result["stops"] == ["symdiff_growth"]
    assert result["diagnostics"]["stock_mass_outside"] == \
        result["diagnostics"]["patched_mass_outside"]


def test_mass_outside_growth_alone():
    # both keep the oracle (id 0) and one token more: the base a light one out of order, the
    # change the heavier next in order (no fault the base lacks; the base's non_prefix gone)
    logits = [5.0, 1.0, 1.0, 0.0, 0.0]
    result = judge(logits, [0, 3], [0, 1], p=0.5)
    assert result["stops"] == ["mass_outside_growth"]
    assert result["diagnostics"]["stock_faults"] == ["non_prefix"]


def test_mass_dropped_growth_where_the_missing_count_does_not_grow():
    logits = [3.0, 2.0, 1.0, -5.0, -6.0]
    assert list(top_k_top_p(logits, p32=0.9375, k=None).kept) == [0, 1, 2]
    # the base drops id 2 (light), the change drops id 1 (heavy) and keeps id 2
    result = judge(logits, [0, 1], [0, 2], p=0.9375)
    assert result["stops"] == ["lost_oracle_token", "mass_dropped_growth", "new_fault"]
    assert result["diagnostics"]["new_faults"] == ["non_prefix"]
    assert "mass_dropped_growth" not in judge(logits, [0, 2], [0, 1], p=0.9375)["stops"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([0.0, 1.0, -1.0, 2.5, -700.0, -800.0]), min_size=2,
                max_size=10),
       st.sets(st.integers(0, 9)), st.sets(st.integers(0, 9)))
def test_missing_and_dropped_mass_growth_imply_a_lost_oracle_token(logits, base, change):
    # what the oracle misses more of, or weighs more dropped, the change must have lost
    # from what the base kept (a subset of the base's misses weighs no more: fsum is exact)
    base = {i for i in base if i < len(logits)}
    change = {i for i in change if i < len(logits)}
    result = judge(logits, base, change, p=0.75)
    if {"missing_oracle_growth", "mass_dropped_growth"} & set(result["stops"]):
        assert "lost_oracle_token" in result["stops"]


def test_kept_value_changed_stops_whatever_the_base_does():
    order = _canonical(ROW)
    values = _output(ROW, set(order[:4]))
    values[0] = 7.0
    result = judge(ROW, order[:4], order[:4], p=P, change_values=values)
    assert result["stops"] == ["kept_value_changed", "new_fault"]
    both = judge(ROW, order[:4], order[:4], p=P, change_values=values, base_values=values)
    assert both["stops"] == ["kept_value_changed"]  # integrity is absolute


def test_fail_closed_unreadable_and_ambiguous():
    data = _data(ROW, [0], [0], p=P)
    unreadable = RowInput(data.row, data.oracle, data.stock, gate.SideOutput("timeout", None),
                          False, None, data.logits_bytes, {"stock": data.side_bytes["stock"],
                                                           "patched": None}, False)
    assert V2.judge(unreadable)["stops"] == ["timeout"]
    short = RowInput(data.row, data.oracle, data.stock, gate.SideOutput("ok", [0.0]),
                     False, None, data.logits_bytes, data.side_bytes, False)
    assert V2.judge(short)["stops"] == ["unreadable_output"]


# --- unchanged base: PASS by construction ----------------------------------------------------

_VALUES = st.sampled_from([0.0, 1.0, -1.0, 0.5, 2.0, 1e30, -3.25, 7.0])


@st.composite
def _rows(draw):
    logits = draw(st.lists(_VALUES, min_size=2, max_size=12))
    forced = draw(st.none() | st.integers(0, len(logits) - 1))
    p = draw(st.sampled_from([None, 0.5, 0.75, 0.875, 0.25, 0.84375, 1.0]))
    k = draw(st.none() | st.integers(1, len(logits) + 1))
    if forced is not None:
        logits[forced] = 1e30
    kept = draw(st.sets(st.integers(0, len(logits) - 1)))
    split = draw(st.booleans())
    return logits, forced, (None if p == 1.0 else p), k, kept, split


@settings(max_examples=300, deadline=None)
@given(_rows())
def test_an_unchanged_base_passes_by_construction(case):
    logits, forced, p, k, kept, split = case
    oracle = top_k_top_p(logits, p32=p, k=k)
    result = judge(logits, kept, kept, p=p, k=k, forced=forced, split=split)
    if isinstance(oracle, Certified):
        assert result["stops"] == []
        assert result["diagnostics"]["altered"] is False
        assert result["diagnostics"]["new_faults"] == []
        diag = result["diagnostics"]
        assert diag["stock_mass_outside"] == diag["patched_mass_outside"]
        assert diag["stock_mass_dropped"] == diag["patched_mass_dropped"]
    else:
        assert result["stops"] == ["oracle_boundary_ambiguous"]


@settings(max_examples=200, deadline=None)
@given(_rows(), st.sets(st.integers(0, 11)))
def test_regression_v2_stops_wherever_v1_stops_on_readable_certified_rows(case, other):
    logits, forced, p, k, kept, split = case
    change = {i for i in other if i < len(logits)}
    old = judge(logits, kept, change, rules=V1, p=p, k=k, forced=forced, split=split)
    new = judge(logits, kept, change, p=p, k=k, forced=forced, split=split)
    if old["stops"]:
        assert new["stops"]
    assert set(new["stops"]) <= set(V2.stop_reasons)


# --- minimal (issue 27) ------------------------------------------------------------------------


def test_minimal_on_p1_forced_rows_follows_the_seeds_mass_test():
    logits = [0.5, 1e30, -0.25, 0.0, 0.1]
    forced = 1
    # p = 1 (no top-p): the oracle keeps the whole row; the forced token alone reaches it
    whole = judge(logits, range(5), range(5), forced=forced)
    assert whole["diagnostics"]["stock_exact"] is True
    assert whole["diagnostics"]["stock_minimal"] is False  # dropping id 2 keeps mass 1
    old = judge(logits, range(5), range(5), rules=V1, forced=forced)
    assert old["diagnostics"]["stock_minimal"] is True  # v1 frozen: the count convention
    two = judge(logits, [1, 0], [1, 0], k=2, forced=forced)  # top-k 2, p = 1
    assert two["diagnostics"]["patched_minimal"] is False
    alone = judge(logits, [1], [1], forced=forced)  # removing it leaves nothing: below p
    assert alone["diagnostics"]["patched_minimal"] is True


def test_minimal_agrees_with_the_seed_where_top_p_applies():
    oracle = top_k_top_p(ROW, p32=P, k=None)
    order = _canonical(ROW)
    for n in range(1, len(ROW) + 1):
        mask = gate._mask(_output(ROW, set(order[:n])))
        assert minimal(mask, oracle, ROW) == gate._minimal(ROW, mask, oracle)


# --- registry, schema, verdict, report ---------------------------------------------------------


def test_registered_with_top_k_and_raw_bytes_and_every_reason_in_the_schema():
    assert RULE_SETS["regression/v2"].top_k and RULE_SETS["regression/v2"].needs_raw
    schema = load_schema("receipt.schema.json")
    enum = schema["$defs"]["stop_reason"]["enum"]
    assert set(CHANGE_STOPS) <= set(enum) and set(V2.stop_reasons) <= set(ALL_STOP_REASONS)


def test_the_verdict_validates_against_the_receipt_schema():
    order = _canonical(ROW)
    rows = [judge(ROW, order[:3], order[:2], p=P), judge(ROW, order[:4], order[:4], p=P)]
    verdict = V2.verdict(rows)
    schema = load_schema("receipt.schema.json")
    validator = jsonschema.Draft202012Validator(
        {"$defs": schema["$defs"], "$ref": "#/$defs/verdict"})
    validator.validate(verdict)
    assert verdict["base_defect_rows"] == [
        {"row": "c[0]", "faults": ["missing_oracle_token", "under_keep"], "altered": True}]
    for bad in ({**verdict, "broken_rows": {"not_a_reason": ["c[0]"]}},
                {**verdict, "base_defect_rows": [{"row": "c[0]", "faults": [],
                                                   "altered": True}]}):
        assert list(validator.iter_errors(bad))


def test_report_shows_both_sides_on_base_defect_rows_in_base_and_change_words():
    order = _canonical(ROW)
    rows = [judge(ROW, order[:3], order[:2], p=P), judge(ROW, order[:4], order[:4], p=P)]
    text = render_markdown(ReportInputs("m", "interpreter", rows, V2.verdict(rows),
                                        rules="regression/v2"), "report/v2")
    assert "Passing proves only that the forced masking defect is fixed" not in text
    assert "Stock failures are the reproduced defect" not in text
    assert "The change altered 1 of them" in text
    assert "| c\\[0\\] | missing_oracle_token, under_keep |" in text
    assert "3 / 2" in text  # kept, base / change
    assert "## Rows the change broke" in text
    assert "- `lost_oracle_token` (1): c\\[0\\]" in text
    v1_rows = [judge(ROW, order[:3], order[:2], rules=V1, p=P)]
    v1 = render_markdown(ReportInputs("m", "interpreter", v1_rows, V1.verdict(v1_rows),
                                      rules="regression/v1"), "report/v2")
    assert "Passing proves only that the forced masking defect is fixed" in v1  # unchanged
    assert "Rows the change broke" not in v1


@pytest.mark.parametrize("reason", CHANGE_STOPS)
def test_every_change_stop_is_a_known_reason(reason):
    assert reason in V2.stop_reasons
