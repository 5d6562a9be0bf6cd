"""The exact-real nucleus count: a diagnostic beside the binary64 oracle, never a verdict.

The seed's oracle is a binary64 reference, "not an exact-real nucleus proof", and the gate
keeps using it exactly as predeclared. This module answers the auditor's next question for
one row: what is the nucleus count in exact real arithmetic?

Mathematics. Logits and p are float32, so exact dyadic rationals. With M the row maximum and
weights ``w_i = exp(l_i - M)`` in canonical order (logit descending, id ascending), the count
``k`` reaches p iff

    D_k = (1 - p) * sum_{i < k} w_i - p * sum_{i >= k} w_i >= 0,

and ``D_{k+1} - D_k = w_k > 0``, so D increases strictly with k: the exact count is the
smallest k with ``D_k >= 0`` (``D_0 = -p W < 0`` and ``D_V = (1 - p) W > 0``).

Group the tokens by distinct logit v (exponent ``a_v = v - M``, built exactly: a difference
of two float32 values needs at most 278 bits, and it is formed at :data:`EXACT_BITS`). For
a prefix of k tokens holding every token of the groups above group b and ``n`` tokens of
group b (multiplicity ``m_b``)::

    D_k = (1 - p) * sum_{v above b} m_v e^{a_v} + (n - p m_b) e^{a_b}
          - p * sum_{v below b} m_v e^{a_v}

with exact rational coefficients. Every coefficient but the boundary group's is nonzero
(0 < p < 1). By the Lindemann-Weierstrass theorem the numbers e^a for distinct algebraic
(here rational) a are linearly independent over the algebraic numbers, so ``D_k = 0``
exactly iff every coefficient is 0, decided in rational arithmetic (only possible when all
logits are equal and ``n = p * V``). Otherwise ``D_k != 0`` and its sign is decided:

- exactly (``exact-sign``) when every nonzero coefficient has the same sign (e^a > 0);
- else by ball arithmetic (arb, through python-flint: midpoint-radius intervals whose
  exponents are arbitrary integers, so e^-1e30 stays a positive number) at rising
  precision :data:`PRECISIONS`. Coefficients that are exactly 0 are dropped before any
  rounding: that is what decides a row whose top tokens' coefficients cancel exactly while
  the rest of the row weighs about e^-1e30. Summing prefix and suffix separately and
  comparing two rounded balls could not decide such a row at any precision.

Top-k and masked tokens follow the oracle's predeclared convention
(``harness.core.oracle.top_k_top_p``): a -inf logit is masked (never kept, not in any sum);
with ``k`` the exact nucleus is computed over the first ``min(k, unmasked)`` tokens in
canonical order only (the multiset of their logits; W is their total weight); without
top-p (p None or >= 1) the count is that prefix's length, method :data:`TOP_K_ONLY`.

The search walks from a starting count (the binary64 oracle's), checking
``D_{n-1} < 0 <= D_n``; it gallops and bisects if the start is far off. A sign still
undecided at :data:`PRECISION_CAP` bits makes the row :class:`Undecided`, reported with the
bracket the search had reached, never guessed.

Speed: terms are computed once per distinct logit and precision, lazily from the top; a
first attempt bounds everything below the next two groups by ``count * e^{a_t}`` (the
groups are sorted, so each remaining weight is at most ``e^{a_t}``), which settles rows
dominated by a few huge logits without touching the rest. Rows are independent: use
:func:`exact_rows` with worker processes.

Imports: the standard library, ``harness.core.errors``, ``harness.core.f32``,
``harness.core.oracle`` and python-flint (the optional ``exact`` extra). Never torch,
triton or numpy.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from ..core.errors import InvalidPError, MissingExtraError
from ..core.f32 import decode
from ..core.oracle import (
    Ambiguous,
    canonical_order,
    checked_k,
    checked_p,
    checked_top_p,
    top_k_top_p,
    unmasked_count,
)

if TYPE_CHECKING:
    from flint import arb

EXTRA = "exact"
EXACT_BITS = 320  # float32 differences span at most 2^128 .. 2^-149: 278 bits
PRECISIONS = (64, 256, 1024, 4096)  # ball precisions tried in turn, in bits
PRECISION_CAP = PRECISIONS[-1]

EXACT_EQUALITY = "exact-equality"  # D_n == 0: every coefficient is exactly 0
EXACT_SIGN = "exact-sign"  # every nonzero coefficient has one sign
BALL = "ball"  # the sign of a ball enclosing D, at some precision
TOP_K_ONLY = "top-k-only"  # no top-p: the count is the top-k prefix by definition
UNDECIDED = "undecided"


@dataclass(frozen=True)
class ExactCount:
    """The exact-real nucleus count and what decided it.

    ``method`` is the strongest tool the two certifying signs (``D_{count-1} < 0`` and
    ``D_count >= 0``) needed: :data:`EXACT_EQUALITY` when ``D_count == 0``, else
    :data:`BALL` with ``bits`` the highest ball precision used, else :data:`EXACT_SIGN`.
    """

    count: int
    method: str
    bits: int | None = None

    status = "decided"


@dataclass(frozen=True)
class Undecided:
    """A sign stayed undecided at ``cap_bits``: the count is in ``(above, at_most]``."""

    above: int
    at_most: int
    cap_bits: int

    status = UNDECIDED


ExactOutcome = ExactCount | Undecided


def exact_available() -> bool:
    """Whether python-flint (the ``exact`` extra) is importable."""
    try:
        import flint  # noqa: F401
    except ImportError:
        return False
    return True


def require_exact() -> None:
    """Refuse (exit 2, one line) when the ``exact`` extra is not installed."""
    if not exact_available():
        raise MissingExtraError(EXTRA)


@contextmanager
def _precision(bits: int) -> Iterator[None]:
    from flint import ctx

    with ctx.workprec(bits):
        yield


@dataclass(frozen=True)
class _Sign:
    sign: int  # -1, 0 or +1
    method: str
    bits: int | None = None


class _SignUndecided(Exception):
    pass


class _Row:
    """One row's distinct logits and lazily computed balls, per precision."""

    def __init__(self, logits: Sequence[float], p32: float,
                 precisions: Sequence[int]) -> None:
        from flint import arb

        counts = Counter(logits)  # -0.0 == 0.0: signed zeros are one group, as they tie
        self.values = sorted(counts, reverse=True)
        if len(counts) == len(logits):  # no ties, the usual case: skip per-group bookkeeping
            self.mult = [1] * len(logits)
            self.cum = list(range(len(logits) + 1))
        else:
            self.mult = [counts[v] for v in self.values]
            self.cum = [0]
            for m in self.mult:
                self.cum.append(self.cum[-1] + m)
        self.size = self.cum[-1]
        self.groups = len(self.values)
        self.p = Fraction(p32)
        self.precisions = tuple(precisions)
        with _precision(EXACT_BITS):
            self.p_ball = arb(p32)
            self.one_minus_p = arb(1) - self.p_ball
        if not (self.p_ball.is_exact() and self.one_minus_p.is_exact()):  # pragma: no cover
            raise AssertionError("p or 1 - p was not formed exactly")
        self._exponents: list[arb] = []
        self._exps: dict[int, list[arb]] = {}
        self._prefix: dict[int, list[arb]] = {}
        self._suffix: dict[int, list[arb]] = {}

    # --- exact exponents and their exponentials, computed lazily from the top --------------

    def _exponents_to(self, stop: int) -> list[arb]:
        from flint import arb

        have = len(self._exponents)
        if have < stop:
            with _precision(EXACT_BITS):
                top = arb(self.values[0])
                new = [arb(v) - top for v in self.values[have:stop]]
            if not all(a.is_exact() for a in new):  # pragma: no cover - 278 bits suffice
                raise AssertionError("an exponent was not formed exactly")
            self._exponents.extend(new)
        return self._exponents

    def _exps_to(self, stop: int, bits: int) -> list[arb]:
        exps = self._exps.setdefault(bits, [])
        have = len(exps)
        if have < stop:
            exponents = self._exponents_to(stop)
            with _precision(bits):
                exps.extend(a.exp() for a in exponents[have:stop])
        return exps

    def _term(self, j: int, bits: int) -> arb:
        e = self._exps_to(j + 1, bits)[j]
        return e if self.mult[j] == 1 else e * self.mult[j]

    def _prefix_sum(self, b: int, bits: int) -> arb:
        """sum_{j < b} m_j e^{a_j}, from the top (prefix sums cached per precision)."""
        from flint import arb

        prefix = self._prefix.setdefault(bits, [arb(0)])
        if len(prefix) <= b:
            exps = self._exps_to(b, bits)
            mult = self.mult
            with _precision(bits):
                total = prefix[-1]
                for j in range(len(prefix) - 1, b):
                    total = total + (exps[j] if mult[j] == 1 else exps[j] * mult[j])
                    prefix.append(total)
        return prefix[b]

    def _suffix_sum(self, start: int, bits: int) -> arb:
        """sum_{j >= start} m_j e^{a_j}, accumulated from the bottom (needs every term)."""
        from flint import arb

        suffix = self._suffix.get(bits)
        if suffix is None:
            exps = self._exps_to(self.groups, bits)
            mult = self.mult
            suffix = [arb(0)] * (self.groups + 1)
            with _precision(bits):
                total = arb(0)
                for j in range(self.groups - 1, -1, -1):
                    total = total + (exps[j] if mult[j] == 1 else exps[j] * mult[j])
                    suffix[j] = total
            self._suffix[bits] = suffix
        return suffix[start]

    # --- the sign of D_k --------------------------------------------------------------------

    def sign(self, k: int) -> _Sign:
        """The sign of D_k, decided exactly or by balls; raises _SignUndecided at the cap."""
        if k >= self.size:
            return _Sign(1, EXACT_SIGN)  # every group fully in the prefix: (1 - p) W > 0
        b = bisect_right(self.cum, k) - 1  # cum[b] <= k < cum[b + 1]
        coefficient = (k - self.cum[b]) - self.p * self.mult[b]
        positive = b > 0 or coefficient > 0
        negative = coefficient < 0 or b < self.groups - 1
        if not positive and not negative:
            return _Sign(0, EXACT_EQUALITY)  # Lindemann-Weierstrass: every coefficient is 0
        if not negative:
            return _Sign(1, EXACT_SIGN)
        if not positive:
            return _Sign(-1, EXACT_SIGN)
        for bits in self.precisions:
            sign = self._ball_sign(b, coefficient, bits)
            if sign is not None:
                return _Sign(sign, BALL, bits)
        raise _SignUndecided

    def _ball_sign(self, b: int, coefficient: Fraction, bits: int) -> int | None:
        """The sign of D_k for boundary group b, from balls at ``bits``; None if unsure.

        First with everything from group b + 2 on only bounded (cheap when a few huge
        logits dominate), then with the whole suffix summed.
        """
        upper = self._upper_part(b, coefficient, bits)
        if b + 2 < self.groups:
            sign = self._sign_with_bounded_tail(upper, b, bits)
            if sign is not None:
                return sign
        return self._sign_with_whole_suffix(upper, b, bits)

    def _upper_part(self, b: int, coefficient: Fraction, bits: int) -> arb:
        """(1 - p) * sum_{j < b} m_j e^{a_j} + c_b e^{a_b}, where an empty sum and a
        coefficient of exactly 0 are dropped, never rounded."""
        from flint import arb, fmpq

        with _precision(EXACT_BITS):
            c_ball = arb(fmpq(coefficient.numerator, coefficient.denominator))
        if not c_ball.is_exact():  # pragma: no cover - dyadic, at most ~200 bits
            raise AssertionError("a coefficient was not formed exactly")
        above = self._prefix_sum(b, bits) if b > 0 else None
        e_b = self._exps_to(b + 1, bits)[b] if coefficient else None
        with _precision(bits):
            x = arb(0)
            if above is not None:
                x = self.one_minus_p * above
            if e_b is not None:
                x = x + c_ball * e_b
        return x

    def _sign_with_bounded_tail(self, upper: arb, b: int, bits: int) -> int | None:
        """D_k = upper - p * (m_{b+1} e^{a_{b+1}} + T) with 0 < T <= (tokens from group
        b + 2 on) * e^{a_{b+2}}, since the groups are sorted descending."""
        tail = b + 2
        nearest = self._term(b + 1, bits)
        e_tail = self._exps_to(tail + 1, bits)[tail]
        with _precision(bits):
            y = upper - self.p_ball * nearest
            if y < 0:
                return -1
            if y - self.p_ball * (e_tail * (self.size - self.cum[tail])) > 0:
                return 1
        return None

    def _sign_with_whole_suffix(self, upper: arb, b: int, bits: int) -> int | None:
        below = self._suffix_sum(b + 1, bits) if b + 1 < self.groups else None
        with _precision(bits):
            y = upper - self.p_ball * below if below is not None else upper
            if y < 0:
                return -1
            if y > 0:
                return 1
        return None

    # --- the search ---------------------------------------------------------------------------

    def count(self, start: int) -> ExactOutcome:
        signs: dict[int, _Sign] = {}
        lo, hi = 0, self.size  # D_lo < 0 <= D_hi

        def at_least_zero(k: int) -> bool:
            if k not in signs:
                signs[k] = self.sign(k)
            return signs[k].sign >= 0

        try:
            k = min(max(start, 1), self.size)
            step = 1
            if at_least_zero(k):
                hi = k
                while hi - step > lo:
                    if not at_least_zero(hi - step):
                        lo = hi - step
                        break
                    hi, step = hi - step, step * 2
            else:
                lo = k
                while lo + step < hi:
                    if at_least_zero(lo + step):
                        hi = lo + step
                        break
                    lo, step = lo + step, step * 2
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if at_least_zero(mid):
                    hi = mid
                else:
                    lo = mid
            at_least_zero(lo)
            at_least_zero(hi)  # both certifying signs, for the method
        except _SignUndecided:
            return Undecided(above=lo, at_most=hi, cap_bits=self.precisions[-1])
        return _method(hi, signs[lo], signs[hi])


def _method(count: int, below: _Sign, at: _Sign) -> ExactCount:
    if at.sign == 0:
        return ExactCount(count, EXACT_EQUALITY)
    bits = [s.bits for s in (below, at) if s.method == BALL and s.bits is not None]
    if bits:
        return ExactCount(count, BALL, max(bits))
    return ExactCount(count, EXACT_SIGN)


def exact_count(logits: Sequence[float], p32: float | None, *, k: int | None = None,
                start: int | None = None, row: int = 0,
                precisions: Sequence[int] = PRECISIONS) -> ExactOutcome:
    """The exact-real nucleus count of one row of float32 logits (as Python floats).

    Without ``k`` and without masked (-inf) tokens this is the seed's question, with the
    seed's refusals (p must be in (0, 1)). With ``k`` or masked tokens it follows the
    oracle's top-k/top-p convention (module docstring). ``start`` is where the search
    begins (the binary64 oracle's count; computed here when omitted). Refuses what the
    oracle refuses (typed errors, exit 2).
    """
    require_exact()
    kk = checked_k(k)
    if kk is not None:
        p = checked_top_p(p32)
    elif p32 is None:
        raise InvalidPError(p32, None)
    else:
        p = checked_p(p32)
    unmasked = unmasked_count(logits, row)
    if not precisions or list(precisions) != sorted(set(precisions)):
        raise ValueError("precisions must be strictly increasing")
    candidates = unmasked if kk is None else min(kk, unmasked)
    if candidates < len(logits):  # top-k cuts the row, or tokens are masked
        values = [logits[i] for i in canonical_order(logits)[:candidates]]
    else:
        values = list(logits)
    if p is None:
        return ExactCount(candidates, TOP_K_ONLY)
    if start is None:
        outcome = top_k_top_p(logits, p32=p, k=kk, row=row)
        start = outcome.scan_count if isinstance(outcome, Ambiguous) else outcome.count
    return _Row(values, p, precisions).count(start)


# --- many rows ---------------------------------------------------------------------------------

# One row's work: raw little-endian float32 logits, the runtime p, the search start.
RowTask = tuple[bytes, float, "int | None"]


def exact_task(task: RowTask) -> ExactOutcome:
    logits_bytes, p32, start = task
    return exact_count(decode(logits_bytes), p32, start=start)


def exact_rows(tasks: Sequence[RowTask], *, workers: int = 1,
               progress: Callable[[int], None] | None = None) -> list[ExactOutcome]:
    """Exact counts for many rows, in order; ``workers > 1`` uses worker processes."""
    require_exact()
    if workers <= 1 or len(tasks) <= 1:
        results = []
        for task in tasks:
            results.append(exact_task(task))
            if progress:
                progress(1)
        return results
    out: list[ExactOutcome] = []
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for result in pool.map(exact_task, tasks, chunksize=1):
            out.append(result)
            if progress:
                progress(1)
    return out


def outcome_json(outcome: ExactOutcome) -> dict[str, Any]:
    """The JSON fields ``topp-gate oracle --exact`` and ``topp-gate exact`` print."""
    if isinstance(outcome, Undecided):
        return {"exact_status": UNDECIDED, "exact_above": outcome.above,
                "exact_at_most": outcome.at_most, "exact_cap_bits": outcome.cap_bits}
    fields: dict[str, Any] = {"exact_count": outcome.count, "exact_method": outcome.method}
    if outcome.bits is not None:
        fields["exact_bits"] = outcome.bits
    return fields


def describe(outcome: ExactOutcome) -> str:
    """One phrase for text output: ``19541 (ball, 64 bits)`` or ``undecided (...)``."""
    if isinstance(outcome, Undecided):
        return (f"undecided at {outcome.cap_bits} bits (between {outcome.above + 1} and "
                f"{outcome.at_most})")
    how = outcome.method if outcome.bits is None else f"{outcome.method}, {outcome.bits} bits"
    return f"{outcome.count} ({how})"
