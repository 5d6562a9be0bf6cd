"""harness.diagnostics.exact: the exact-real nucleus count.

Expected values come from the definition (``D_{n-1} < 0 <= D_n``), from exact rational
arithmetic on equal logits, from an independent mpmath computation at 256 bits, or from the
committed H200 bundle's signed bytes; none is copied from the code under test.
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction
from pathlib import Path

import mpmath
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

pytest.importorskip("flint")

from harness.core.bundle import CASES  # noqa: E402
from harness.core.cases_index import parse_cases_index  # noqa: E402
from harness.core.errors import EmptyRowError, InvalidPError, NonFiniteLogitError  # noqa: E402
from harness.core.f32 import decode, to_float32  # noqa: E402
from harness.core.keys import load_public_key  # noqa: E402
from harness.core.oracle import Certified, canonical_order, reference  # noqa: E402
from harness.core.verify import open_bundle  # noqa: E402
from harness.diagnostics import exact  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
H200 = ROOT / "evidence" / "bundles" / "h200-forced-logit-gate-cuda-20261129"
EVIDENCE_PUB = ROOT / "evidence" / "keys" / "topp-gate-evidence.pub"

FLT_MAX = struct.unpack("<f", bytes.fromhex("ffff7f7f"))[0]
FLT_TRUE_MIN = struct.unpack("<f", bytes.fromhex("01000000"))[0]  # 2**-149
ONE_BELOW = struct.unpack("<f", bytes.fromhex("ffff7f3f"))[0]  # 1 - 2**-24

f32_logits = st.floats(min_value=-50, max_value=50, width=32, allow_subnormal=True)
f32_p = st.floats(min_value=FLT_TRUE_MIN, max_value=ONE_BELOW, width=32)


def mp_d(logits, p32, k, bits=256):
    """D_k by mpmath at ``bits``, summed in canonical order (independent of
    harness.diagnostics.exact).

    Exponents are formed exactly (float32 differences need at most 278 bits, so the
    subtraction runs at 300 bits) and the sum is accumulated term by term in canonical order,
    so coefficients of equal top tokens cancel exactly before smaller terms arrive.
    """
    order = canonical_order(logits)
    with mpmath.workprec(300):
        top = mpmath.mpf(logits[order[0]])
        exponents = [mpmath.mpf(logits[i]) - top for i in order]
    with mpmath.workprec(bits):
        p = mpmath.mpf(p32)
        total = mpmath.mpf(0)
        for j, a in enumerate(exponents):
            total += ((1 - p) if j < k else -p) * mpmath.exp(a)
    return total


def decided(outcome) -> exact.ExactCount:
    assert isinstance(outcome, exact.ExactCount), outcome
    return outcome


# --- exact equality and exact signs ---------------------------------------------------------


@pytest.mark.parametrize("vocab,p,count", [
    (10, 0.5, 5),  # D_5 = (1 - 0.5) * 5 - 0.5 * 5 = 0
    (8, 0.75, 6),  # D_6 = 0.25 * 6 - 0.75 * 2 = 0
    (4, 0.25, 1),
    (1024, 0.5, 512),
])
def test_equal_logits_with_integer_p_times_v_are_decided_by_exact_equality(vocab, p, count):
    out = decided(exact.exact_count([1.5] * vocab, p))
    assert (out.count, out.method, out.bits) == (count, exact.EXACT_EQUALITY, None)


@given(st.integers(min_value=1, max_value=400), f32_p, f32_logits)
@settings(max_examples=200, deadline=None)
def test_equal_logits_count_is_the_rational_ceiling_of_p_times_v(vocab, p32, value):
    # With one distinct logit every weight is e^0 = 1, so D_k = k - p * V exactly.
    out = decided(exact.exact_count([value] * vocab, p32))
    target = Fraction(p32) * vocab
    assert out.count == max(1, math.ceil(target))
    expected = exact.EXACT_EQUALITY if target == out.count else exact.EXACT_SIGN
    assert out.method == expected


def test_signed_zeros_are_one_group():
    out = decided(exact.exact_count([0.0, -0.0, 0.0, -0.0], 0.5))
    assert (out.count, out.method) == (2, exact.EXACT_EQUALITY)


# --- huge exponents ---------------------------------------------------------------------------


def test_two_huge_tokens_need_the_zero_coefficient_dropped_before_rounding():
    # Two tokens at float32(1e30), the rest near 0, p 0.5. binary64: math.exp underflows
    # every other weight to 0, the prefix of one token equals the target, count 1. Exactly:
    # D_1 = (1 - p) e^0 - p e^0 - p * (positive rest) < 0 and D_2 = 1 - p * (rest) > 0.
    big = to_float32(1e30)
    logits = [0.37, big, -3.0, big, to_float32(0.25)]
    oracle = reference(logits, 0.5)
    assert isinstance(oracle, Certified) and oracle.count == 1
    out = decided(exact.exact_count(logits, 0.5))
    assert (out.count, out.method) == (2, exact.BALL)
    assert mp_d(logits, 0.5, 1) < 0 < mp_d(logits, 0.5, 2)


@pytest.mark.parametrize("p32,count", [(0.5, 1), (ONE_BELOW, 1), (FLT_TRUE_MIN, 1)])
def test_opposite_extremes_of_float32(p32, count):
    # Exponent -2 * FLT_MAX: e^a is about 2^-9.8e38, still a positive ball.
    out = decided(exact.exact_count([-FLT_MAX, FLT_MAX], p32))
    assert out.count == count


def test_a_tiny_gap_at_p_one_half():
    # D_1 = 0.5 * (1 - e^{-2^-149}) > 0: the smallest float32 gap still decides.
    out = decided(exact.exact_count([0.0, -FLT_TRUE_MIN], 0.5))
    assert out.count == 1 and out.method == exact.BALL
    assert mp_d([0.0, -FLT_TRUE_MIN], 0.5, 1, bits=400) > 0


# --- properties against binary64 and against mpmath -------------------------------------------


@given(st.lists(f32_logits, min_size=1, max_size=300), f32_p)
@settings(max_examples=300, deadline=None)
def test_exact_equals_binary64_when_its_margin_is_far_above_its_rounding(logits, p32):
    oracle = reference(logits, p32)
    assume(isinstance(oracle, Certified))
    # binary64 weights are within a few ulps each (relative 2^-50 is generous), so a
    # boundary margin above 2^-30 of the normalizer cannot be moved by rounding.
    margin = min(oracle.prefix_at_count - oracle.target, oracle.target - oracle.prefix_below_count)
    assume(margin > 2.0**-30 * oracle.normalizer)
    assert decided(exact.exact_count(logits, p32)).count == oracle.count


small_sets = st.lists(st.sampled_from([0.0, -1.0, 2.5, to_float32(0.1), -FLT_TRUE_MIN, 30.0]),
                      min_size=1, max_size=24)


@given(st.one_of(small_sets, st.lists(f32_logits, min_size=1, max_size=24)), f32_p)
@settings(max_examples=150, deadline=None)
def test_count_is_the_definition_checked_by_mpmath_at_256_bits(logits, p32):
    out = decided(exact.exact_count(logits, p32))
    at, below = mp_d(logits, p32, out.count), mp_d(logits, p32, out.count - 1)
    scale = mpmath.mpf(len(logits))  # every weight is at most 1
    if out.method != exact.EXACT_EQUALITY:
        assume(abs(at) > scale * mpmath.mpf(2) ** -200)  # mpmath itself must be sure
    assert below < 0 and at >= 0


@given(st.lists(f32_logits, min_size=2, max_size=60), f32_p,
       st.integers(min_value=-5, max_value=100))
@settings(max_examples=100, deadline=None)
def test_any_start_finds_the_same_count(logits, p32, start):
    assert exact.exact_count(logits, p32, start=start) == exact.exact_count(logits, p32)


# --- undecided at a cap, rising precision ------------------------------------------------------


def test_a_sign_undecided_at_the_cap_is_reported_never_guessed():
    # D_1 = 0.5 * (1 - e^{-2^-20}), about 2^-22: 8-bit balls cannot separate it from 0.
    logits = [0.0, -(2.0**-20)]
    out = exact.exact_count(logits, 0.5, precisions=(8,))
    assert isinstance(out, exact.Undecided) and out.cap_bits == 8
    assert out.above < 1 <= out.at_most
    rising = decided(exact.exact_count(logits, 0.5, precisions=(8, 64)))
    assert (rising.count, rising.method, rising.bits) == (1, exact.BALL, 64)
    assert exact.outcome_json(out)["exact_status"] == "undecided"


# --- refusals ------------------------------------------------------------------------------------


def test_refuses_what_the_oracle_refuses():
    with pytest.raises(NonFiniteLogitError):
        exact.exact_count([0.0, math.inf], 0.5)
    with pytest.raises(EmptyRowError):
        exact.exact_count([], 0.5)
    with pytest.raises(InvalidPError):
        exact.exact_count([0.0], 0.55)  # not a float32 value


def test_without_python_flint_it_refuses_with_the_extra_named(monkeypatch):
    import sys

    from harness.core.errors import MissingExtraError

    monkeypatch.setitem(sys.modules, "flint", None)
    assert not exact.exact_available()
    with pytest.raises(MissingExtraError, match=r"pip install 'topp-gate\[exact\]'"):
        exact.exact_count([0.0], 0.5)


# --- many rows ------------------------------------------------------------------------------------


def test_worker_processes_give_the_serial_results():
    import random

    rnd = random.Random(3)
    tasks = []
    for n in (1, 7, 300, 2000):
        row = [to_float32(rnd.gauss(0, 3)) for _ in range(n)]
        data = struct.pack(f"<{n}f", *row)
        tasks.append((data, to_float32(rnd.uniform(0.05, 0.95)), None))
    assert exact.exact_rows(tasks, workers=2) == exact.exact_rows(tasks, workers=1)


# --- the committed H200 bundle's two known rows --------------------------------------------------


def _bundle_row(case_id: str, index: int):
    """(logits, p, signed per-row result) of one row, read through open_bundle (signature,
    schema and file set checked; each artifact's digests checked on read)."""
    view = open_bundle(H200, load_public_key(EVIDENCE_PUB))
    case = next(c for c in parse_cases_index(view.raw(CASES)) if c.id == case_id)
    row_bytes = 4 * case.vocab
    logits = decode(view.raw(case.logits_path)[index * row_bytes : (index + 1) * row_bytes])
    p32 = decode(view.raw(case.p_path))[index]
    result = next(r for r in view.statement["predicate"]["rows"]
                  if (r["case"], r["row"]) == (case_id, index))
    return logits, p32, result


def test_h200_float32_p_row_both_kernels_keep_one_token_short():
    # boundary-p-float32-v32000[2]: randn seed 10 at p float32(0.89999997). The issue's
    # independent 256-bit sums give an exact count of 19541 (margin 5.7e-9 of the
    # normalizer); mpmath checks the boundary here again.
    logits, p32, result = _bundle_row("boundary-p-float32-v32000", 2)
    out = decided(exact.exact_count(logits, p32, start=result["oracle"]["count"]))
    assert out.count == 19541 == result["oracle"]["count"]
    assert result["stock"]["kept"] == result["patched"]["kept"] == out.count - 1
    assert mp_d(logits, p32, out.count - 1) < 0 <= mp_d(logits, p32, out.count)


def test_h200_two_huge_tokens_row_patched_under_keeps_in_exact_arithmetic():
    # boundary-huge-v128256[3]: ids 1000 and 64129 at 1e30, p 0.5. binary64 says 1 (every
    # other weight underflows); exactly the count is 2; patched keeps 1.
    logits, p32, result = _bundle_row("boundary-huge-v128256", 3)
    assert p32 == 0.5 and logits[1000] == logits[64129] == to_float32(1e30)
    out = decided(exact.exact_count(logits, p32, start=result["oracle"]["count"]))
    assert result["oracle"]["count"] == 1 and out.count == 2
    assert result["patched"]["kept"] == 1
    assert mp_d(logits, p32, 1) < 0 <= mp_d(logits, p32, 2)
