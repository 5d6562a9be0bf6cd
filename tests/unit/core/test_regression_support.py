"""Rule set regression-support/v1 on real rows, through the real judge: a sampling row (its
evidence records draws) stops the change on a fault the base does not have or on growth of
its draws outside the allowed set or of their binary64 mass outside the oracle's set; an
identical change never stops; every row without draws is judged exactly as regression/v2
judges it; base defects are counted and listed as regression/v2 lists them."""

from __future__ import annotations

import math
import struct

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core import gate
from harness.core.f32 import to_float32
from harness.core.judge import CaseBytes, RowSpec, judge_cases
from harness.core.oracle import Certified, top_k_top_p
from harness.core.regression_support import FAULTS, REGRESSION_SUPPORT_V1, STOP_REASONS
from harness.core.report import ReportInputs, render_markdown
from harness.core.rulesets import ALL_STOP_REASONS, RowInput, rule_set
from harness.core.schema import load as load_schema
from harness.core.support_rules import allowed_count, canonical_order

NEG = -math.inf
RS = rule_set(REGRESSION_SUPPORT_V1)
V2 = rule_set("regression/v2")

# fp32-exact logits: canonical order 0, 1, 2, 3, 4, 5, 6, 7
ROW = [4.0, 3.0, 3.0, 0.5, 0.25, 0.0, -1.0, -2.0]
P = to_float32(0.9)


def _f32(values) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def _output(logits, kept):
    return [v if i in kept else NEG for i, v in enumerate(logits)]


def _counts(drawn):
    return [[t, 1] for t in sorted(drawn)]


def _data(logits, base, change, *, p=P, k=None, forced=None, draws="both",
          change_values=None):
    """A row whose sides drew (or kept) ``base`` and ``change``; ``draws``: which sides'
    evidence records draws ("both", "stock", "patched" or None: a masking path)."""
    oracle = top_k_top_p(logits, p32=p if p < 1.0 else None, k=k)
    stock = _output(logits, set(base))
    patched = change_values or _output(logits, set(change))
    row = gate.Row("c", 0, "forced" if forced is not None else "ordinary", logits, p, forced, k)
    recorded = {"both": {"stock": _counts(base), "patched": _counts(change)},
                "stock": {"stock": _counts(base)},
                "patched": {"patched": _counts(change)}, None: None}[draws]
    return RowInput(row, oracle, gate.SideOutput("ok", stock), gate.SideOutput("ok", patched),
                    False, None, _f32(logits), {"stock": _f32(stock), "patched": _f32(patched)},
                    False, recorded)


def judge(logits, base, change, **kw):
    return RS.judge(_data(logits, base, change, **kw))


def test_registered_with_every_stop_reason_in_the_receipt_schema():
    assert RS.id == "regression-support/v1" and RS.top_k and RS.needs_raw
    enum = load_schema("receipt.schema.json")["$defs"]["stop_reason"]["enum"]
    assert set(STOP_REASONS) <= set(enum) and set(ALL_STOP_REASONS) == set(enum)
    assert set(FAULTS) <= set(enum)  # base-defect rows name their faults by stop reason
    for reason in ("new_fault", "outside_support_growth", "mass_outside_growth",
                   "kept_value_changed", "draw_outside_support", "lost_oracle_token"):
        assert reason in RS.stop_reasons


def test_an_identical_sample_passes_and_a_different_one_inside_the_support_passes():
    oracle = top_k_top_p(ROW, p32=P, k=None)
    assert isinstance(oracle, Certified) and set(oracle.kept) == {0, 1, 2}
    same = judge(ROW, {0, 1}, {0, 1})
    assert same["stops"] == [] and same["diagnostics"]["altered"] is False
    other = judge(ROW, {0, 1}, {0, 2})  # another sample of the same support: a PASS
    assert other["stops"] == [] and other["diagnostics"]["altered"] is True
    # a sample's gaps are not lost oracle tokens here (regression/v2 would stop them)
    assert "lost_oracle_token" in V2.judge(_data(ROW, {0, 1}, {0, 2}, draws=None))["stops"]


def test_a_draw_outside_the_allowed_set_where_the_base_has_none_stops():
    allowed = judge(ROW, {0}, {0})["diagnostics"]["allowed"]
    outside = canonical_order(ROW)[allowed]
    result = judge(ROW, {0, 1}, {0, outside})
    assert result["stops"] == ["mass_outside_growth", "new_fault", "outside_support_growth"]
    assert result["diagnostics"]["new_faults"] == ["draw_outside_support"]
    assert result["diagnostics"]["base_defect"] is False


def test_on_a_base_defect_row_only_growth_stops():
    order = canonical_order(ROW)
    allowed = judge(ROW, {0}, {0})["diagnostics"]["allowed"]
    first, second = order[allowed], order[allowed + 1]
    base = {0, first}
    same_count = judge(ROW, base, {1, first})  # still one token outside, same mass
    assert same_count["stops"] == [] and same_count["diagnostics"]["base_defect"] is True
    assert same_count["diagnostics"]["stock_faults"] == ["draw_outside_support"]
    more = judge(ROW, base, {0, first, second})
    assert more["stops"] == ["mass_outside_growth", "outside_support_growth"]
    lighter = judge(ROW, {0, second}, {0, first})  # one outside token each; ROW[first] > ...
    assert "outside_support_growth" not in lighter["stops"]
    assert "mass_outside_growth" in lighter["stops"]  # ... so its mass is larger


def test_no_draw_changed_bits_nan_and_a_missing_draws_record_are_faults():
    empty = judge(ROW, {0}, set())
    assert empty["stops"] == ["new_fault"] and empty["diagnostics"]["new_faults"] == ["no_draw"]
    bent = _output(ROW, {0})
    bent[0] = 4.5
    changed = judge(ROW, {0}, {0}, change_values=bent)
    assert changed["stops"] == ["kept_value_changed", "new_fault"]
    nan = _output(ROW, {0})
    nan[1] = math.nan
    assert "new_fault" in judge(ROW, {0}, {0}, change_values=nan)["stops"]
    unrecorded = judge(ROW, {0}, {0}, draws="stock")  # the change recorded no draws
    assert unrecorded["diagnostics"]["new_faults"] == ["draw_evidence_mismatch"]
    assert unrecorded["stops"] == ["new_fault"]


def test_an_unreadable_change_and_an_ambiguous_oracle_fail_closed():
    data = _data(ROW, {0}, {0})
    crashed = RowInput(data.row, data.oracle, data.stock, gate.SideOutput.failed("timeout"),
                       False, None, data.logits_bytes, {"stock": data.side_bytes["stock"],
                                                        "patched": None}, False, data.draws)
    assert RS.judge(crashed)["stops"] == ["timeout"]


def test_forced_and_top_k_rows():
    forced = [1e9, *ROW[1:]]
    assert judge(forced, {0}, {0}, forced=0)["stops"] == []
    # token 1's mass beside 1e9 is 0 in binary64: the count stops it, not the mass
    assert judge(forced, {0}, {0, 1}, forced=0)["stops"] == [
        "new_fault", "outside_support_growth"]
    assert judge(ROW, {0, 1}, {0, 1}, p=1.0, k=2)["stops"] == []
    tie = judge(ROW, {0, 1}, {0, 2}, p=1.0, k=2)  # k = 2 allows ids 0 and 1 only
    assert tie["diagnostics"]["new_faults"] == ["draw_outside_support"]


def test_verdict_lists_base_defects_as_regression_v2_does():
    allowed = judge(ROW, {0}, {0})["diagnostics"]["allowed"]
    outside = canonical_order(ROW)[allowed]
    rows = [dict(judge(ROW, {0, outside}, {0, outside}), row=0),
            dict(judge(ROW, {0}, {0, outside}), row=1),
            dict(RS.judge(_data(ROW, {0, 1, 2}, {0, 1, 2}, draws=None)), row=2)]
    verdict = RS.verdict(rows)
    assert verdict["verdict"] == "STOP"
    assert verdict["base_defects"] == {"rows": 1, "reasons": {"draw_outside_support": 1}}
    assert verdict["base_defect_rows"] == [{"row": "c[0]", "faults": ["draw_outside_support"],
                                            "altered": False}]
    assert verdict["broken_rows"] == {"mass_outside_growth": ["c[1]"], "new_fault": ["c[1]"],
                                      "outside_support_growth": ["c[1]"]}
    schema = load_schema("receipt.schema.json")
    for key in ("base_defects", "base_defect_rows", "broken_rows"):
        part = schema["$defs"]["verdict"]["properties"][key]
        jsonschema.validate(verdict[key], {**part, "$defs": schema["$defs"]})


def test_the_report_tells_the_change_against_its_base():
    allowed = judge(ROW, {0}, {0})["diagnostics"]["allowed"]
    outside = canonical_order(ROW)[allowed]
    rows = [judge(ROW, {0, outside}, {0, outside}), judge(ROW, {0}, {0, outside}),
            judge([1e9, *ROW[1:]], {0}, {0}, forced=0)]
    inputs = ReportInputs(manifest_name="m", backend="cuda", rows=rows,
                          verdict=RS.verdict(rows), rules=REGRESSION_SUPPORT_V1)
    text = render_markdown(inputs)
    assert "rows of a sampling path by the support of their draws" in text
    assert "## Rows the change broke" in text and "`outside_support_growth` (1)" in text


def test_the_judge_reads_draws_from_evidence_and_judges_other_cases_as_regression_v2():
    rows = [ROW, list(reversed(ROW))]  # row 1's oracle keeps ids 7, 5 and 6
    p = struct.pack("<2f", P, P)
    drew = {"stock": [{0, 1}, {7}], "patched": [{0, 2}, {0}]}
    out = {side: b"".join(_f32(_output(r, d)) for r, d in zip(rows, drew[side], strict=True))
           for side in drew}
    spec = [RowSpec("ordinary"), RowSpec("ordinary")]
    logits = b"".join(_f32(r) for r in rows)
    sampled = CaseBytes("s", len(ROW), spec, logits, p, out["stock"], out["patched"], False,
                        draws={side: [_counts(d) for d in drew[side]] for side in drew})
    masked = CaseBytes("m", len(ROW), spec, logits, p, out["stock"], out["patched"], False)
    got = judge_cases([sampled, masked], rules=REGRESSION_SUPPORT_V1)
    assert got[0]["stops"] == []  # another sample inside the support
    assert got[1]["diagnostics"]["new_faults"] == ["draw_outside_support"]
    assert got[2:] == judge_cases([masked], rules="regression/v2")  # row for row
    assert "lost_oracle_token" in got[2]["stops"]  # a sample judged as a mask: its gaps


# --- properties -----------------------------------------------------------------------------

_LOGITS = st.lists(st.integers(-16, 16).map(lambda v: v / 4.0), min_size=2, max_size=24)
_P = st.sampled_from([0.3, 0.5, 0.8, 0.95, 1.0])


@settings(max_examples=80, deadline=None)
@given(_LOGITS, _P, st.data())
def test_a_change_identical_to_the_base_never_stops(logits, p, data):
    p32 = to_float32(p) if p < 1.0 else 1.0
    k = data.draw(st.one_of(st.none(), st.integers(1, len(logits))))
    drawn = set(data.draw(st.lists(st.integers(0, len(logits) - 1), max_size=8)))
    draws = data.draw(st.sampled_from(["both", None]))
    result = judge(logits, drawn, drawn, p=p32, k=k, draws=draws)
    assert result["stops"] in ([], ["oracle_boundary_ambiguous"])


@settings(max_examples=80, deadline=None)
@given(_LOGITS, _P, st.data())
def test_a_draw_outside_the_allowed_set_where_the_base_draws_none_always_stops(logits, p, data):
    p32 = to_float32(p) if p < 1.0 else 1.0
    k = data.draw(st.one_of(st.none(), st.integers(1, len(logits))))
    oracle = top_k_top_p(logits, p32=p32 if p32 < 1.0 else None, k=k)
    if not isinstance(oracle, Certified):
        return
    order = canonical_order(logits)
    n = allowed_count(oracle, len(order), k if k is not None and k < len(logits) else None,
                      False)
    if n >= len(order):
        return
    base = set(data.draw(st.lists(st.sampled_from(order[:n]), min_size=1, max_size=6)))
    extra = set(data.draw(st.lists(st.sampled_from(order[n:]), min_size=1, max_size=4)))
    result = judge(logits, base, base | extra, p=p32, k=k)
    assert "new_fault" in result["stops"] and "outside_support_growth" in result["stops"]
    assert result["diagnostics"]["new_faults"] == ["draw_outside_support"]


@settings(max_examples=80, deadline=None)
@given(_LOGITS, _P, st.data())
def test_rows_without_draws_agree_with_regression_v2_row_for_row(logits, p, data):
    p32 = to_float32(p) if p < 1.0 else 1.0
    k = data.draw(st.one_of(st.none(), st.integers(1, len(logits))))
    ids = st.lists(st.integers(0, len(logits) - 1), max_size=len(logits))
    base, change = set(data.draw(ids)), set(data.draw(ids))
    row = _data(logits, base, change, p=p32, k=k, draws=None)
    assert RS.judge(row) == V2.judge(row)
