"""What a change changed, read from a verified bundle (issue 37, item 3): the figures
``pr``'s answer, ``verify --json``, the JUnit properties and the VSA all report.

- ``rows_changed``: rows whose output bytes on the change (patched) side differ from the
  base's (stock) side (a row one side has no output for and the other has counts as
  changed; a row neither side has output for does not);
- ``rows_changed_base_right``: of those, the rows the base got right (the judge's
  ``base_defect`` diagnostic is false: the base has no fault on the row);
- ``broken``: each row the change broke (the row's stops) with its reasons, the dispatch
  path the change had to prove, and the kept counts: the oracle's (its certified count, else
  its status), the base's and the change's (each side's ``kept``, else its status);
- ``base_failed``: the base side's status and the first line of its reason when it did not
  run to the end (a crash is the base's failure, never a verdict on the change), else None;
- ``report``: the bundle's ``report.md`` (None when it has none).

Every value is read from the bundle just verified (the caller opened it with the key and
payload digest that verified); every string is escaped with
:func:`harness.core.terminal.printable` where it is written.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.bundle import CASES, output_name
from ..core.errors import HarnessError
from ..core.names import SIDES
from ..core.terminal import printable

REPORT = "report.md"


@dataclass(frozen=True)
class BrokenFigures:
    row: str  # case[row]
    reasons: tuple[str, ...]
    path: str | None  # the dispatch path the change had to prove (None: not known)
    oracle_kept: int | str  # the oracle's certified count, or its status
    base_kept: int | str  # the base's kept count, or its side status
    change_kept: int | str  # the change's kept count, or its side status

    def kept_text(self) -> str:
        return (f"kept: oracle {printable(str(self.oracle_kept))}, base "
                f"{printable(str(self.base_kept))}, change {printable(str(self.change_kept))}")

    def to_json(self) -> dict[str, Any]:
        return {"row": printable(self.row), "reasons": [printable(r) for r in self.reasons],
                "path": printable(self.path) if self.path is not None else None,
                "kept": {"oracle": _json_value(self.oracle_kept),
                         "base": _json_value(self.base_kept),
                         "change": _json_value(self.change_kept)}}


@dataclass(frozen=True)
class Changes:
    rows: int
    rows_changed: int
    rows_changed_base_right: int
    broken: tuple[BrokenFigures, ...]
    base_failed: str | None
    report: str | None

    def to_json(self) -> dict[str, Any]:
        return {"rows": self.rows, "rows_changed": self.rows_changed,
                "rows_changed_base_right": self.rows_changed_base_right,
                "broken": [b.to_json() for b in self.broken],
                "base_failed": printable(self.base_failed) if self.base_failed else None,
                "report": self.report}

    def properties(self) -> list[tuple[str, str]]:
        """(name, value) for JUnit properties: the counts, and the base's failure."""
        found = [("rows_changed", str(self.rows_changed)),
                 ("rows_changed_base_right", str(self.rows_changed_base_right)),
                 ("rows_broken", str(len(self.broken)))]
        if self.base_failed:
            found.append(("base_failed", printable(self.base_failed)))
        return found


def _json_value(value: int | str) -> int | str:
    return value if isinstance(value, int) else printable(value)


def _kept(block: Any) -> int | str:
    if not isinstance(block, Mapping):
        return "missing"
    kept = block.get("kept")
    if isinstance(kept, int) and not isinstance(kept, bool):
        return kept
    return str(block.get("status", "missing"))


def _oracle(block: Any) -> int | str:
    if not isinstance(block, Mapping):
        return "missing"
    count = block.get("count")
    if block.get("status") == "certified" and isinstance(count, int):
        return count
    return str(block.get("status", "missing"))


def first_line(text: str) -> str:
    """The first non-empty line of ``text`` (a crash's reason: the exception's line)."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    if not lines:
        return ""
    # a Python traceback: its last line names the exception ("ModuleNotFoundError: ...")
    if lines[0].startswith("Traceback") and len(lines) > 1:
        return lines[-1]
    return lines[0]


def base_failure(predicate: Mapping[str, Any]) -> str | None:
    """The base side's status and the first line of its reason when it did not run ok."""
    results = (predicate.get("environment") or {}).get("side_results") or {}
    base = results.get(SIDES[0]) if isinstance(results, Mapping) else None
    if not isinstance(base, Mapping) or base.get("status") in (None, "ok"):
        return None
    line = first_line(str(base.get("reason") or ""))
    return f"{base['status']}: {line}" if line else str(base["status"])


def changes_of(rows: Sequence[Mapping[str, Any]], raw: Callable[[str], bytes],
               dispatch: Callable[[str], str | None], predicate: Mapping[str, Any],
               has: Callable[[str], bool]) -> Changes:
    """The figures of a verified bundle: ``rows`` its judged rows, ``raw`` reads one of its
    files (verified), ``dispatch`` the change's path for a case, ``predicate`` the verified
    statement's predicate, ``has`` whether the bundle holds a file."""
    index = {str(c["id"]): c for c in json.loads(raw(CASES))["cases"]}
    outputs: dict[tuple[str, str], bytes | None] = {}

    def output(side: str, case: str) -> bytes | None:
        if (side, case) not in outputs:
            if len(outputs) > 2 * len(SIDES):  # rows come case by case: keep a few cases
                outputs.clear()
            try:
                outputs[side, case] = bytes(raw(output_name(side, case)))
            except (HarnessError, OSError, KeyError):
                outputs[side, case] = None
        return outputs[side, case]

    changed = changed_right = 0
    broken: list[BrokenFigures] = []
    for row in rows:
        case, number = str(row.get("case")), row.get("row", 0)
        number = number if isinstance(number, int) and number >= 0 else 0
        name = f"{case}[{number}]"
        width = 4 * int(index[case]["vocab"]) if case in index else 0
        before, after = (output(side, case) for side in SIDES)
        cut = [None if data is None or width == 0 else data[number * width:(number + 1) * width]
               for data in (before, after)]
        if cut[0] != cut[1]:
            changed += 1
            if (row.get("diagnostics") or {}).get("base_defect") is False:
                changed_right += 1
        stops = row.get("stops") or []
        if stops:
            broken.append(BrokenFigures(name, tuple(str(s) for s in stops), dispatch(case),
                                        _oracle(row.get("oracle")), _kept(row.get(SIDES[0])),
                                        _kept(row.get(SIDES[1]))))
    return Changes(rows=len(rows), rows_changed=changed, rows_changed_base_right=changed_right,
                   broken=tuple(broken), base_failed=base_failure(predicate),
                   report=REPORT if has(REPORT) else None)


def changes_of_view(view: Any, rows: Sequence[Mapping[str, Any]],
                    dispatch: Callable[[str], str | None]) -> Changes:
    """:func:`changes_of` for a bundle opened with ``open_bundle`` (its statement verified)."""
    def has(name: str) -> bool:
        try:
            view.raw(name)
        except (HarnessError, OSError, KeyError):
            return False
        return True

    return changes_of(rows, view.raw, dispatch, view.statement["predicate"], has)
