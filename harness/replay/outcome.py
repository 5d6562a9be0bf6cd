"""What a verified replay bundle says (verifier side: standard library only).

Read from the statement ``verify`` just checked (its predicate: rows, verdict, run stops,
each side's kernel evidence), never from anything the runner printed:

* the rows the broken release fails against the binary64 oracle (regression rule sets
  judge the base side by the absolute rules on every row: ``diagnostics.stock_faults``), each
  with the fixed release's faults on the same row;
* the gate's verdict on the fix as an upgrade of the broken release, by the bundle's
  regression rule set, and the rows it stopped, split into rows the broken release got right
  and rows it already failed (a regression rule set compares reason by reason on every row,
  so it may stop a repaired row whose fix moved a measure the broken release did not have:
  an under-keep turned into an over-keep inside the count bound is "mass outside grew");
* per side, the cases whose call left the logits buffer's padding changed (a kernel that
  wrote outside its view; ``padding_intact`` in the kernel evidence).

:attr:`Outcome.answer` is ``REPRODUCED AND FIXED`` when the broken release fails some row,
the fix PASSes and repairs every one of those rows; ``NOT REPRODUCED`` when the broken
release fails no row; else ``REPRODUCED, FIX NOT PROVEN``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core.names import SIDES

REPRODUCED_AND_FIXED = "REPRODUCED AND FIXED"
NOT_REPRODUCED = "NOT REPRODUCED"
FIX_NOT_PROVEN = "REPRODUCED, FIX NOT PROVEN"


@dataclass(frozen=True)
class FailedRow:
    row: str  # case[row]
    broken: tuple[str, ...]  # the broken release's faults against the oracle
    fixed: tuple[str, ...]  # the fixed release's faults on the same row
    kept: tuple[int | None, int | None, int | None]  # oracle, broken, fixed kept counts


@dataclass(frozen=True)
class Outcome:
    verdict: str  # the gate's verdict on the fix as an upgrade
    rows: int
    failed: tuple[FailedRow, ...]  # rows the broken release fails
    broke: tuple[str, ...]  # rows the regression rule set stopped, base defect or not
    stop_reasons: tuple[str, ...]  # its reasons, sorted
    run_stops: tuple[str, ...]
    wrote_outside_view: Mapping[str, tuple[str, ...]]  # side -> case ids

    @property
    def repaired(self) -> int:
        return sum(1 for row in self.failed if not row.fixed)

    @property
    def broke_right(self) -> tuple[str, ...]:
        """Stopped rows the broken release got right (no fault against the oracle)."""
        failed = {row.row for row in self.failed}
        return tuple(row for row in self.broke if row not in failed)

    @property
    def stopped_failed(self) -> tuple[str, ...]:
        """Stopped rows the broken release already failed."""
        failed = {row.row for row in self.failed}
        return tuple(row for row in self.broke if row in failed)

    def upgrade_said(self) -> str:
        """The fix as an upgrade, in one line: the verdict, the rows stopped (those the
        broken release got right apart from those it already failed, with the reasons),
        the rows repaired. Evidence strings inside: escape it where it is shown."""
        failed = len(self.failed)
        right = self.rows - failed
        text = f"{self.verdict} as an upgrade"
        if self.broke:
            text += (f" (stopped {len(self.broke)} rows: {len(self.broke_right)} of the "
                     f"{right} the broken release got right, {len(self.stopped_failed)} of "
                     f"the {failed} it fails; by {', '.join(self.stop_reasons)})")
        else:
            text += f" (it broke none of the {right} rows the broken release got right)"
        return text + f"; repaired {self.repaired} of {failed} (no fault against the oracle)"

    @property
    def answer(self) -> str:
        if not self.failed:
            return NOT_REPRODUCED
        if self.verdict == "PASS" and self.repaired == len(self.failed):
            return REPRODUCED_AND_FIXED
        return FIX_NOT_PROVEN


def _count(side: Any) -> int | None:
    value = side.get("kept") if isinstance(side, Mapping) else None
    return int(value) if isinstance(value, int) else None


def outcome_of(predicate: Mapping[str, Any]) -> Outcome:
    """The outcome of a verified replay bundle's predicate."""
    failed = []
    for row in predicate["rows"]:
        diagnostics = row.get("diagnostics") or {}
        faults = tuple(str(f) for f in diagnostics.get("stock_faults") or ())
        if not faults:
            continue
        oracle = row.get("oracle") or {}
        failed.append(FailedRow(
            f"{row['case']}[{row['row']}]", faults,
            tuple(str(f) for f in diagnostics.get("patched_faults") or ()),
            (oracle.get("count") if isinstance(oracle.get("count"), int) else None,
             _count(row.get("stock")), _count(row.get("patched")))))
    verdict = predicate["verdict"]
    broken = verdict.get("broken_rows") or {}  # per stop reason, the rows it stops
    broke = tuple(sorted({str(r) for rows in broken.values() for r in rows}))
    outside: dict[str, tuple[str, ...]] = {}
    for side in SIDES:
        evidence = predicate["kernel_path"].get(side) or {}
        cases = evidence.get("cases") if isinstance(evidence, Mapping) else None
        outside[side] = tuple(str(c.get("id")) for c in cases or ()
                              if isinstance(c, Mapping) and c.get("padding_intact") is False)
    return Outcome(str(verdict["verdict"]), int(verdict.get("rows", len(predicate["rows"]))),
                   tuple(failed), broke, tuple(sorted(str(r) for r in broken)),
                   tuple(str(s) for s in predicate.get("run_stops", ())), outside)
