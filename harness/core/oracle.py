"""The independent binary64 numerical reference for split top-p (the seed's procedure).

Given one row of finite float32 logits and the kernel's runtime p (float32), it finds the
smallest canonical prefix whose unnormalized binary64 weight reaches ``p * normalizer``:

1. every float32 logit becomes a Python float exactly; p is float32 first, then float;
2. canonical order: stable sort of token ids by (logit descending, id ascending);
   -0.0 and 0.0 are equal logits and tie by id;
3. subtract the maximum, weights with ``math.exp``, normalizer ``math.fsum(weights)``,
   ``target = p * normalizer`` (one rounding);
4. one Neumaier-compensated cumulative scan finds the smallest count whose compensated
   prefix ``s + c`` reaches target, and stops there;
5. certify only the boundary: ``fsum(weights[:count]) >= target`` and
   ``fsum(weights[:count - 1]) < target`` (zero for a one-token prefix). When they do not
   certify the scan's count, the outcome is :class:`Ambiguous`, never resolved by a
   tolerance.

This is a deterministic double-precision reference, not an exact-real nucleus proof.

Top-k, then top-p (:func:`top_k_top_p`, predeclared before any run). A token whose logit is
-inf is *masked* (a grammar mask, a banned word): it has weight 0 and is never kept; +inf
and NaN are refused, and so is a row whose every logit is -inf. With ``U`` the number of
unmasked tokens:

* top-k keeps exactly ``min(k, U)`` tokens, the first in canonical order (so an exact tie
  at the k boundary keeps the lowest ids); ``k`` is an integer >= 1, absent means no top-k;
* top-p then runs the procedure above on those tokens alone: their weights
  ``exp(l - max)`` in canonical order, normalizer ``math.fsum`` over their weights only,
  ``target = p * normalizer``, the same Neumaier scan and the same two fsum
  certifications, the same :class:`Ambiguous` outcome;
* p absent (None) or p >= 1.0 means no top-p: the outcome is the top-k prefix itself,
  certified trivially (``count = min(k, U)``);
* k absent or k >= U with p in (0, 1) is the procedure above unchanged; on a row without
  masked tokens the outcome equals :func:`reference`'s bit for bit (tests prove it).

:func:`reference` stays the seed's procedure exactly: finite logits only, p in (0, 1).

Cost: linear in the vocabulary apart from the sort; the pure scan stops at the boundary.
An optional numpy fast path (``fast=True``) does the sort, the max subtraction and the
scan's two sequential accumulations vectorized; every operation it uses is an IEEE-754
correctly rounded binary64 operation in the same order, and tests prove the results
identical to the pure path. ``math.exp`` and ``math.fsum`` are used on both paths.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import islice, repeat
from typing import Any

from .errors import (
    AllMaskedRowError,
    EmptyRowError,
    InvalidKError,
    InvalidPError,
    NonFiniteLogitError,
)
from .f32 import NEG_INF, to_float32

SCAN = "neumaier"


@dataclass(frozen=True)
class Certified:
    """A certified boundary: the oracle kept set is ``kept`` (canonical order)."""

    count: int
    kept: tuple[int, ...]
    target: float
    normalizer: float
    prefix_at_count: float  # fsum of the first ``count`` weights (>= target)
    prefix_below_count: float  # fsum of the first ``count - 1`` weights (< target)
    weights: tuple[float, ...] = field(repr=False, compare=False)  # canonical order
    k: int | None = None  # the top-k asked for (None: no top-k)
    top_k_applied: bool = False  # k < the number of unmasked tokens: top-k cut the row
    top_p_applied: bool = True  # False: p absent or >= 1, the count is the top-k prefix
    masked: int = 0  # tokens at -inf (never kept)

    status = "certified"

    def prefix_reaches_target(self, length: int) -> bool:
        """Whether the canonical prefix of ``length`` tokens reaches target (fsum).

        ``weights`` hold the top-k candidates only. Without top-p the count is the top-k
        prefix by definition, so a prefix "reaches" exactly when it is that long.
        """
        if length <= 0:
            return False
        if not self.top_p_applied:
            return length >= self.count
        return math.fsum(self.weights[:length]) >= self.target


@dataclass(frozen=True)
class Ambiguous:
    """The scan and the fsum certification disagree: ``oracle_boundary_ambiguous``."""

    scan_count: int
    target: float
    normalizer: float
    prefix_at_count: float
    prefix_below_count: float
    k: int | None = None
    top_k_applied: bool = False
    top_p_applied: bool = True
    masked: int = 0

    status = "oracle_boundary_ambiguous"


OracleOutcome = Certified | Ambiguous


def checked_p(p32: float) -> float:
    """Check that ``p32`` is already a float32 value, finite and strictly inside (0, 1)."""
    if not isinstance(p32, float) or math.isnan(p32) or to_float32(p32) != p32:
        raise InvalidPError(p32, None if not isinstance(p32, float) else to_float32(p32))
    if not (math.isfinite(p32) and 0.0 < p32 < 1.0):
        raise InvalidPError(p32, p32)
    return p32


def checked_top_p(p32: float | None) -> float | None:
    """The top-p of :func:`top_k_top_p`: None when absent or >= 1.0 (no top-p), else a
    float32 value strictly inside (0, 1); anything else (NaN, infinite, <= 0, not float32)
    is refused."""
    if p32 is None:
        return None
    if (isinstance(p32, float) and math.isfinite(p32) and to_float32(p32) == p32
            and p32 >= 1.0):
        return None
    return checked_p(p32)


def checked_k(k: int | None) -> int | None:
    """An integer k >= 1, or None (no top-k). A bool or a non-integer is refused."""
    if k is None:
        return None
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidKError(k)
    return k


def unmasked_count(logits: Sequence[float], row: int) -> int:
    """How many logits are not masked (-inf); refuses an empty row, NaN, +inf, and a row
    that is all -inf."""
    if len(logits) == 0:
        raise EmptyRowError(f"row {row}")
    if all(map(math.isfinite, logits)):
        return len(logits)
    masked = 0
    for token, value in enumerate(logits):
        if value == NEG_INF:
            masked += 1
        elif not math.isfinite(value):
            raise NonFiniteLogitError(row, token, value)
    if masked == len(logits):
        raise AllMaskedRowError(row)
    return len(logits) - masked


def _check_logits(logits: Sequence[float], row: int) -> None:
    if len(logits) == 0:
        raise EmptyRowError(f"row {row}")
    if all(map(math.isfinite, logits)):
        return
    token = next(i for i, v in enumerate(logits) if not math.isfinite(v))
    raise NonFiniteLogitError(row, token, logits[token])


def canonical_order(logits: Sequence[float]) -> list[int]:
    """Token ids sorted by (logit descending, id ascending). Stable sort on -logit.

    Negation is exact, and -0.0 == 0.0, so signed zeros tie and keep id order.
    """
    negated = [-v for v in logits]
    return sorted(range(len(negated)), key=negated.__getitem__)


def _neumaier_scan(weights: Sequence[float], target: float) -> int:
    """Smallest count whose Neumaier-compensated prefix sum reaches target; stops there.

    Returns ``len(weights)`` if the whole compensated sum stays below target.
    """
    s = 0.0
    c = 0.0
    count = 0
    for count, w in enumerate(weights, 1):
        t = s + w
        if abs(s) >= abs(w):
            c += (s - t) + w
        else:
            c += (w - t) + s
        s = t
        if s + c >= target:
            return count
    return count


@dataclass(frozen=True)
class _Request:
    """What one row is asked: top-p (None: none), k (None: none), unmasked token count."""

    p32: float | None
    k: int | None
    unmasked: int

    @property
    def candidates(self) -> int:
        """How many canonical-order tokens top-k leaves (all unmasked ones without k)."""
        return self.unmasked if self.k is None else min(self.k, self.unmasked)

    def labels(self, size: int) -> dict[str, Any]:
        return {"k": self.k, "top_k_applied": self.k is not None and self.k < self.unmasked,
                "top_p_applied": self.p32 is not None, "masked": size - self.unmasked}


def _certify(weights: Sequence[float], order: Sequence[int], count: int, target: float,
             normalizer: float, labels: dict[str, Any] | None = None) -> OracleOutcome:
    """Certify the scan's candidate with fsum; ``order`` needs at least ``count`` ids."""
    extra = labels or {}
    at = math.fsum(islice(weights, count))
    below = math.fsum(islice(weights, count - 1)) if count > 1 else 0.0
    if at >= target and below < target:
        return Certified(
            count=count,
            kept=tuple(order[:count]),
            target=target,
            normalizer=normalizer,
            prefix_at_count=at,
            prefix_below_count=below,
            weights=tuple(weights),
            **extra,
        )
    return Ambiguous(count, target, normalizer, at, below, **extra)


def _top_k_only(weights: Sequence[float], order: Sequence[int],
                labels: dict[str, Any]) -> Certified:
    """No top-p: the top-k prefix is the outcome, certified by definition (target is the
    normalizer, as p = 1 would give)."""
    count = len(weights)
    normalizer = math.fsum(weights)
    below = math.fsum(islice(weights, count - 1)) if count > 1 else 0.0
    return Certified(count=count, kept=tuple(order[:count]), target=normalizer,
                     normalizer=normalizer, prefix_at_count=normalizer,
                     prefix_below_count=below, weights=tuple(weights), **labels)


def _judge(weights: Sequence[float], order: Sequence[int], request: _Request,
           size: int, scan: Any) -> OracleOutcome:
    labels = request.labels(size)
    if request.p32 is None:
        return _top_k_only(weights, order, labels)
    normalizer = math.fsum(weights)
    target = request.p32 * normalizer
    count = scan(weights, target)
    return _certify(weights, order, count, target, normalizer, labels)


def reference(logits: Sequence[float], p32: float, *, row: int = 0,
              fast: bool = False) -> OracleOutcome:
    """The seed's oracle on one row: finite float32 logits (as Python floats), p in (0, 1).

    Exactly the seed's procedure (the module docstring); for top-k, masked tokens or
    p >= 1 use :func:`top_k_top_p`.
    """
    p32 = checked_p(p32)
    if not fast:
        _check_logits(logits, row)
    request = _Request(p32, None, len(logits))
    return _run(logits, request, row, fast, strict=True)


def top_k_top_p(logits: Sequence[float], *, p32: float | None, k: int | None,
                row: int = 0, fast: bool = False) -> OracleOutcome:
    """Top-k then top-p on one row, by the predeclared convention (module docstring).

    ``p32`` is a float32 value in (0, 1), or None / >= 1.0 for no top-p; ``k`` an integer
    >= 1 or None for no top-k. Logits at -inf are masked; NaN and +inf are refused.
    """
    p = checked_top_p(p32)
    kk = checked_k(k)
    if fast:
        return _run(logits, _Request(p, kk, -1), row, fast, strict=False)
    request = _Request(p, kk, unmasked_count(logits, row))
    return _run(logits, request, row, fast, strict=False)


def _run(logits: Sequence[float], request: _Request, row: int, fast: bool,
         strict: bool) -> OracleOutcome:
    if fast:
        return _reference_numpy(logits, request, row, strict)
    order = canonical_order(logits)
    order = order[: request.candidates]
    top = logits[order[0]]
    weights = [math.exp(logits[i] - top) for i in order]
    return _judge(weights, order, request, len(logits), _neumaier_scan)


def _canonical_order_numpy(values: Any) -> Any:
    """Canonical order with numpy, identical to :func:`canonical_order` (tests prove it).

    For float32 inputs (the contract), each value maps to a 32-bit key that sorts like the
    float (after turning -0.0 into 0.0, so signed zeros tie), inverted for descending
    order, with the token id in the low 32 bits: keys are unique, so an ordinary sort of
    them is the stable (logit descending, id ascending) order. Anything that is not
    exactly float32 falls back to a stable argsort on the negated binary64 values.
    """
    import numpy as np

    v32 = values.astype(np.float32)
    if not np.array_equal(v32.astype(np.float64), values):
        return np.argsort(-values, kind="stable")
    bits = (v32 + np.float32(0.0)).view(np.uint32)  # -0.0 + 0.0 == +0.0
    ascending = np.where(bits >> 31 == 1, ~bits, bits | np.uint32(0x80000000))
    keys = (~ascending).astype(np.uint64) << np.uint64(32)
    keys |= np.arange(values.size, dtype=np.uint64)
    return (np.sort(keys) & np.uint64(0xFFFFFFFF)).astype(np.int64)


def _reference_numpy(logits: Sequence[float], request: _Request, row: int,
                     strict: bool) -> OracleOutcome:
    """Same procedure, numpy for the sort and the scan's accumulations (bit-identical).

    ``request.unmasked`` is counted here (pass -1); ``strict`` refuses -inf as the seed's
    procedure does."""
    import numpy as np  # optional: only the fast path needs it

    values = np.asarray(logits, dtype=np.float64)
    finite = np.isfinite(values)
    if values.size == 0 or not finite.all():
        listed = values.tolist()
        if strict:
            _check_logits(listed, row)  # the same typed error as the pure path
        unmasked = unmasked_count(listed, row)
    else:
        unmasked = int(values.size)
    request = _Request(request.p32, request.k, unmasked)
    order_arr = _canonical_order_numpy(values)[: request.candidates]  # -inf sort last
    shifted = values[order_arr] - values[order_arr[0]]  # exact-rounded, same as Python
    # Canonical order makes ``shifted`` non-increasing, so the weights that math.exp sends
    # to exactly 0.0 (every x below EXP_UNDERFLOW_BELOW, far under ln of half the smallest
    # subnormal, -745.13) are a suffix: written as 0.0 without calling math.exp.
    live = int(np.count_nonzero(shifted >= EXP_UNDERFLOW_BELOW))
    weights = list(map(math.exp, shifted[:live].tolist()))
    weights.extend(repeat(0.0, shifted.size - live))
    labels = request.labels(int(values.size))
    if request.p32 is None:
        return _top_k_only(weights, order_arr.tolist(), labels)
    normalizer = math.fsum(weights)
    target = request.p32 * normalizer
    count = _neumaier_scan_numpy(np.asarray(weights, dtype=np.float64), target)
    return _certify(weights, order_arr[:count].tolist(), count, target, normalizer, labels)


SCAN_CHUNK = 16384
EXP_UNDERFLOW_BELOW = -800.0  # math.exp(x) == 0.0 for every x < this (tests check it)


def _neumaier_scan_numpy(w: Any, target: float) -> int:
    """:func:`_neumaier_scan`, vectorized chunk by chunk; stops at the first chunk that
    reaches target.

    ``np.add.accumulate`` is a strictly sequential left-to-right accumulation, so
    accumulating ``[s_last, w_i, ...]`` continues the scalar recurrence
    ``t_k = fl(s_{k-1} + w_k)`` exactly; the compensation terms are elementwise IEEE
    operations, accumulated the same way. Same count as the scalar scan, bit for bit.
    """
    import numpy as np

    s_last, c_last = 0.0, 0.0
    for start in range(0, w.size, SCAN_CHUNK):
        chunk = w[start : start + SCAN_CHUNK]
        s = np.add.accumulate(np.concatenate(([s_last], chunk)))
        s_prev, s = s[:-1], s[1:]
        increments = np.where(np.abs(s_prev) >= np.abs(chunk), (s_prev - s) + chunk,
                              (chunk - s) + s_prev)
        c = np.add.accumulate(np.concatenate(([c_last], increments)))[1:]
        reached = np.flatnonzero(s + c >= target)
        if reached.size:
            return start + int(reached[0]) + 1
        s_last, c_last = float(s[-1]), float(c[-1])
    return int(w.size)


def numpy_available() -> bool:
    try:
        import numpy  # noqa: F401
    except ImportError:
        return False
    return True
