"""The binary64 oracle: properties (hypothesis), hand-made cases, and an mpmath cross-check.

Hand-made cases say where each expected value comes from; none is copied from the oracle.
"""

from __future__ import annotations

import math
import struct

import mpmath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core import oracle
from harness.core.errors import EmptyRowError, InvalidPError, NonFiniteLogitError
from harness.core.f32 import runtime_p, to_float32
from harness.core.gate import prefix_violation

FLT_MAX = struct.unpack("<f", bytes.fromhex("ffff7f7f"))[0]  # 3.4028234663852886e38
FLT_TRUE_MIN = struct.unpack("<f", bytes.fromhex("01000000"))[0]  # 2**-149
ONE_BELOW = struct.unpack("<f", bytes.fromhex("ffff7f3f"))[0]  # 1 - 2**-24

f32_logits = st.floats(min_value=-50, max_value=50, width=32, allow_subnormal=True)
f32_p = st.floats(min_value=FLT_TRUE_MIN, max_value=ONE_BELOW, width=32)
rows = st.lists(f32_logits, min_size=1, max_size=300)


def certified(logits, p32, **kw) -> oracle.Certified:
    out = oracle.reference(logits, p32, **kw)
    assert isinstance(out, oracle.Certified), out
    return out


# --- properties ----------------------------------------------------------------------------


@given(rows, f32_p)
@settings(max_examples=300, deadline=None)
def test_certified_boundary_is_the_smallest_reaching_prefix(logits, p32):
    out = certified(logits, p32)
    assert 1 <= out.count <= len(logits)
    order = oracle.canonical_order(logits)
    top = logits[order[0]]
    weights = [math.exp(logits[i] - top) for i in order]
    target = p32 * math.fsum(weights)
    assert math.fsum(weights[: out.count]) >= target
    assert math.fsum(weights[: out.count - 1]) < target
    assert out.kept == tuple(order[: out.count])


@given(rows, f32_p)
@settings(max_examples=300, deadline=None)
def test_kept_set_is_a_canonical_prefix(logits, p32):
    out = certified(logits, p32)
    assert prefix_violation(logits, list(out.kept)) is None


@given(rows, f32_p, st.randoms(use_true_random=False))
@settings(max_examples=200, deadline=None)
def test_independent_of_input_order_up_to_the_tie_rule(logits, p32, rnd):
    perm = list(range(len(logits)))
    rnd.shuffle(perm)  # new position k holds old token perm[k]
    shuffled = [logits[perm[k]] for k in range(len(logits))]
    a = certified(logits, p32)
    b = certified(shuffled, p32)
    # The count depends only on the multiset of logits.
    assert a.count == b.count
    # The kept logit values are the same multiset; with no ties, the same tokens.
    assert sorted(logits[i] for i in a.kept) == sorted(shuffled[k] for k in b.kept)
    if len(set(logits)) == len(logits):
        assert {perm[k] for k in b.kept} == set(a.kept)


@given(rows, f32_p)
@settings(max_examples=300, deadline=None)
def test_numpy_fast_path_is_bit_identical(logits, p32):
    assert oracle.reference(logits, p32) == oracle.reference(logits, p32, fast=True)


@pytest.mark.parametrize("seed", range(4))
def test_numpy_fast_path_identical_on_large_rows(seed):
    import random

    rnd = random.Random(seed)
    n = 131072
    logits = [to_float32(rnd.gauss(0.0, 1.0 + seed)) for _ in range(n)]
    for k in range(0, n, 997):  # exact ties scattered through the row
        logits[k] = logits[0]
    p32 = runtime_p(str(rnd.uniform(0.1, 0.999)))
    a, b = oracle.reference(logits, p32), oracle.reference(logits, p32, fast=True)
    assert a == b
    assert a.weights == b.weights


# --- hand-made cases -----------------------------------------------------------------------


def test_one_token_row_keeps_it():
    # One weight exp(0) = 1 >= p * 1 for any p < 1.
    out = certified([3.0], runtime_p("0.999"))
    assert (out.count, out.kept) == (1, (0,))


def test_all_equal_row_target_exactly_on_a_prefix_sum():
    # Eight equal logits: weights all 1.0, normalizer 8.0, p = 0.5 (exact in float32):
    # target = 4.0 exactly, and the prefix of 4 reaches it (>=), so count = 4.
    out = certified([1.5] * 8, 0.5)
    assert out.count == 4
    assert out.kept == (0, 1, 2, 3)  # ties keep ascending ids
    assert out.prefix_at_count == 4.0 == out.target


def test_signed_zeros_tie_by_id():
    # -0.0 and 0.0 are equal logits: canonical order is by id, whatever the sign.
    out = certified([-0.0, 0.0, -0.0, 0.0], 0.5)
    assert out.kept == (0, 1)


def test_ties_straddling_the_boundary_keep_lowest_ids():
    # 4 tokens at 1.0 then 6 tokens at 0.0 scattered; with p chosen so the boundary falls
    # inside the 0.0 group, the kept 0.0 tokens are the lowest ids of that group.
    logits = [0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0]
    e = math.e
    normalizer = 4 * e + 6
    # prefix of the four 1.0s plus two 0.0s = 4e + 2; pick p just above (4e + 1.5)/N.
    p32 = to_float32((4 * e + 1.5) / normalizer)
    out = certified(logits, p32)
    assert out.kept == (1, 3, 5, 7, 0, 2)


def test_adjacent_float32_logits_are_distinct_and_ordered():
    # Two adjacent float32 values: the larger sorts first even though they differ by 1 ulp.
    hi = 5.0
    (bits,) = struct.unpack("<I", struct.pack("<f", hi))
    (lo,) = struct.unpack("<f", struct.pack("<I", bits - 1))
    out = certified([lo, hi], to_float32(0.4))
    assert out.kept == (1,)


def test_huge_finite_logit_keeps_only_it():
    # exp(x - 1e30) underflows to 0.0 for every other token: normalizer is exactly 1.
    for big in (1e30, FLT_MAX):
        logits = [0.5, -1.0, to_float32(big), 2.0]
        out = certified(logits, runtime_p("0.999"))
        assert out.kept == (2,)
        assert out.normalizer == 1.0


def test_offsets_of_a_million_do_not_change_the_answer():
    # Subtracting the maximum makes the oracle shift-invariant when the shift is exact.
    base = [0.0, -0.25, -0.5, -1.0, -2.0, -4.0]
    for offset in (1e6, -1e6):
        shifted = [to_float32(offset + v) for v in base]
        assert [s - shifted[0] for s in shifted] == base  # exact at this magnitude
        assert certified(shifted, 0.5).kept == certified(base, 0.5).kept


def test_float32_p_differs_from_decimal_p():
    # 1000 equal logits: weights 1, normalizer 1000. Decimal 0.70000001 * 1000 > 700, so a
    # binary64 p would keep 701; float32(0.70000001) = 0.699999988079071 (the float32
    # below 0.7) gives target 699.999988..., so the runtime p keeps 700.
    assert to_float32(0.70000001) == 0.699999988079071044921875
    logits = [0.0] * 1000
    assert certified(logits, runtime_p("0.70000001")).count == 700
    # The decimal p is not a float32 value, so the oracle refuses it outright:
    with pytest.raises(InvalidPError):
        oracle.reference(logits, 0.70000001)


def test_tiny_p_keeps_the_top_token():
    for p in (runtime_p("1e-7"), FLT_TRUE_MIN):
        assert certified([0.0, 0.0, -1.0], p).kept == (0,)


def test_largest_float32_below_one_keeps_almost_everything():
    # p = 1 - 2**-24; nine equal weights: target = 9 - 9 * 2**-24 > 8, so all 9 are kept.
    assert certified([2.0] * 9, ONE_BELOW).count == 9


def test_weights_that_underflow_to_zero():
    # exp(-200) is ~1e-87, fine; exp(-1000) underflows to exactly 0.0 in binary64.
    out = certified([0.0, -1000.0, -1000.0], ONE_BELOW)
    assert out.weights == (1.0, 0.0, 0.0)
    assert out.count == 1


# --- refusals ------------------------------------------------------------------------------


@pytest.mark.parametrize("fast", [False, True])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_logits_are_refused(bad, fast):
    with pytest.raises(NonFiniteLogitError) as err:
        oracle.reference([0.0, bad, 1.0], 0.5, fast=fast)
    assert err.value.token == 1


@pytest.mark.parametrize("fast", [False, True])
def test_empty_row_is_refused(fast):
    with pytest.raises(EmptyRowError):
        oracle.reference([], 0.5, fast=fast)


@pytest.mark.parametrize("p", ["0", "1", "1.0000001", "-0.5", "nan", "inf", "1e-50", "abc"])
def test_invalid_p_is_refused_after_float32_conversion(p):
    # 1e-50 rounds to 0 in float32; 1.0000001 rounds to 1.0000001192 (> 1).
    with pytest.raises(InvalidPError):
        runtime_p(p)


def test_p_just_below_one_survives_only_if_float32_keeps_it_below_one():
    assert runtime_p("0.99999997") == ONE_BELOW  # rounds to 1 - 2**-24
    with pytest.raises(InvalidPError):
        runtime_p("0.99999998")  # rounds up to 1.0


# --- ambiguity -----------------------------------------------------------------------------


def test_a_wrong_scan_candidate_is_reported_ambiguous_not_resolved():
    # Injected disagreement: certification of a candidate one past the true boundary must
    # fail (the shorter prefix already reaches target) and the outcome is Ambiguous.
    weights = [1.0, 1.0, 1.0, 1.0]
    out = oracle._certify(weights, [0, 1, 2, 3], 3, 2.0, 4.0)
    assert isinstance(out, oracle.Ambiguous)
    assert out.status == "oracle_boundary_ambiguous"
    # And one short of it: the prefix does not reach target.
    assert isinstance(oracle._certify(weights, [0, 1, 2, 3], 1, 2.0, 4.0), oracle.Ambiguous)
    assert isinstance(oracle._certify(weights, [0, 1, 2, 3], 2, 2.0, 4.0), oracle.Certified)


@given(st.lists(st.floats(min_value=-40, max_value=0, width=32), min_size=2, max_size=400), f32_p)
@settings(max_examples=500, deadline=None)
def test_scan_and_fsum_agree_on_random_rows(logits, p32):
    # A search for a natural disagreement (none found so far); a hit would fail loudly here
    # and become a committed hand-made case.
    assert isinstance(oracle.reference(logits, p32), oracle.Certified)


# --- independent high-precision cross-check -------------------------------------------------


@given(st.lists(st.floats(min_value=-20, max_value=20, width=32), min_size=1, max_size=60), f32_p)
@settings(max_examples=200, deadline=None)
def test_agrees_with_mpmath_far_from_the_boundary(logits, p32):
    mpmath.mp.prec = 300
    order = sorted(range(len(logits)), key=lambda i: (-logits[i], i))
    top = max(logits)
    weights = [mpmath.exp(mpmath.mpf(logits[i]) - mpmath.mpf(top)) for i in order]
    target = mpmath.mpf(p32) * mpmath.fsum(weights)
    prefix, count = mpmath.mpf(0), None
    margins = []
    for k, w in enumerate(weights, 1):
        prefix += w
        margins.append(abs(prefix - target) / target)
        if count is None and prefix >= target:
            count = k
    if min(margins) < mpmath.mpf(2) ** -40:
        return  # too close to the boundary for binary64 to be expected to agree
    out = certified(logits, p32)
    assert out.count == count
    assert out.kept == tuple(order[:count])


@given(rows, f32_p, st.integers(1, 9))
@settings(max_examples=300, deadline=None)
def test_chunked_numpy_scan_equals_the_scalar_scan_at_any_chunk_size(logits, p32, chunk):
    # Small chunks put the boundary at chunk edges, in the first and the last element.
    import numpy as np

    pure = certified(logits, p32)
    weights = np.asarray(pure.weights)
    saved = oracle.SCAN_CHUNK
    try:
        oracle.SCAN_CHUNK = chunk
        assert oracle._neumaier_scan_numpy(weights, pure.target) == \
            oracle._neumaier_scan(list(pure.weights), pure.target)
        assert oracle.reference(logits, p32, fast=True) == pure
    finally:
        oracle.SCAN_CHUNK = saved


def test_math_exp_is_exactly_zero_below_the_fast_paths_underflow_cut():
    """The fast path writes 0.0 instead of calling math.exp below EXP_UNDERFLOW_BELOW."""
    from harness.core.oracle import EXP_UNDERFLOW_BELOW

    assert math.exp(-745.2) == 0.0  # already below half the smallest subnormal
    x = EXP_UNDERFLOW_BELOW
    for _ in range(2000):
        x = math.nextafter(x, -math.inf)
        assert math.exp(x) == 0.0
    for x in (-801.0, -1e4, -1e10, -1e30, -3.4028234663852886e38, -1.7976931348623157e308):
        assert math.exp(x) == 0.0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([0.0, -1.0, -700.0, -745.0, -799.9999, -800.0, -800.5, -1e4,
                                 1e4, 1e10, 1e30, 3.0]), min_size=1, max_size=40),
       st.sampled_from([0.1, 0.5, 0.9, 0.999]))
def test_fast_path_equals_pure_path_across_the_underflow_cut(values, p):
    pytest.importorskip("numpy")
    logits = [to_float32(v) for v in values]
    p32 = to_float32(p)
    assert oracle.reference(logits, p32, fast=True) == oracle.reference(logits, p32, fast=False)
