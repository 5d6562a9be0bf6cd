"""Top-k, then top-p, by the predeclared convention (``harness.core.oracle.top_k_top_p``).

Three kinds of evidence:

* properties (hypothesis): the seed's procedure is unchanged without k; the numpy path is
  bit-identical to the pure one; top-k keeps exactly ``min(k, unmasked)`` canonical tokens;
* known-answer rows, each computed by hand (the note beside each says how), never copied
  from the oracle's output;
* an INDEPENDENT implementation of the convention (:func:`independent`): a different sort
  (tokens bucketed by exact rational logit, buckets sorted, ids in insertion order) and
  sums of ``exp`` weights in mpmath at 60 significant digits, not binary64. It must agree
  with the oracle wherever its own margin says the boundary is not razor-close, on rows
  generated at test time: hypothesis rows, and rows drawn from an ``os.urandom`` seed on
  every run (printed on failure; set ``TOPK_ORACLE_SEED`` to replay one).
"""

from __future__ import annotations

import math
import os
import random
import struct
from fractions import Fraction

import mpmath
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from harness.core import oracle
from harness.core.errors import (
    AllMaskedRowError,
    EmptyRowError,
    InvalidKError,
    InvalidPError,
    NonFiniteLogitError,
)
from harness.core.f32 import to_float32
from harness.core.gate import prefix_violation

INF = math.inf
FLT_TRUE_MIN = struct.unpack("<f", bytes.fromhex("01000000"))[0]
ONE_BELOW = struct.unpack("<f", bytes.fromhex("ffff7f3f"))[0]  # 1 - 2**-24
MARGIN = 1e-12  # relative distance of the real prefix sums from target, see _agree


def bf16(value: float) -> float:
    """float32 -> nearest bfloat16 (ties to even) -> float32, by bit arithmetic (finite)."""
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("<f", struct.pack("<I", bits))[0]


# --- the independent implementation ------------------------------------------------------------


def independent(logits, p, k):
    """(count, kept ids, margin) of the convention, computed without the oracle's code.

    Buckets: exact rational logit -> ids in increasing order (appended while walking the
    row); buckets sorted descending. -inf tokens are masked and skipped. Top-k takes the
    first min(k, U) ids. Top-p: weights exp(l - max) in mpmath (60 digits), total, target
    p * total, the smallest n whose prefix reaches target. margin is the smaller distance
    of prefix(n) and prefix(n - 1) from target, relative to the total (inf without top-p).
    """
    buckets: dict[Fraction, list[int]] = {}
    for token, value in enumerate(logits):
        if value != -INF:
            buckets.setdefault(Fraction(value), []).append(token)
    order = [t for value in sorted(buckets, reverse=True) for t in buckets[value]]
    m = len(order) if k is None else min(k, len(order))
    candidates = order[:m]
    if p is None or p >= 1.0:
        return m, candidates, INF
    with mpmath.workdps(60):
        top = mpmath.mpf(logits[candidates[0]])
        weights = [mpmath.exp(mpmath.mpf(logits[t]) - top) for t in candidates]
        total = mpmath.fsum(weights)
        target = mpmath.mpf(p) * total
        prefix = mpmath.mpf(0)
        for n, w in enumerate(weights, 1):
            below = prefix
            prefix += w
            if prefix >= target:
                break
        margin = min(abs(prefix - target), abs(target - below)) / total
        return n, candidates[:n], float(margin)


def _agree(logits, p, k, *, fast):
    """Assert the oracle equals the independent answer unless the boundary is razor-close.

    Far from the boundary (margin > 1e-12 of the total) the binary64 oracle cannot differ:
    its weights, sums and target are each within a few units of 2**-53 (1.1e-16) of the
    real ones. Returns whether the row was checked."""
    count, kept, margin = independent(logits, p, k)
    out = oracle.top_k_top_p(logits, p32=p, k=k, fast=fast)
    if margin <= MARGIN:
        return False
    assert isinstance(out, oracle.Certified), out
    assert out.count == count
    assert list(out.kept) == kept
    return True


# --- strategies --------------------------------------------------------------------------------

f32 = st.floats(min_value=-40, max_value=40, width=32, allow_subnormal=True)
f32_p = st.floats(min_value=FLT_TRUE_MIN, max_value=ONE_BELOW, width=32)


@st.composite
def rows(draw, max_size=200):
    values = draw(st.lists(f32, min_size=1, max_size=max_size))
    if draw(st.booleans()):
        values = [bf16(v) for v in values]  # many exact ties
    if draw(st.booleans()):
        masked = draw(st.sets(st.integers(0, len(values) - 1), max_size=len(values) - 1))
        values = [-INF if i in masked else v for i, v in enumerate(values)]
    return values


ks = st.one_of(st.none(), st.integers(min_value=1, max_value=250))
ps = st.one_of(st.none(), st.just(1.0), f32_p)


# --- properties --------------------------------------------------------------------------------


@given(st.lists(f32, min_size=1, max_size=300), f32_p, st.booleans())
@settings(max_examples=200, deadline=None)
def test_without_k_it_is_the_seeds_procedure_bit_for_bit(logits, p32, fast):
    a = oracle.reference(logits, p32, fast=fast)
    b = oracle.top_k_top_p(logits, p32=p32, k=None, fast=fast)
    assert a == b
    if isinstance(a, oracle.Certified):
        assert a.weights == b.weights  # weights are compare=False: check them too


@given(st.lists(f32, min_size=1, max_size=300), f32_p, st.integers(1, 400), st.booleans())
@settings(max_examples=200, deadline=None)
def test_k_at_least_the_row_is_the_seeds_procedure(logits, p32, extra, fast):
    k = len(logits) + extra - 1
    a = oracle.reference(logits, p32, fast=fast)
    b = oracle.top_k_top_p(logits, p32=p32, k=k, fast=fast)
    assert (a.status, getattr(a, "count", None), getattr(a, "kept", None)) == (
        b.status, getattr(b, "count", None), getattr(b, "kept", None))
    assert (a.target, a.normalizer, a.prefix_at_count) == (b.target, b.normalizer,
                                                            b.prefix_at_count)
    assert b.k == k and not b.top_k_applied


@given(rows(), ps, ks)
@settings(max_examples=300, deadline=None)
def test_numpy_fast_path_is_bit_identical(logits, p, k):
    a = oracle.top_k_top_p(logits, p32=p, k=k)
    b = oracle.top_k_top_p(logits, p32=p, k=k, fast=True)
    assert a == b
    if isinstance(a, oracle.Certified):
        assert a.weights == b.weights
        assert all(type(t) is int for t in b.kept)


@given(rows(), ps, ks)
@settings(max_examples=300, deadline=None)
def test_kept_set_is_a_canonical_prefix_inside_the_top_k(logits, p, k):
    out = oracle.top_k_top_p(logits, p32=p, k=k)
    assume(isinstance(out, oracle.Certified))
    unmasked = sum(v != -INF for v in logits)
    m = unmasked if k is None else min(k, unmasked)
    order = oracle.canonical_order(logits)
    assert out.kept == tuple(order[: out.count])
    assert 1 <= out.count <= m
    assert all(logits[t] != -INF for t in out.kept)
    assert out.masked == len(logits) - unmasked
    assert out.top_k_applied == (k is not None and k < unmasked)
    assert out.top_p_applied == (p is not None and p < 1.0)
    if not out.top_p_applied:
        assert out.count == m
    finite = [v if v != -INF else -1e300 for v in logits]  # prefix_violation wants finite
    assert prefix_violation(finite, list(out.kept)) is None


@given(rows(), f32_p, ks)
@settings(max_examples=300, deadline=None)
def test_certified_boundary_over_the_top_k_weights_only(logits, p, k):
    out = oracle.top_k_top_p(logits, p32=p, k=k)
    assume(isinstance(out, oracle.Certified))
    order = [t for t in oracle.canonical_order(logits) if logits[t] != -INF]
    m = len(order) if k is None else min(k, len(order))
    top = logits[order[0]]
    weights = [math.exp(logits[t] - top) for t in order[:m]]
    target = p * math.fsum(weights)
    assert out.target == target and out.weights == tuple(weights)
    assert math.fsum(weights[: out.count]) >= target
    assert math.fsum(weights[: out.count - 1]) < target
    assert out.prefix_reaches_target(out.count) and not out.prefix_reaches_target(out.count - 1)


@given(rows(), ps, ks)
@settings(max_examples=250, deadline=None)
def test_agrees_with_the_independent_implementation(logits, p, k):
    _agree(logits, p, k, fast=False)


# --- rows never seen: drawn from a fresh seed on every run ----------------------------------------


def _fresh_seed() -> int:
    given_seed = os.environ.get("TOPK_ORACLE_SEED")
    return int(given_seed) if given_seed else int.from_bytes(os.urandom(8), "little")


def _random_row(rnd: random.Random) -> tuple[list[float], float | None, int | None]:
    vocab = rnd.choice([1, 2, 7, 64, 500, 2000, 3000])
    scale = rnd.choice([0.3, 1.0, 3.0, 10.0])
    values = [to_float32(rnd.gauss(0.0, scale)) for _ in range(vocab)]
    shape = rnd.choice(["plain", "bf16", "dominant", "masked", "forced"])
    if shape == "bf16":
        values = [bf16(v) for v in values]
    elif shape == "dominant":
        for t in rnd.sample(range(vocab), min(vocab, rnd.randint(1, 4))):
            values[t] = to_float32(values[t] + rnd.choice([3.0, 8.0, 20.0]))
    elif shape == "masked" and vocab > 1:
        for t in rnd.sample(range(vocab), rnd.randint(1, vocab - 1)):
            values[t] = -INF
    elif shape == "forced":
        values[rnd.randrange(vocab)] = 1e9
    k = rnd.choice([None, 1, 2, 5, 20, 50, 100, 1000, 5000])
    p = rnd.choice([None, 1.0, to_float32(rnd.uniform(0.01, 0.999)), to_float32(0.9)])
    return values, p, k


@pytest.mark.parametrize("fast", [False, True], ids=["pure", "numpy"])
def test_agrees_with_the_independent_implementation_on_fresh_rows(fast):
    if fast:
        pytest.importorskip("numpy")
    seed = _fresh_seed()
    rnd = random.Random(seed)
    checked = 0
    total = 40
    for i in range(total):
        logits, p, k = _random_row(rnd)
        try:
            checked += _agree(logits, p, k, fast=fast)
        except AssertionError as err:
            raise AssertionError(f"TOPK_ORACLE_SEED={seed} row {i} (p={p}, k={k}, "
                                 f"vocab={len(logits)}): {err}") from err
    # not vacuous: razor-close boundaries are rare on these rows
    assert checked >= total * 3 // 4, f"TOPK_ORACLE_SEED={seed}: only {checked} checked"


# --- known-answer rows (hand-computed) ------------------------------------------------------------
#
# Row R = [3.0, 1.0, 2.0, 2.0, -inf]: canonical order 0 (3.0), 2 and 3 (2.0, the tie by id),
# 1 (1.0); token 4 is masked. With e = 2.71828...:
#   top-k 3 weights 1, 1/e, 1/e; total 1 + 2/e = 1.7358
#     p 0.5:  target 0.8679 <= 1 -> count 1, kept [0]
#     p 0.75: target 1.3018; 1 < target <= 1 + 1/e = 1.3679 -> count 2, kept [0, 2]
#             (margin 0.25 - 0.5/e = 0.066 of... comfortably clear)
#   no top-k, p 0.75: total 1 + 2/e + 1/e^2 = 1.8711, target 1.4033; 1.3679 < target <=
#             1.7358 -> count 3, kept [0, 2, 3]: the top-k normalizer changes the answer.
#   top-k 2, no top-p: the first two canonical tokens, [0, 2] (the 2.0 tie keeps id 2).
R = [3.0, 1.0, 2.0, 2.0, -INF]


@pytest.mark.parametrize("fast", [False, True], ids=["pure", "numpy"])
@pytest.mark.parametrize("p,k,kept", [
    (0.5, 3, [0]),
    (0.75, 3, [0, 2]),
    (0.75, None, [0, 2, 3]),
    (None, 2, [0, 2]),
    (1.0, 2, [0, 2]),
    (None, 4, [0, 2, 3, 1]),  # k = U = 4: every unmasked token, top-k cuts nothing
    (None, 99, [0, 2, 3, 1]),
])
def test_known_answers_on_a_row_with_a_tie_and_a_mask(fast, p, k, kept):
    if fast:
        pytest.importorskip("numpy")
    out = oracle.top_k_top_p(R, p32=to_float32(p) if p else p, k=k, fast=fast)
    assert isinstance(out, oracle.Certified)
    assert list(out.kept) == kept and out.count == len(kept)
    assert out.masked == 1 and out.k == k
    assert out.top_k_applied == (k is not None and k < 4)


def test_known_answer_all_equal_target_lands_exactly_on_a_prefix():
    # four equal logits, top-k 2: weights 1, 1; target 0.5 * 2 = 1.0 exactly; the first
    # prefix (1.0) reaches it -> count 1, kept [0] (lowest id of the tie).
    out = oracle.top_k_top_p([0.0, 0.0, 0.0, 0.0], p32=0.5, k=2)
    assert isinstance(out, oracle.Certified) and out.kept == (0,)
    assert out.target == 1.0 and out.normalizer == 2.0


def test_known_answer_forced_token_at_1e9():
    # 1e9 is exactly a float32 (1953125 * 2**9); the other weights are exp(-1e9) = 0.0:
    # whatever k >= 1 and p, only the forced token is kept under top-p.
    row = [0.5, 1e9, 0.25, 0.0]
    for k in (1, 2, 4, None):
        out = oracle.top_k_top_p(row, p32=to_float32(0.9), k=k)
        assert isinstance(out, oracle.Certified) and out.kept == (1,)
    out = oracle.top_k_top_p(row, p32=None, k=3)  # top-k only keeps 3 regardless of weight
    assert out.kept == (1, 0, 2)


def test_known_answer_k_one_is_the_lowest_id_argmax():
    out = oracle.top_k_top_p([2.0, 5.0, 5.0], p32=None, k=1)
    assert out.kept == (1,) and out.count == 1 and out.top_k_applied


def test_top_k_only_minimality_is_by_count():
    out = oracle.top_k_top_p([0.0, -1000.0, -1000.0], p32=None, k=3)
    # the two tail weights are exp(-1000) = 0.0: still kept, by count
    assert out.count == 3 and out.weights == (1.0, 0.0, 0.0)
    assert out.prefix_reaches_target(3) and not out.prefix_reaches_target(2)


# --- refusals ---------------------------------------------------------------------------------


@pytest.mark.parametrize("fast", [False, True], ids=["pure", "numpy"])
@pytest.mark.parametrize("k", [0, -1, True, False, 2.0, "3"])
def test_invalid_k_is_refused(fast, k):
    with pytest.raises(InvalidKError):
        oracle.top_k_top_p([0.0, 1.0], p32=0.5, k=k, fast=fast)


@pytest.mark.parametrize("fast", [False, True], ids=["pure", "numpy"])
@pytest.mark.parametrize("bad", [INF, math.nan])
def test_plus_inf_and_nan_are_refused_minus_inf_is_masked(fast, bad):
    with pytest.raises(NonFiniteLogitError):
        oracle.top_k_top_p([0.0, -INF, bad], p32=0.5, k=2, fast=fast)
    out = oracle.top_k_top_p([0.0, -INF, 1.0], p32=0.5, k=2, fast=fast)
    assert out.kept == (2,)


@pytest.mark.parametrize("fast", [False, True], ids=["pure", "numpy"])
def test_all_masked_and_empty_rows_are_refused(fast):
    with pytest.raises(AllMaskedRowError):
        oracle.top_k_top_p([-INF, -INF], p32=0.5, k=1, fast=fast)
    with pytest.raises(EmptyRowError):
        oracle.top_k_top_p([], p32=0.5, k=1, fast=fast)


@pytest.mark.parametrize("p", [0.0, -0.5, math.nan, INF, 0.1])  # 0.1 is not a float32
def test_invalid_p_is_refused(p):
    with pytest.raises(InvalidPError):
        oracle.top_k_top_p([0.0, 1.0], p32=p, k=1)


@pytest.mark.parametrize("fast", [False, True], ids=["pure", "numpy"])
def test_the_seeds_reference_still_refuses_masked_tokens_and_p_one(fast):
    with pytest.raises(NonFiniteLogitError):
        oracle.reference([0.0, -INF], 0.5, fast=fast)
    with pytest.raises(InvalidPError):
        oracle.reference([0.0, 1.0], 1.0, fast=fast)


def test_ambiguous_outcome_records_k(monkeypatch):
    real = oracle._neumaier_scan
    monkeypatch.setattr(oracle, "_neumaier_scan", lambda w, t: min(len(w), real(w, t) + 1))
    out = oracle.top_k_top_p([1.0] * 8, p32=0.5, k=4)
    assert isinstance(out, oracle.Ambiguous)
    assert out.k == 4 and out.top_k_applied and out.scan_count == 3


# --- the exact-real diagnostic follows the same definition ----------------------------------------


def test_exact_count_is_over_the_top_k_prefix_only():
    pytest.importorskip("flint")
    from harness.diagnostics import exact

    # R with top-k 3 and p 0.75 keeps 2 (hand-computed above), without top-k 3.
    assert exact.exact_count(R, to_float32(0.75), k=3).count == 2
    assert exact.exact_count(R, to_float32(0.75)).count == 3  # the mask is skipped
    # four equal logits, top-k 2, p 0.5: D_1 = (1 - p m) e^0 = 0 exactly -> count 1
    out = exact.exact_count([0.0] * 4, 0.5, k=2)
    assert (out.count, out.method) == (1, exact.EXACT_EQUALITY)
    out = exact.exact_count(R, None, k=2)
    assert (out.count, out.method) == (2, exact.TOP_K_ONLY)
    with pytest.raises(InvalidKError):
        exact.exact_count(R, 0.5, k=0)
    with pytest.raises(InvalidPError):
        exact.exact_count(R, None)  # no k: the seed's p in (0, 1) is required
    with pytest.raises(AllMaskedRowError):
        exact.exact_count([-INF], 0.5, k=1)


@given(rows(max_size=60), f32_p, ks)
@settings(max_examples=60, deadline=None)
def test_exact_count_with_k_equals_the_exact_count_of_the_prefix_values(logits, p, k):
    pytest.importorskip("flint")
    from harness.diagnostics import exact

    order = [t for t in oracle.canonical_order(logits) if logits[t] != -INF]
    prefix = [logits[t] for t in (order if k is None else order[:k])]
    a = exact.exact_count(logits, p, k=k)
    b = exact.exact_count(prefix, p)
    assert a == b
    count, _, margin = independent(logits, p, k)
    if margin > MARGIN and isinstance(a, exact.ExactCount):
        assert a.count == count
