"""Text for exact-real counts: ``topp-gate exact``'s tables and the README's results section
(:mod:`harness.present.results`). Derived, never a verdict: no signed report holds it, so it
lives outside the trusted core and changing it changes no core digest.

Input: per-row records as :meth:`harness.diagnostics.exact_bundle.ExactRow.to_json` writes
them. Standard library and :mod:`harness.core.report`'s table helpers only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.names import FORCED, ORDINARY, SIDES
from ..core.report import _row_id, _table  # the report's own table rendering, not a copy

_KEEPS = {"under_keep": "under-keeps", "over_keep": "over-keeps", "exact": "exact"}


def exact_cell(row: Mapping[str, Any]) -> str:
    """``19541 (ball, 64 bits)``, ``5 (exact-equality)`` or ``undecided (2 to 5)``."""
    if row.get("exact_status") == "undecided":
        return (f"undecided at {row.get('exact_cap_bits')} bits "
                f"({int(row.get('exact_above', 0)) + 1} to {row.get('exact_at_most')})")
    bits = row.get("exact_bits")
    how = f"{row.get('exact_method')}, {bits} bits" if bits is not None \
        else str(row.get("exact_method"))
    return f"{row.get('exact_count')} ({how})"


def exact_flags(row: Mapping[str, Any]) -> str:
    """What differs from the exact-real count: binary64, and each kernel's keep."""
    flags = []
    if row.get("binary64_vs_exact") == "differ":
        flags.append("binary64 differs")
    for side in SIDES:
        keep = row.get(f"{side}_vs_exact")
        if keep in ("under_keep", "over_keep"):
            flags.append(f"{side} {_KEEPS[keep]}")
    return ", ".join(flags) or "all agree"


def exact_summary(exact: Sequence[Mapping[str, Any]]) -> str:
    """One line: ``binary64 and exact-real counts agree on N of M rows`` and the rest."""
    rows = list(exact)
    agree = sum(r.get("binary64_vs_exact") == "agree" for r in rows)
    differ = [_row_id(r) for r in rows if r.get("binary64_vs_exact") == "differ"]
    undecided = sum(r.get("exact_status") == "undecided" for r in rows)
    ambiguous = sum(r.get("binary64_count") is None for r in rows)
    line = f"binary64 and exact-real counts agree on {agree} of {len(rows)} rows"
    if differ:
        shown = ", ".join(differ[:10]) + (f" and {len(differ) - 10} more"
                                          if len(differ) > 10 else "")
        line += f"; they differ on {len(differ)} ({shown})"
    if undecided:
        line += f"; exact-real count undecided on {undecided}"
    if ambiguous:
        line += f"; binary64 ambiguous on {ambiguous}"
    return line + "."


def exact_keeps(exact: Sequence[Mapping[str, Any]], kind: str) -> str:
    """Per side, how many rows of ``kind`` keep fewer, more or exactly the exact-real count."""
    rows = [r for r in exact if r.get("kind") == kind]
    parts = []
    for side in SIDES:
        keeps = Counter(str(r.get(f"{side}_vs_exact")) for r in rows)
        parts.append(f"{side} under-keeps on {keeps['under_keep']}, over-keeps on "
                     f"{keeps['over_keep']}, exact on {keeps['exact']}")
    return (f"{kind.capitalize()} rows ({len(rows)}) against the exact-real count: "
            + "; ".join(parts) + ".")


def exact_stopped_table(exact: Sequence[Mapping[str, Any]]) -> list[str]:
    """Markdown table of the stopped rows with the exact-real column (empty: no row stopped)."""
    stopped = [r for r in exact if r.get("stops")]
    if not stopped:
        return []
    return _table(["stopped row", "stops", "binary64", "exact-real", "stock kept",
                   "patched kept", "against the exact-real count"],
                  ([_row_id(r), ", ".join(r.get("stops", [])), r.get("binary64_count"),
                    exact_cell(r), r.get("stock_kept"), r.get("patched_kept"),
                    exact_flags(r)] for r in stopped))


def exact_lines(exact: Sequence[Mapping[str, Any]]) -> list[str]:
    """Markdown: the stopped rows with the exact-real column, then a summary for all rows."""
    table = exact_stopped_table(exact)
    out = ["Derived on demand by `topp-gate exact` from the verified bundle, not attested by "
           "the receipt; it changes no verdict and no rule.", ""]
    if table:
        out += [*table, ""]
    out += [exact_summary(exact), "", exact_keeps(exact, ORDINARY), "",
            exact_keeps(exact, FORCED)]
    return out
