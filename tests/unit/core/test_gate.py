"""Every gate rule: a row that violates exactly that rule, and rows that pass.

Rows are small and hand-built; the oracle answer each test relies on is asserted first,
so a change in the oracle shows up as a failed precondition, not a silent pass.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core import gate
from harness.core.errors import InternalError
from harness.core.gate import Row, SideOutput, judge_row, verdict
from harness.core.names import FORCED, ORDINARY
from harness.core.oracle import Certified, reference

NEG = -math.inf
# Ten distinct logits; with p = 0.75 the oracle keeps the top 3 (asserted below).
LOGITS = [3.0, 2.5, 2.0, 1.0, 0.5, 0.0, -0.5, -1.0, -2.0, -3.0]
P = 0.75


def oracle_for(logits=LOGITS, p=P) -> Certified:
    out = reference(logits, p)
    assert isinstance(out, Certified)
    return out


def masked(ids, logits=LOGITS):
    keep = set(ids)
    return [v if i in keep else NEG for i, v in enumerate(logits)]


def judge(stock_ids, patched_ids, logits=LOGITS, p=P, kind=ORDINARY, forced_id=None,
          split_path=True, stock=None, patched=None):
    row = Row("case", 0, kind, logits, p, forced_id)
    return judge_row(
        row, reference(logits, p),
        stock or SideOutput("ok", masked(stock_ids, logits)),
        patched or SideOutput("ok", masked(patched_ids, logits)),
        split_path=split_path)


def test_precondition_oracle_keeps_top_three():
    assert oracle_for().kept == (0, 1, 2)


def test_exact_outputs_pass_with_diagnostics():
    r = judge([0, 1, 2], [0, 1, 2])
    assert r["stops"] == []
    assert r["diagnostics"]["patched_exact"] is True
    assert r["diagnostics"]["patched_minimal"] is True
    assert r["patched"] == {"status": "ok", "kept": 3, "nan": False, "symdiff": 0,
                            "missing_oracle": 0}


def test_over_keep_within_envelope_passes_but_is_not_minimal():
    r = judge([0, 1, 2, 3, 4], [0, 1, 2, 3])
    assert r["stops"] == []
    assert r["diagnostics"]["patched_exact"] is False
    assert r["diagnostics"]["patched_minimal"] is False


# rule 1 -----------------------------------------------------------------------------------


@pytest.mark.parametrize("status", ["unreadable_output", "input_mismatch", "timeout",
                                    "kernel_crash"])
def test_side_failure_stops(status):
    r = judge([0, 1, 2], [0, 1, 2], patched=SideOutput.failed(status))
    assert r["stops"] == [status]
    r = judge([0, 1, 2], [0, 1, 2], stock=SideOutput.failed(status))
    assert r["stops"] == [status]


def test_wrong_length_output_is_unreadable():
    r = judge([0, 1, 2], [0, 1, 2], patched=SideOutput("ok", [1.0, 2.0]))
    assert r["stops"] == ["unreadable_output"]


def test_unknown_side_status_is_refused():
    with pytest.raises(InternalError):
        SideOutput.failed("fine")


def test_stock_under_keep_stops_and_defines_no_tradeoff():
    # Stock drops oracle token 2; patched is exact. Symdiff rule is not applied.
    r = judge([0, 1], [0, 1, 2])
    assert r["stops"] == ["stock_under_keep"]


# rule 2 -----------------------------------------------------------------------------------


def test_hole_is_non_prefix():
    # Patched keeps 0,1,2 and 4 but not 3 (logit 1.0 > 0.5): a hole.
    r = judge([0, 1, 2, 3, 4], [0, 1, 2, 4])
    assert r["stops"] == ["non_prefix"]


def test_noncanonical_exact_tie():
    # Ties at 1.0 for ids 3 and 4; keeping 4 but not 3 breaks the id-ascending tie rule.
    logits = [3.0, 2.5, 2.0, 1.0, 1.0, 0.0, -1.0]
    assert oracle_for(logits).kept == (0, 1, 2)
    r = judge([0, 1, 2, 3], [0, 1, 2, 4], logits=logits)
    assert r["stops"] == ["noncanonical_tie"]
    assert r["diagnostics"]["patched_minimal"] is None


def test_missing_oracle_token_and_under_keep():
    # Stock over-keeps by one (symdiff 1) so patched's symdiff (1) is no regression.
    r = judge([0, 1, 2, 3], [0, 1])
    assert r["stops"] == ["missing_oracle_token", "under_keep"]


def test_all_masked_patched_row_stops():
    r = judge([0, 1, 2], [])
    assert "under_keep" in r["stops"]


def test_nan_output_stops():
    out = masked([0, 1, 2])
    out[5] = math.nan
    r = judge([0, 1, 2], [], patched=SideOutput("ok", out))
    assert r["stops"] == ["nan_output"]


# rule 3 -----------------------------------------------------------------------------------


def test_count_bound_exact_integer_arithmetic():
    assert gate.within_count_bound(3, 0 + 3 + 3)  # diff 3 always allowed
    assert gate.within_count_bound(0, 3)
    assert not gate.within_count_bound(4, 0)
    # diff 4: allowed only when 4 / oracle < 0.005, i.e. oracle > 800.
    assert not gate.within_count_bound(804, 800)
    assert gate.within_count_bound(805, 801)


def test_count_bound_stops():
    # 40 equal logits then a long low tail: oracle keeps 20 of the top 40 (p = 0.5 exactly
    # on a prefix sum would keep 20 only if the tail were empty, so assert first).
    logits = [1.0] * 40 + [-30.0] * 10
    o = oracle_for(logits)
    n = o.count
    over = list(range(n + 4))  # a canonical prefix 4 longer than the oracle's
    assert 200 * 4 >= n  # 4 / n >= 0.005: outside the envelope
    r = judge(over, over, logits=logits)
    assert r["stops"] == ["count_bound"]


# rule 4 -----------------------------------------------------------------------------------


def test_symdiff_regression_stops():
    r = judge([0, 1, 2], [0, 1, 2, 3])
    assert r["stops"] == ["symdiff_regression"]


def test_symdiff_equal_or_better_passes():
    assert judge([0, 1, 2, 3], [0, 1, 2, 3])["stops"] == []
    assert judge([0, 1, 2, 3, 4], [0, 1, 2])["stops"] == []


# forced rows ------------------------------------------------------------------------------

FORCED_LOGITS = [0.5, -1.0, 1e30, 2.0]


def test_forced_row_patched_exactly_one_passes_and_stock_failure_is_recorded():
    r = judge([], [2], logits=FORCED_LOGITS, p=0.5, kind=FORCED, forced_id=2)
    assert r["stops"] == []
    assert set(r["diagnostics"]["stock_forced_failures"]) == {
        "forced_token_dropped", "all_masked", "argmax_not_forced", "not_exactly_one"}
    assert r["diagnostics"]["patched_forced_failures"] == []


@pytest.mark.parametrize("patched_ids,split_path,failure", [
    ([], True, "forced_token_dropped"),
    ([2, 3], True, "not_exactly_one"),
    ([3], True, "argmax_not_forced"),
])
def test_forced_row_failures_stop(patched_ids, split_path, failure):
    r = judge([2], patched_ids, logits=FORCED_LOGITS, p=0.5, kind=FORCED, forced_id=2,
              split_path=split_path)
    assert r["stops"] == ["forced_failure"]
    assert failure in r["diagnostics"]["patched_forced_failures"]


def test_forced_row_more_than_one_kept_is_allowed_off_the_split_path():
    r = judge([2], [2, 3], logits=FORCED_LOGITS, p=0.5, kind=FORCED, forced_id=2,
              split_path=False)
    assert r["stops"] == []


def test_forced_row_nan_stops():
    out = masked([2], FORCED_LOGITS)
    out[0] = math.nan
    r = judge([2], [], logits=FORCED_LOGITS, p=0.5, kind=FORCED, forced_id=2,
              patched=SideOutput("ok", out))
    assert r["stops"] == ["forced_failure"]
    assert "nan" in r["diagnostics"]["patched_forced_failures"]


def test_forced_row_without_forced_id_is_refused():
    with pytest.raises(InternalError):
        judge([2], [2], logits=FORCED_LOGITS, kind=FORCED, forced_id=None)


# verdict ----------------------------------------------------------------------------------


def test_verdict_pass_only_when_nothing_stops():
    ok = judge([0, 1, 2], [0, 1, 2])
    assert verdict([ok, ok]) == {"verdict": "PASS", "reasons": [], "rows": 2,
                                 "rows_stopped": 0}
    bad = judge([0, 1, 2], [0, 1])
    v = verdict([ok, bad], run_stops=["timeout"])
    assert v["verdict"] == "STOP"
    assert v["reasons"] == ["missing_oracle_token", "symdiff_regression", "timeout",
                            "under_keep"]
    assert v["rows_stopped"] == 1


def test_verdict_of_nothing_is_not_a_pass():
    assert verdict([])["verdict"] == "STOP"


def test_verdict_refuses_unknown_reasons():
    with pytest.raises(InternalError):
        verdict([], run_stops=["looked_fine"])


def test_all_of_refuses_empty_and_unknown_criteria():
    with pytest.raises(InternalError):
        gate.AllOf([], gate.ORDINARY_CRITERIA)
    with pytest.raises(InternalError):
        gate.AllOf(["count_bound", "vibes"], gate.ORDINARY_CRITERIA)


def test_stop_reasons_closed_set_is_pinned():
    assert set(gate.SEED_STOP_REASONS) == {
        "under_keep", "non_prefix", "noncanonical_tie", "missing_oracle_token",
        "stock_under_keep", "count_bound", "symdiff_regression",
        "oracle_boundary_ambiguous", "forced_failure", "nan_output", "unreadable_output",
        "input_mismatch", "timeout", "kernel_crash", "evidence_drift", "run_timeout",
        "split_path_not_taken"}


# properties -------------------------------------------------------------------------------


@given(st.lists(st.floats(min_value=-30, max_value=30, width=32), min_size=2, max_size=200),
       st.floats(min_value=0.015625, max_value=0.984375, width=32), st.integers(0, 3))
@settings(max_examples=200, deadline=None)
def test_any_canonical_prefix_within_three_of_oracle_passes(logits, p, extra):
    o = oracle_for(logits, p)
    order = sorted(range(len(logits)), key=lambda i: (-logits[i], i))
    ids = order[: min(len(logits), o.count + extra)]
    r = judge(ids, ids, logits=logits, p=p)
    assert r["stops"] == []


@given(st.lists(st.floats(min_value=-30, max_value=30, width=32), min_size=2, max_size=200),
       st.floats(min_value=0.015625, max_value=0.984375, width=32), st.data())
@settings(max_examples=200, deadline=None)
def test_dropping_any_oracle_token_always_stops(logits, p, data):
    o = oracle_for(logits, p)
    drop = data.draw(st.sampled_from(o.kept))
    ids = [i for i in o.kept if i != drop]
    r = judge(list(o.kept), ids, logits=logits, p=p)
    assert "missing_oracle_token" in r["stops"]


# --- the row scans against their one-loop definitions (differential properties) -------------
# The gate's scans use C-level passes (map, compress, max/index) for speed; these are the
# plain loops they must agree with on every input, ties, signed zeros, NaN and -inf included.


def _mask_by_loop(values):
    return [i for i, v in enumerate(values) if v != -math.inf and v == v], any(
        v != v for v in values)


def _argmax_by_loop(values):
    best = None
    for i, v in enumerate(values):
        if v == v and (best is None or v > values[best]):
            best = i
    return best


def _prefix_violation_by_loop(logits, kept):
    if not kept:
        return None
    low = kept[0]
    for i in kept:
        if logits[i] < logits[low] or (logits[i] == logits[low] and i > low):
            low = i
    tie = False
    for j, v in enumerate(logits):
        if j in set(kept):
            continue
        if v > logits[low]:
            return "non_prefix"
        if v == logits[low] and j < low:
            tie = True
    return "noncanonical_tie" if tie else None


_small_values = st.sampled_from([-math.inf, math.inf, math.nan, -0.0, 0.0, 1.0, -1.0, 2.5, 1e30])
_rows = st.lists(_small_values, min_size=0, max_size=40)


@settings(max_examples=400, deadline=None)
@given(_rows)
def test_mask_and_argmax_agree_with_their_loops(values):
    mask = gate._mask(values)
    assert (mask.kept, mask.has_nan) == _mask_by_loop(values)
    assert gate._argmax(values) == _argmax_by_loop(values)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from([-0.0, 0.0, 1.0, -1.0, 2.5, 1e30, -3.0]), min_size=1,
                max_size=30), st.data())
def test_prefix_violation_agrees_with_its_loop(logits, data):
    kept = sorted(data.draw(st.sets(st.integers(0, len(logits) - 1))))
    assert gate.prefix_violation(logits, kept) == _prefix_violation_by_loop(logits, kept)


@settings(max_examples=300, deadline=None)
@given(_rows)
def test_numpy_mask_and_argmax_equal_the_pure_ones(values):
    np = pytest.importorskip("numpy")
    for row in (np.array(values, dtype=np.float32), np.array(values, dtype=np.float64)):
        mask = gate._mask(row)
        assert (mask.kept, mask.has_nan) == _mask_by_loop(values)
        assert all(type(i) is int for i in mask.kept)
        found = gate._argmax(row)
        assert found == _argmax_by_loop(values) and (found is None or type(found) is int)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([-0.0, 0.0, 1.0, -1.0, 2.5, 1e30, -3.0]), min_size=1,
                max_size=30), st.data())
def test_numpy_prefix_violation_equals_the_pure_one(logits, data):
    np = pytest.importorskip("numpy")
    kept = sorted(data.draw(st.sets(st.integers(0, len(logits) - 1))))
    expected = _prefix_violation_by_loop(logits, kept)
    assert gate.prefix_violation(np.array(logits, dtype=np.float64), kept) == expected
