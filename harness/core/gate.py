"""The predeclared gate: pure functions from captured rows, oracle and outputs to a verdict.

Nothing here does I/O, and nothing here has a tunable: the rules are the seed's, fixed in
code, and the row results are deterministic JSON-ready dicts (floats as IEEE-754 hex), so
the offline verifier can recompute them and demand equality.

Forced rows judge the patched side:
    forced token kept, no NaN, row not all masked, argmax is the forced token, and on the
    split path exactly one token kept. Stock's failures are recorded as reproduction of the
    defect (``diagnostics.stock_forced_failures``), never as a stop.

Ordinary rows (boundary rows too), in the seed's order:
    1. both outputs readable and derived from identical input bytes; stock omitting any
       oracle token stops (``stock_under_keep``) and that row defines no tradeoff;
    2. patched kept set is a canonical prefix under (logit desc, id asc) holding the whole
       oracle set: a hole (``non_prefix``), a noncanonical exact tie (``noncanonical_tie``),
       a missing oracle token (``missing_oracle_token``), fewer tokens than the oracle
       (``under_keep``) each stop;
    3. ``|kept - oracle| <= 3``, or else ``|kept - oracle| / oracle < 0.005`` (exact integer
       comparison ``200 * diff < oracle``), else ``count_bound``;
    4. patched symmetric difference from the oracle <= stock's (``symdiff_regression``).
Diagnostics (never a stop): exact mask equality with the oracle, and whether removing the
lowest-priority kept token drops the reference prefix below p (minimality).

Inputs are checked before they get here (:mod:`harness.core.judge`, the receipt schema); a
row kind, side status, criterion or stop reason this module does not know is therefore a
bug, raised as :class:`~harness.core.errors.InternalError` (exit 5), never a usage error.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import compress
from typing import Any

from .errors import InternalError
from .f32 import hexf
from .names import FORCED, ROW_KINDS
from .oracle import Ambiguous, Certified, OracleOutcome

# Side statuses: what the kernel runner could say about one side's output for a row.
OK = "ok"
SIDE_FAILURES = ("unreadable_output", "input_mismatch", "timeout", "kernel_crash")

# The closed set of the seed's stop reasons (rule set ``seed/v1``; later rule sets add
# their own in :mod:`harness.core.rulesets`, and the receipt schema enumerates them all).
SEED_STOP_REASONS = (
    "under_keep",
    "non_prefix",
    "noncanonical_tie",
    "missing_oracle_token",
    "stock_under_keep",
    "count_bound",
    "symdiff_regression",
    "oracle_boundary_ambiguous",
    "forced_failure",
    "nan_output",
    "unreadable_output",
    "input_mismatch",
    "timeout",
    "kernel_crash",
    "evidence_drift",
    "run_timeout",
    "split_path_not_taken",
)

PASS = "PASS"  # noqa: S105 - a verdict, not a password
STOP = "STOP"


@dataclass(frozen=True)
class SideOutput:
    """One side's output row: masked logits (kept tokens finite or +inf, masked -inf)."""

    status: str
    values: Sequence[float] | None = None

    @classmethod
    def failed(cls, status: str) -> SideOutput:
        if status not in SIDE_FAILURES:
            raise InternalError(f"unknown side failure status {status!r}")
        return cls(status, None)


@dataclass(frozen=True)
class Row:
    """One captured row and how it is judged."""

    case: str
    index: int
    kind: str
    logits: Sequence[float]
    p32: float
    forced_id: int | None = None
    k: int | None = None  # top-k of the row (None: no top-k); read by the serve rule sets


@dataclass
class _Mask:
    kept: list[int]
    has_nan: bool


def _mask(values: Sequence[float]) -> _Mask:
    """Kept tokens (neither -inf nor NaN) in index order, found by C-level passes."""
    if _is_array(values):
        return _mask_numpy(values)
    has_nan = any(map(math.isnan, values))
    keep = map(_kept_value, values) if has_nan else map(_NEG_INF.__ne__, values)
    return _Mask(list(compress(range(len(values)), keep)), has_nan)


_NEG_INF = -math.inf


def _kept_value(v: float) -> bool:
    return v != _NEG_INF and v == v


def _argmax(values: Sequence[float]) -> int | None:
    """Smallest index holding the largest non-NaN value; None when every value is NaN."""
    if _is_array(values):
        return _argmax_numpy(values)
    if values and not any(map(math.isnan, values)):
        return values.index(max(values))  # without NaN, the first index of the maximum
    best: int | None = None
    for i, v in enumerate(values):
        if v == v and (best is None or v > values[best]):
            best = i
    return best


def _lowest_priority(logits: Sequence[float], kept: Sequence[int]) -> int:
    """The kept token that sorts last under (logit descending, id ascending)."""
    low = kept[0]
    for i in kept:
        if logits[i] < logits[low] or (logits[i] == logits[low] and i > low):
            low = i
    return low


def prefix_violation(logits: Sequence[float], kept: Sequence[int]) -> str | None:
    """None when ``kept`` is a canonical prefix, else ``non_prefix`` or ``noncanonical_tie``.

    O(n): the set is a prefix exactly when every dropped token sorts after the
    lowest-priority kept token ``low`` under (logit descending, id ascending). A dropped
    token with a larger logit is a hole (``non_prefix``); else a dropped token with the same
    logit and a smaller id is a ``noncanonical_tie``. Counted with C-level passes: every
    token above ``low``'s logit must be kept, and so must ``low``'s equals before it.
    """
    if not kept:
        return None  # the empty prefix; under_keep catches it
    if _is_array(logits):
        return _prefix_violation_numpy(logits, kept)
    low = _lowest_priority(logits, kept)
    low_value = logits[low]
    above = sum(map(low_value.__lt__, logits))
    kept_above = sum(map(low_value.__lt__, map(logits.__getitem__, kept)))
    if above != kept_above:
        return "non_prefix"
    kept_set = set(kept)
    ties_before = compress(range(low), map(low_value.__eq__, logits[:low]))
    if any(j not in kept_set for j in ties_before):
        return "noncanonical_tie"
    return None


# --- numpy fast path (optional; tests prove every result equal to the pure path) -----------


def _is_array(values: Any) -> bool:
    """A numpy row (the judge's fast path) rather than a list of Python floats."""
    return hasattr(values, "dtype")


def _mask_numpy(values: Any) -> _Mask:
    import numpy as np

    nan = np.isnan(values)
    kept = np.flatnonzero(~(nan | np.isneginf(values)))
    return _Mask(kept.tolist(), bool(nan.any()))


def _argmax_numpy(values: Any) -> int | None:
    import numpy as np

    if values.size and not np.isnan(values).any():
        return int(np.argmax(values))  # the first index of the maximum, as the loop
    return _argmax(values.tolist())


def _prefix_violation_numpy(logits: Any, kept: Sequence[int]) -> str | None:
    import numpy as np

    ids = np.asarray(kept, dtype=np.int64)
    kept_values = logits[ids]
    low_value = kept_values.min()
    low = int(ids[kept_values == low_value].max())
    if np.count_nonzero(logits > low_value) != np.count_nonzero(kept_values > low_value):
        return "non_prefix"
    ties_before = np.count_nonzero(logits[:low] == low_value)
    kept_ties_before = np.count_nonzero((kept_values == low_value) & (ids < low))
    return "noncanonical_tie" if ties_before != kept_ties_before else None


def within_count_bound(kept: int, oracle: int) -> bool:
    """The seed's per-row count envelope, in exact integer arithmetic."""
    diff = abs(kept - oracle)
    return diff <= 3 or 200 * diff < oracle


# --- criteria ------------------------------------------------------------------------------

Criterion = Callable[["_RowContext"], list[str]]


@dataclass
class _RowContext:
    row: Row
    oracle: Certified
    stock: _Mask
    patched: _Mask
    split_path: bool


def _forced_failures(row: Row, mask: _Mask, values: Sequence[float], split_path: bool) -> list[str]:
    """Which forced-row properties a side violates (names are stable, used in reports)."""
    fid = row.forced_id
    failed = []
    if fid is None or fid not in set(mask.kept):
        failed.append("forced_token_dropped")
    if mask.has_nan:
        failed.append("nan")
    if not mask.kept:
        failed.append("all_masked")
    if _argmax(values) != fid:
        failed.append("argmax_not_forced")
    if split_path and len(mask.kept) != 1:
        failed.append("not_exactly_one")
    return failed


def _nan(ctx: _RowContext) -> list[str]:
    return ["nan_output"] if ctx.patched.has_nan or ctx.stock.has_nan else []


def _stock_under_keep(ctx: _RowContext) -> list[str]:
    return [] if set(ctx.oracle.kept) <= set(ctx.stock.kept) else ["stock_under_keep"]


def _patched_prefix(ctx: _RowContext) -> list[str]:
    reasons = []
    violation = prefix_violation(ctx.row.logits, ctx.patched.kept)
    if violation:
        reasons.append(violation)
    if not set(ctx.oracle.kept) <= set(ctx.patched.kept):
        reasons.append("missing_oracle_token")
    if len(ctx.patched.kept) < ctx.oracle.count:
        reasons.append("under_keep")
    return reasons


def _count_bound(ctx: _RowContext) -> list[str]:
    return [] if within_count_bound(len(ctx.patched.kept), ctx.oracle.count) else ["count_bound"]


def _symdiff(ctx: _RowContext) -> list[str]:
    if _stock_under_keep(ctx):
        return []  # that row defines no stock-relative tradeoff (already a stop)
    oracle = set(ctx.oracle.kept)
    patched = len(oracle.symmetric_difference(ctx.patched.kept))
    stock = len(oracle.symmetric_difference(ctx.stock.kept))
    return ["symdiff_regression"] if patched > stock else []


ORDINARY_CRITERIA: dict[str, Criterion] = {
    "nan_output": _nan,
    "stock_under_keep": _stock_under_keep,
    "canonical_prefix": _patched_prefix,
    "count_bound": _count_bound,
    "symdiff": _symdiff,
}


class AllOf:
    """A row passes when every named criterion passes. Empty or unknown names are refused."""

    def __init__(self, names: Sequence[str], registry: dict[str, Criterion]) -> None:
        if not names:
            raise InternalError("a gate needs at least one criterion")
        unknown = [n for n in names if n not in registry]
        if unknown:
            raise InternalError(f"unknown gate criteria: {', '.join(unknown)}")
        self.names = tuple(names)
        self._criteria = [registry[n] for n in names]

    def __call__(self, ctx: _RowContext) -> list[str]:
        reasons: list[str] = []
        for criterion in self._criteria:
            reasons.extend(criterion(ctx))
        return reasons


ORDINARY_GATE = AllOf(tuple(ORDINARY_CRITERIA), ORDINARY_CRITERIA)


# --- per-row judgement ---------------------------------------------------------------------


def _side_status(side: SideOutput, vocab: int) -> str:
    """OK, or the failure that makes this side's row unusable (fail closed)."""
    if side.status in SIDE_FAILURES:
        return side.status
    if side.status != OK or side.values is None or len(side.values) != vocab:
        return "unreadable_output"
    return OK


def _side_summary(mask: _Mask | None, status: str, oracle: Certified | None) -> dict[str, Any]:
    if mask is None:
        return {"status": status}
    summary: dict[str, Any] = {"status": OK, "kept": len(mask.kept), "nan": mask.has_nan}
    if oracle is not None:
        o = set(oracle.kept)
        summary["symdiff"] = len(o.symmetric_difference(mask.kept))
        summary["missing_oracle"] = len(o.difference(mask.kept))
    return summary


def _minimal(logits: Sequence[float], mask: _Mask, oracle: Certified) -> bool | None:
    """Whether dropping the lowest-priority kept token leaves the reference prefix below p.

    Defined only for a non-empty canonical prefix without NaN; None otherwise.
    """
    if not mask.kept or mask.has_nan or prefix_violation(logits, mask.kept):
        return None
    return not oracle.prefix_reaches_target(len(mask.kept) - 1)


def _oracle_summary(oracle: OracleOutcome) -> dict[str, Any]:
    base = {
        "target": hexf(oracle.target),
        "normalizer": hexf(oracle.normalizer),
        "prefix_at_count": hexf(oracle.prefix_at_count),
        "prefix_below_count": hexf(oracle.prefix_below_count),
    }
    if isinstance(oracle, Ambiguous):
        return {"status": oracle.status, "scan_count": oracle.scan_count, **base}
    return {"status": oracle.status, "count": oracle.count, **base}


def judge_row(row: Row, oracle: OracleOutcome, stock: SideOutput, patched: SideOutput, *,
              split_path: bool, split_sides: tuple[bool, bool] | None = None) -> dict[str, Any]:
    """Judge one row. Returns its deterministic, JSON-ready result.

    ``split_path``: both sides proved the CUDA split path for this row's case.
    ``split_sides``: (stock, patched), whether each side proved the split path; the forced
    rule "exactly one token" applies to a side only when it did. Default: ``split_path``
    for both (version 1 manifests declare the split path for both sides).
    """
    stock_split, patched_split = split_sides if split_sides is not None else (split_path,
                                                                              split_path)
    if row.kind not in ROW_KINDS:
        raise InternalError(f"unknown row kind {row.kind!r}")
    if row.kind == FORCED and (row.forced_id is None or not 0 <= row.forced_id < len(row.logits)):
        raise InternalError(f"forced row {row.case}[{row.index}] has no valid forced id")
    result: dict[str, Any] = {
        "case": row.case,
        "row": row.index,
        "kind": row.kind,
        "p": hexf(row.p32),
        "oracle": _oracle_summary(oracle),
    }
    if row.kind == FORCED:
        result["forced_id"] = row.forced_id
    stops: list[str] = []
    certified = oracle if isinstance(oracle, Certified) else None
    if certified is None:
        stops.append("oracle_boundary_ambiguous")

    masks: dict[str, _Mask | None] = {}
    for name, side in (("stock", stock), ("patched", patched)):
        status = _side_status(side, len(row.logits))
        masks[name] = _mask(side.values) if status == OK and side.values is not None else None
        if masks[name] is None:
            stops.append(status)
        result[name] = _side_summary(masks[name], status, certified)

    diagnostics: dict[str, Any] = {}
    stock_mask, patched_mask = masks["stock"], masks["patched"]
    if row.kind == FORCED:
        if stock_mask is not None and stock.values is not None:
            diagnostics["stock_forced_failures"] = _forced_failures(
                row, stock_mask, stock.values, stock_split)
        if patched_mask is not None and patched.values is not None:
            failures = _forced_failures(row, patched_mask, patched.values, patched_split)
            diagnostics["patched_forced_failures"] = failures
            if failures:
                stops.append("forced_failure")
    elif certified is not None and stock_mask is not None and patched_mask is not None:
        stops.extend(ORDINARY_GATE(_RowContext(row, certified, stock_mask, patched_mask,
                                               split_path)))

    if certified is not None:
        for name, mask in (("stock", stock_mask), ("patched", patched_mask)):
            if mask is not None:
                diagnostics[f"{name}_exact"] = set(mask.kept) == set(certified.kept)
                diagnostics[f"{name}_minimal"] = _minimal(row.logits, mask, certified)
    result["diagnostics"] = diagnostics
    result["stops"] = sorted(set(stops))
    return result


def verdict(row_results: Iterable[dict[str, Any]], run_stops: Iterable[str] = (), *,
            known: Sequence[str] = SEED_STOP_REASONS) -> dict[str, Any]:
    """PASS only when no row and no run-level condition stops; else STOP with every reason.
    ``known``: the stop reasons of the rule set that judged the rows (any other is a bug)."""
    reasons: set[str] = set(run_stops)
    rows = 0
    stopped = 0
    for result in row_results:
        rows += 1
        if result["stops"]:
            stopped += 1
            reasons.update(result["stops"])
    unknown = reasons.difference(known)
    if unknown:
        raise InternalError(f"unknown stop reasons: {', '.join(sorted(unknown))}")
    if rows == 0:
        reasons.add("unreadable_output")  # nothing judged is never a pass
    return {
        "verdict": STOP if reasons else PASS,
        "reasons": sorted(reasons),
        "rows": rows,
        "rows_stopped": stopped,
    }
