"""Rule set support/v1: a sampling kernel's draws judged by their support against the
binary64 oracle (known answers and properties), and the goodness-of-fit diagnostic
(known chi-square tails), which never changes a verdict."""

from __future__ import annotations

import math
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core import gate
from harness.core.f32 import to_float32, unhexf
from harness.core.oracle import Certified, top_k_top_p
from harness.core.rulesets import RowInput, rule_set
from harness.core.support_rules import (
    _upper_gamma_q,
    allowed_count,
    canonical_order,
    case_draws,
    chi_square_gof,
)

NEG = -math.inf
SUPPORT = rule_set("support/v1")


def _f32(values) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def _output(logits, drawn):
    return [v if i in drawn else NEG for i, v in enumerate(logits)]


def judge(logits, drawn, *, stock_drawn=None, p=None, k=None, forced=None, draws=None,
          patched_values=None):
    oracle = top_k_top_p(logits, p32=p, k=k)
    stock = _output(logits, set(stock_drawn if stock_drawn is not None else drawn))
    patched = patched_values or _output(logits, set(drawn))
    row = gate.Row("c", 0, "forced" if forced is not None else "ordinary", logits,
                   p if p is not None else 1.0, forced, k)
    data = RowInput(row, oracle, gate.SideOutput("ok", stock), gate.SideOutput("ok", patched),
                    False, None, _f32(logits), {"stock": _f32(stock), "patched": _f32(patched)},
                    False, draws)
    return SUPPORT.judge(data), oracle


# fp32-exact logits: 3 dominant tokens, then a tail
ROW = [4.0, 3.0, 3.0, 0.5, 0.25, 0.0, -1.0, -2.0]


def test_the_rule_set_is_registered_with_its_stop_reasons():
    assert SUPPORT.id == "support/v1" and SUPPORT.top_k and SUPPORT.needs_raw
    for reason in ("no_draw", "draw_outside_support", "draw_evidence_mismatch",
                   "kept_value_changed", "split_path_not_taken"):
        assert reason in SUPPORT.stop_reasons


def test_draws_inside_the_oracle_set_pass():
    p = to_float32(0.9)
    oracle = top_k_top_p(ROW, p32=p, k=None)
    assert isinstance(oracle, Certified)
    result, _ = judge(ROW, set(oracle.kept[:2]), p=p)
    assert result["stops"] == []
    assert result["diagnostics"]["patched_outside_oracle"] == 0


def test_a_draw_beyond_the_envelope_stops_and_inside_it_does_not():
    p = to_float32(0.5)
    oracle = top_k_top_p(ROW, p32=p, k=None)
    order = canonical_order(ROW)
    n = allowed_count(oracle, len(order), None, False)
    assert n == min(len(ROW), oracle.count + 3)  # small counts: the envelope is 3 tokens
    inside, _ = judge(ROW, {order[n - 1]}, p=p)
    assert inside["stops"] == [] and inside["diagnostics"]["patched_outside_oracle"] == 1
    if n < len(order):
        outside, _ = judge(ROW, {order[n]}, p=p)
        assert outside["stops"] == ["draw_outside_support"]
        # the stock side's faults are diagnostics only
        stock_only, _ = judge(ROW, {order[0]}, stock_drawn={order[n]}, p=p)
        assert stock_only["stops"] == []
        assert stock_only["diagnostics"]["stock_problems"] == ["draw_outside_support"]


def test_top_k_only_rows_allow_exactly_the_k_prefix():
    result, oracle = judge(ROW, {0, 1}, k=2)  # ids 1 and 2 tie at 3.0: id 1 is canonical
    assert oracle.count == 2 and result["stops"] == []
    tied, _ = judge(ROW, {0, 2}, k=2)
    assert tied["stops"] == ["draw_outside_support"]


def test_forced_rows_allow_the_forced_token_only():
    row = [0.0] * 16
    row[5] = 1e30
    ok, _ = judge(row, {5}, p=to_float32(0.9), forced=5)
    assert ok["stops"] == []
    bad, _ = judge(row, {5, 0}, p=to_float32(0.9), forced=5)
    assert bad["stops"] == ["draw_outside_support"]


def test_no_draw_changed_bits_and_nan_stop():
    p = to_float32(0.9)
    assert judge(ROW, set(), p=p)[0]["stops"] == ["no_draw"]
    changed = _output(ROW, {0})
    changed[0] = 4.5
    assert judge(ROW, {0}, p=p, patched_values=changed)[0]["stops"] == ["kept_value_changed"]
    nan = _output(ROW, {0})
    nan[3] = math.nan
    assert "nan_output" in judge(ROW, {0}, p=p, patched_values=nan)[0]["stops"]


def test_recorded_draws_must_name_exactly_the_drawn_tokens():
    p = to_float32(0.9)
    good, _ = judge(ROW, {0, 1}, p=p, draws={"patched": [[0, 30], [1, 2]]})
    assert good["stops"] == []
    assert good["diagnostics"]["patched_gof"] is None or "p_value" in good["diagnostics"][
        "patched_gof"]
    for wrong in ([[0, 32]], [[0, 30], [1, 2], [2, 1]], [[0, 0], [1, 2]], "x", [[True, 1]]):
        bad, _ = judge(ROW, {0, 1}, p=p, draws={"patched": wrong})
        assert bad["stops"] == ["draw_evidence_mismatch"], wrong


def test_the_goodness_of_fit_never_changes_a_verdict():
    p = to_float32(0.99)
    oracle = top_k_top_p(ROW, p32=p, k=None)
    skewed = [[i, 1 if i else 500] for i in oracle.kept]
    fair, _ = judge(ROW, set(oracle.kept), p=p)
    odd, _ = judge(ROW, set(oracle.kept), p=p, draws={"patched": skewed})
    assert fair["stops"] == odd["stops"] == []
    gof = odd["diagnostics"]["patched_gof"]
    assert gof is not None and unhexf(gof["p_value"]) < 1e-6


@pytest.mark.parametrize(("dof", "x", "expected"), [
    # upper tails of the chi-square distribution: known closed forms
    (2, 5.991464547107979, 0.05),  # Q = exp(-x/2) for 2 degrees of freedom
    (2, 0.0, 1.0),
    (1, 3.841458820694124, 0.05),  # erfc(sqrt(x/2))
    (4, 9.487729036781154, 0.05),  # (1 + x/2) exp(-x/2)
    (10, 18.307038053275146, 0.05),
    (1, 100.0, math.erfc(math.sqrt(50.0))),
])
def test_the_chi_square_tail_matches_known_values(dof, x, expected):
    assert _upper_gamma_q(dof / 2.0, x / 2.0) == pytest.approx(expected, rel=1e-9)


def test_pooling_and_a_known_statistic():
    # 4 equal cells of expected 25: chi-square = sum (o - 25)^2 / 25
    gof = chi_square_gof([30, 20, 25, 25], [0.25] * 4)
    assert unhexf(gof["statistic"]) == pytest.approx(2.0) and gof["dof"] == 3
    # cells below 5 expected are pooled in order; a short last bin joins the previous one
    pooled = chi_square_gof([10, 0, 0, 0], [0.7, 0.1, 0.1, 0.1])
    assert pooled is None  # 7 expected, then 3 (joins it): one bin, no test
    assert chi_square_gof([0], [1.0]) is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-20, 20).map(lambda v: v / 4.0), min_size=2, max_size=40),
       st.sampled_from([0.3, 0.5, 0.8, 0.95]), st.data())
def test_draws_from_the_oracle_set_never_stop_and_the_first_excluded_token_does(
        logits, p, data):
    p32 = to_float32(p)
    oracle = top_k_top_p(logits, p32=p32, k=None)
    if not isinstance(oracle, Certified):
        return
    drawn = set(data.draw(st.lists(st.sampled_from(oracle.kept), min_size=1, max_size=8)))
    result, _ = judge(logits, drawn, p=p32)
    assert result["stops"] == []
    order = canonical_order(logits)
    n = allowed_count(oracle, len(order), None, False)
    assert gate.within_count_bound(n, oracle.count)
    if n < len(order):
        assert not gate.within_count_bound(n + 1, oracle.count)
        beyond, _ = judge(logits, {order[n]}, p=p32)
        assert beyond["stops"] == ["draw_outside_support"]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=2, max_size=30).filter(lambda w: sum(w) > 0),
       st.integers(20, 2000))
def test_exact_expected_counts_give_a_zero_statistic(weights, draws):
    total = sum(weights)
    probs = [w / total for w in weights]
    counts = [pr * draws for pr in probs]
    gof = chi_square_gof(counts, probs)  # type: ignore[arg-type]
    if gof is not None:
        assert unhexf(gof["statistic"]) == pytest.approx(0.0, abs=1e-9)
        assert unhexf(gof["p_value"]) == pytest.approx(1.0, abs=1e-9)


def test_case_draws_reads_only_sides_that_record_them():
    evidence = {"stock": {"cases": [{"id": "a"}]},
                "patched": {"cases": [{"id": "a", "draws": [[[1, 2]]]}, {"id": "b"}]}}
    assert case_draws(evidence, "a") == {"patched": [[[1, 2]]]}
    assert case_draws(evidence, "b") is None
    assert case_draws({"stock": None, "patched": "x"}, "a") is None


def test_the_judge_passes_each_sides_recorded_draws_to_the_rule_set():
    from harness.core.judge import CaseBytes, RowSpec, judge_cases

    rows = [ROW, list(reversed(ROW))]
    p = struct.pack("<2f", 0.9, 0.9)
    drawn = [{0}, {7}]
    out = b"".join(_f32(_output(r, d)) for r, d in zip(rows, drawn, strict=True))
    case = CaseBytes("c", len(ROW), [RowSpec("ordinary"), RowSpec("ordinary")],
                     b"".join(_f32(r) for r in rows), p, out, out, False,
                     draws={"patched": [[[0, 64]], [[7, 60], [6, 4]]]})
    results = judge_cases([case], rules="support/v1")
    assert results[0]["stops"] == [] and results[0]["diagnostics"]["patched_drawn"] == 1
    assert results[1]["stops"] == ["draw_evidence_mismatch"]  # 6 is not in the output
    assert "stock_gof" not in results[0]["diagnostics"]
