"""Exact-real counts for every row of a bundle, beside its binary64 and kernel counts.

Derived, not attested: nothing here goes into a receipt, changes a verdict or touches a
rule. Input is a :class:`harness.core.verify.UnsafeBundleView` (signature, schema and file
set checked on open; each artifact's digests checked on read) and its signed per-row
results; callers that need a verified bundle run :func:`harness.core.verify.verify_bundle`
first (``topp-gate exact`` does).

Per row: the binary64 oracle count and both kernels' kept counts (from the signed per-row
results, which ``verify`` reruns), the exact-real count (:mod:`harness.diagnostics.exact`, started
from the oracle's count), and flags: whether binary64 and exact-real counts differ, and
whether each kernel keeps fewer (under-keep) or more (over-keep) tokens than the exact-real
nucleus.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.bundle import CASES
from ..core.cases_index import parse_cases_index
from ..core.errors import MalformedEvidenceError
from ..core.f32 import FLOAT32_BYTES, decode
from ..core.names import SIDES
from ..core.verify import UnsafeBundleView
from .exact import ExactCount, ExactOutcome, RowTask, exact_rows, outcome_json

AGREE = "agree"
DIFFER = "differ"
UNKNOWN = "unknown"  # the oracle was ambiguous or the exact count undecided
UNDER = "under_keep"
OVER = "over_keep"
EXACT = "exact"


@dataclass(frozen=True)
class ExactRow:
    """One row's counts: binary64 oracle, exact-real, and each kernel's kept count."""

    case: str
    row: int
    kind: str
    stops: tuple[str, ...]
    binary64: int | None  # None when the oracle was ambiguous
    exact: ExactOutcome
    kept: dict[str, int | None]  # side -> kept count (None: no usable output)

    @property
    def exact_count(self) -> int | None:
        return self.exact.count if isinstance(self.exact, ExactCount) else None

    @property
    def binary64_vs_exact(self) -> str:
        if self.binary64 is None or self.exact_count is None:
            return UNKNOWN
        return AGREE if self.binary64 == self.exact_count else DIFFER

    def side_vs_exact(self, side: str) -> str | None:
        """``under_keep``, ``over_keep`` or ``exact`` against the exact-real count."""
        kept, exact = self.kept.get(side), self.exact_count
        if kept is None or exact is None:
            return None
        return UNDER if kept < exact else OVER if kept > exact else EXACT

    @property
    def flagged(self) -> bool:
        """binary64 and exact differ, or a kernel under- or over-keeps in exact arithmetic."""
        return self.binary64_vs_exact != AGREE or any(
            self.side_vs_exact(side) in (UNDER, OVER) for side in SIDES)

    def to_json(self) -> dict[str, Any]:
        return {"case": self.case, "row": self.row, "kind": self.kind,
                "binary64_count": self.binary64, **outcome_json(self.exact),
                "binary64_vs_exact": self.binary64_vs_exact,
                **{f"{side}_kept": self.kept.get(side) for side in SIDES},
                **{f"{side}_vs_exact": self.side_vs_exact(side) for side in SIDES},
                "stops": list(self.stops)}


def _binary64(result: dict[str, Any]) -> tuple[int | None, int]:
    """(certified count or None, where the exact search starts)."""
    oracle = result["oracle"]
    if oracle.get("status") == "certified":
        return int(oracle["count"]), int(oracle["count"])
    return None, int(oracle.get("scan_count", 1))


def _kept(result: dict[str, Any], side: str) -> int | None:
    info = result.get(side, {})
    return int(info["kept"]) if info.get("status") == "ok" else None


def case_tasks(view: UnsafeBundleView
               ) -> Iterator[tuple[list[RowTask], list[dict[str, Any]]]]:
    """Per case, in the receipt's order: each row's exact-search work item and its signed
    result. Lazy: a case's bytes are read only when it is asked for and dropped before the
    next one, so a caller that consumes one case at a time holds one case."""
    results: list[dict[str, Any]] = view.statement["predicate"]["rows"]
    layout = parse_cases_index(view.raw(CASES))
    if len(results) != sum(case.batch for case in layout):
        raise MalformedEvidenceError("the receipt's per-row results do not cover cases.json")
    position = 0
    for case in layout:
        logits, ps = view.raw(case.logits_path), decode(view.raw(case.p_path))
        row_bytes = case.vocab * FLOAT32_BYTES
        tasks: list[RowTask] = []
        signed = results[position : position + case.batch]
        for i, result in enumerate(signed):
            if (result["case"], result["row"]) != (case.id, i):
                raise MalformedEvidenceError(f"per-row results out of case order at "
                                             f"{case.id}[{i}]")
            tasks.append((logits[i * row_bytes : (i + 1) * row_bytes], ps[i],
                          _binary64(result)[1]))
        position += case.batch
        del logits  # the row slices are copies; the whole array is not kept
        yield tasks, signed


def row_tasks(view: UnsafeBundleView) -> tuple[list[RowTask], list[dict[str, Any]]]:
    """Every row's work item and signed result at once (holds every row's bytes: for
    benchmarks; :func:`bundle_exact` streams case by case)."""
    tasks: list[RowTask] = []
    results: list[dict[str, Any]] = []
    for case, signed in case_tasks(view):
        tasks += case
        results += signed
    return tasks, results


def bundle_exact(view: UnsafeBundleView, *, workers: int = 1,
                 progress: Callable[[int], None] | None = None,
                 on_rows: Callable[[int], None] | None = None) -> list[ExactRow]:
    """Every row's exact-real count beside its binary64 and kernel counts, one case held at
    a time (peak memory follows the largest case, not the bundle)."""
    if on_rows:
        on_rows(len(view.statement["predicate"]["rows"]))
    rows: list[ExactRow] = []
    for tasks, results in case_tasks(view):
        outcomes = exact_rows(tasks, workers=workers, progress=progress)
        rows += [ExactRow(case=r["case"], row=r["row"], kind=r["kind"],
                          stops=tuple(r["stops"]), binary64=_binary64(r)[0], exact=outcome,
                          kept={side: _kept(r, side) for side in SIDES})
                 for r, outcome in zip(results, outcomes, strict=True)]
        del tasks, outcomes
    return rows


def summary(rows: Iterable[ExactRow]) -> dict[str, Any]:
    """Counts over rows: agreement, undecided rows, and per side under/over/exact keeps."""
    rows = list(rows)
    per_side = {side: {UNDER: 0, OVER: 0, EXACT: 0} for side in SIDES}
    for r in rows:
        for side in SIDES:
            verdict = r.side_vs_exact(side)
            if verdict is not None:
                per_side[side][verdict] += 1
    return {
        "rows": len(rows),
        "agree": sum(r.binary64_vs_exact == AGREE for r in rows),
        "differ": sum(r.binary64_vs_exact == DIFFER for r in rows),
        "undecided": sum(r.exact_count is None for r in rows),
        "binary64_ambiguous": sum(r.binary64 is None for r in rows),
        "sides": per_side,
    }


def summary_line(rows: Sequence[ExactRow]) -> str:
    """``binary64 and exact-real counts agree on N of M rows`` and what else there is."""
    s = summary(rows)
    parts = [f"binary64 and exact-real counts agree on {s['agree']} of {s['rows']} rows"]
    if s["differ"]:
        parts.append(f"differ on {s['differ']}")
    if s["undecided"]:
        parts.append(f"exact-real count undecided on {s['undecided']}")
    if s["binary64_ambiguous"]:
        parts.append(f"binary64 ambiguous on {s['binary64_ambiguous']}")
    return "; ".join(parts)
