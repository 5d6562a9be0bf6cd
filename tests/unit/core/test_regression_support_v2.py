"""Rule set regression-support/v2 on real rows, through the real judge: regression-support/v1
with the sampling rows' allowed set closed under ties at its boundary. A base or a change that
draws another member of the boundary's tie group than the canonical order's lowest ids has
no fault there, so a change that samples the same distribution with other random numbers
cannot stop on such a row (under v1 it could: the first H100 run of pr-flashinfer-v1 had 17
such base-defect rows); a draw outside the tie-closed set still stops; rows without ties at
the boundary are judged as v1 judges them; v1 itself is unchanged."""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core.f32 import to_float32
from harness.core.regression_support import REGRESSION_SUPPORT_V2, STOP_REASONS
from harness.core.rulesets import rule_set
from harness.core.support_rules import canonical_order, tie_closure

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_regression_support import ROW, _data  # noqa: E402

V1 = rule_set("regression-support/v1")
V2 = rule_set(REGRESSION_SUPPORT_V2)
# one token at 4 over a group of 8 tied at 1: at p 0.6 the allowed set (the oracle's count
# and its envelope) takes 4 tokens, the token at 4 and the 3 lowest ids of the tie group
TIED = [4.0] + [1.0] * 8 + [0.0, -1.0, -2.0]
P = to_float32(0.6)


def test_registered_beside_v1_with_the_same_stop_reasons():
    assert V2.id == "regression-support/v2" and V2.top_k and V2.needs_raw
    assert V2.stop_reasons == V1.stop_reasons == STOP_REASONS


def test_the_allowed_set_is_closed_under_ties_at_its_boundary():
    order = canonical_order(TIED)
    result = V2.judge(_data(TIED, {0}, {0}, p=P))
    assert result["diagnostics"]["allowed"] == 4
    assert result["diagnostics"]["allowed_tie_closed"] == 9
    assert tie_closure(TIED, order, 4) == set(range(9))
    assert tie_closure(TIED, order, 0) == set()
    assert tie_closure(ROW, canonical_order(ROW), 1) == {0}  # no tie at the boundary


def test_a_tied_draw_beyond_the_canonical_ids_is_a_base_defect_in_v1_and_nothing_in_v2():
    base, change = {0, 7}, {0, 5, 8}  # tied tokens past the allowed set's ids (1, 2, 3)
    v1 = V1.judge(_data(TIED, base, change, p=P))
    assert v1["diagnostics"]["stock_faults"] == ["draw_outside_support"]
    assert "outside_support_growth" in v1["stops"]  # two tied tokens outside against one
    v2 = V2.judge(_data(TIED, base, change, p=P))
    assert v2["stops"] == [] and v2["diagnostics"]["base_defect"] is False
    assert v2["diagnostics"]["stock_outside_allowed"] == 0
    assert float.fromhex(v2["diagnostics"]["patched_mass_outside_allowed"]) == 0.0


def test_a_draw_outside_the_tie_closed_set_still_stops():
    result = V2.judge(_data(TIED, {0, 7}, {0, 9}, p=P))  # token 9: logit 0, below the group
    assert result["stops"] == ["mass_outside_growth", "new_fault", "outside_support_growth"]
    assert result["diagnostics"]["new_faults"] == ["draw_outside_support"]


def test_v1_rows_carry_none_of_v2s_diagnostics():
    diagnostics = V1.judge(_data(TIED, {0}, {0}, p=P))["diagnostics"]
    assert "allowed_tie_closed" not in diagnostics
    assert not any(k.endswith("_mass_outside_allowed") for k in diagnostics)


_GROUPED = st.lists(st.sampled_from([4.0, 2.0, 1.0, 0.5, 0.0, -1.0]), min_size=4, max_size=12)
_P = st.sampled_from([to_float32(x) for x in (0.3, 0.5, 0.6, 0.8, 0.9, 0.95)])


@settings(max_examples=80, deadline=None)
@given(_GROUPED, _P, st.data())
def test_draws_inside_the_tie_closed_set_never_stop_the_change(logits, p, data):
    probe = V2.judge(_data(logits, {0}, {0}, p=p))
    if "allowed" not in probe["diagnostics"]:
        return  # an ambiguous oracle boundary: judged fail closed, not this property
    closed = sorted(tie_closure(logits, canonical_order(logits), probe["diagnostics"]["allowed"]))
    base = set(data.draw(st.lists(st.sampled_from(closed), min_size=1, unique=True)))
    change = set(data.draw(st.lists(st.sampled_from(closed), min_size=1, unique=True)))
    assert V2.judge(_data(logits, base, change, p=p))["stops"] == []


@settings(max_examples=80, deadline=None)
@given(st.lists(st.floats(-8, 8, allow_nan=False, width=32), min_size=4, max_size=12,
                unique=True), _P, st.data())
def test_without_ties_v2_finds_v1s_faults_and_counts(logits, p, data):
    # no two logits equal: the closed set is v1's allowed set, so every fault and the count
    # of draws outside it agree; only the mass rule reads another set (outside the allowed
    # set, where v1 read outside the oracle's: a change drawing more of the count
    # envelope's tokens than the base is not stopped by mass in v2)
    tokens = list(range(len(logits)))
    base = set(data.draw(st.lists(st.sampled_from(tokens), min_size=1, unique=True)))
    change = set(data.draw(st.lists(st.sampled_from(tokens), min_size=1, unique=True)))
    v1 = V1.judge(_data(logits, base, change, p=p))
    v2 = V2.judge(_data(logits, base, change, p=p))
    same = ("new_fault", "outside_support_growth", "kept_value_changed",
            "oracle_boundary_ambiguous")
    assert [s for s in v2["stops"] if s in same] == [s for s in v1["stops"] if s in same]
    for key in ("stock_faults", "patched_faults", "new_faults", "stock_outside_allowed",
                "patched_outside_allowed"):
        assert v2["diagnostics"].get(key) == v1["diagnostics"].get(key)
