"""What every rule set after the seed's writes first for a row, once: the header (case, row,
kind, p, oracle, then ``k`` and ``forced_id`` where the row has them) and each side's status,
mask and summary. ``serve/v1``, ``regression/v1`` and ``support/v1`` build on it; the seed's
own ``gate.judge_row`` (``seed/v1``, frozen) keeps its header, which never names ``k``.

Key order is part of the result: ``results/rows.json`` and ``report.md`` are written from
these dicts in insertion order, and ``verify`` requires their bytes again.

Standard library only (trusted core).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import gate
from .f32 import hexf
from .names import FORCED, SIDES
from .oracle import Certified


def row_head(data: Any) -> dict[str, Any]:
    """The header of the result of one row (a :class:`harness.core.rulesets.RowInput`):
    case, row, kind, p (hex), the oracle's summary, then ``k`` where the row has a top-k
    and ``forced_id`` on a forced row."""
    row = data.row
    head: dict[str, Any] = {"case": row.case, "row": row.index, "kind": row.kind,
                            "p": hexf(row.p32), "oracle": gate._oracle_summary(data.oracle)}
    if row.k is not None:
        head["k"] = row.k
    if row.kind == FORCED:
        head["forced_id"] = row.forced_id
    return head


@dataclass(frozen=True)
class SideRead:
    """One side of one row as every rule set first reads it."""

    status: str  # gate.OK, or why the side's output cannot be judged
    mask: gate._Mask | None  # the kept positions; None unless the output is readable
    summary: dict[str, Any]  # what the row result records for the side


def read_sides(data: Any, certified: Certified | None) -> dict[str, SideRead]:
    """Each side (in side order) of one row: its status, its mask where its output is
    readable, and its summary against the oracle (``certified``: None when ambiguous)."""
    sides: dict[str, SideRead] = {}
    for name, output in zip(SIDES, (data.stock, data.patched), strict=True):
        status = gate._side_status(output, len(data.row.logits))
        mask = gate._mask(output.values) if status == gate.OK and output.values is not None \
            else None
        sides[name] = SideRead(status, mask, gate._side_summary(mask, status, certified))
    return sides
