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
from itertools import islice
from typing import Any

from .errors import EmptyRowError, InvalidPError, NonFiniteLogitError
from .f32 import to_float32

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

    status = "certified"

    def prefix_reaches_target(self, length: int) -> bool:
        """Whether the canonical prefix of ``length`` tokens reaches target (fsum)."""
        if length <= 0:
            return False
        return math.fsum(self.weights[:length]) >= self.target


@dataclass(frozen=True)
class Ambiguous:
    """The scan and the fsum certification disagree: ``oracle_boundary_ambiguous``."""

    scan_count: int
    target: float
    normalizer: float
    prefix_at_count: float
    prefix_below_count: float

    status = "oracle_boundary_ambiguous"


OracleOutcome = Certified | Ambiguous


def checked_p(p32: float) -> float:
    """Check that ``p32`` is already a float32 value, finite and strictly inside (0, 1)."""
    if not isinstance(p32, float) or math.isnan(p32) or to_float32(p32) != p32:
        raise InvalidPError(p32, None if not isinstance(p32, float) else to_float32(p32))
    if not (math.isfinite(p32) and 0.0 < p32 < 1.0):
        raise InvalidPError(p32, p32)
    return p32


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


def _certify(weights: Sequence[float], order: Sequence[int], count: int, target: float,
             normalizer: float) -> OracleOutcome:
    """Certify the scan's candidate with fsum; ``order`` needs at least ``count`` ids."""
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
        )
    return Ambiguous(count, target, normalizer, at, below)


def reference(logits: Sequence[float], p32: float, *, row: int = 0,
              fast: bool = False) -> OracleOutcome:
    """Run the oracle on one row. ``logits`` are float32 values as Python floats."""
    p32 = checked_p(p32)
    if fast:
        return _reference_numpy(logits, p32, row)
    _check_logits(logits, row)
    order = canonical_order(logits)
    top = logits[order[0]]
    weights = [math.exp(logits[i] - top) for i in order]
    normalizer = math.fsum(weights)
    target = p32 * normalizer
    count = _neumaier_scan(weights, target)
    return _certify(weights, order, count, target, normalizer)


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


def _reference_numpy(logits: Sequence[float], p32: float, row: int) -> OracleOutcome:
    """Same procedure, numpy for the sort and the scan's accumulations (bit-identical)."""
    import numpy as np  # optional: only the fast path needs it

    values = np.asarray(logits, dtype=np.float64)
    if values.size == 0 or not np.isfinite(values).all():
        _check_logits(values.tolist(), row)  # the same typed error as the pure path
    order_arr = _canonical_order_numpy(values)
    shifted = values[order_arr] - values[order_arr[0]]  # exact-rounded, same as Python
    weights = list(map(math.exp, shifted.tolist()))
    normalizer = math.fsum(weights)
    target = p32 * normalizer
    count = _neumaier_scan_numpy(np.asarray(weights, dtype=np.float64), target)
    return _certify(weights, order_arr[:count].tolist(), count, target, normalizer)


SCAN_CHUNK = 16384


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
