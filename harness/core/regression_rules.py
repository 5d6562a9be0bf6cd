"""Rule set ``regression/v1``: gate a pull request against its base.

The seed's rule sets answer the fix question ("does the patched kernel fix the forced-logit
defect without a detected regression?"): a row on which the stock side already fails stops
the gate (``stock_under_keep``) or is judged against the patched side alone, so a base that
fails some rows stops every change, good or bad. ``regression/v1`` answers the pull-request
question instead: what did the change introduce that the base does not already do?

Predeclared (issue 20; README "Which rule set"), written before any run with these rules.
The base is the ``stock`` side, the change the ``patched`` side. Each side is first judged
*alone*, as if it were the patched side, against the oracle (:func:`side_faults`):

- the oracle is :func:`harness.core.oracle.top_k_top_p` (the seed's procedure on rows
  without top-k; the predeclared top-k convention on rows with one);
- every row: no NaN (``nan_output``); every kept position carries the input's bits
  (``kept_value_changed``);
- forced rows: the seed's forced rules (forced token kept, no NaN, not all masked, argmax is
  the forced token, exactly one token where that side proved the split path:
  ``forced_failure``), and the kept count held to the seed's count envelope against the
  oracle (``count_bound``), as ``serve/v1`` does on every path;
- top-k-only rows (p >= 1): exactly the canonical k-prefix (``topk_mismatch``);
- rows with top-p: a canonical prefix (``non_prefix``, ``noncanonical_tie``) holding the
  whole oracle set (``missing_oracle_token``), not fewer tokens than the oracle
  (``under_keep``), inside the seed's count envelope (``count_bound``).

Then a row stops the change when

1. the base has no fault on it and the change has some: the change's faults are the stops;
2. or the change's symmetric difference from the oracle's kept set is larger than the
   base's (``symdiff_growth``), on every row, whether the base fails it or not;
3. or the change rewrites a kept value (``kept_value_changed``), whatever the base does
   (kept-value integrity, as ``seed/v2``).

A row on which the base already has a fault is the *base's defect*: its faults are recorded
in the row's diagnostics (``base_faults``), counted in the verdict's ``base_defects`` object
and listed in ``report.md``. It is never hidden and never a pass of the base: the verdict
says how many rows the base fails and why, beside the change's verdict. Fail closed as the
seed does: an unreadable or mismatched output of either side, or an ambiguous oracle
boundary, stops the row.

Diagnostics (never a stop): each side's faults (``stock_faults``, ``patched_faults``),
``base_defect``, each side's count of changed kept values, exact mask equality and
minimality as the seed defines it.

Standard library only (trusted core); numpy rows are accepted as the gate accepts them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import gate
from .integrity import changed_values
from .names import FORCED
from .oracle import Certified
from .rule_rows import read_sides, row_head

REGRESSION_V1 = "regression/v1"
SYMDIFF_GROWTH = "symdiff_growth"
# The faults a side can have alone (each is also the change's stop reason on a clean row).
FAULTS = ("nan_output", "kept_value_changed", "forced_failure", "count_bound", "topk_mismatch",
          "non_prefix", "noncanonical_tie", "missing_oracle_token", "under_keep")
STOP_REASONS = (*gate.SEED_STOP_REASONS, "kept_value_changed", "topk_mismatch", SYMDIFF_GROWTH)


def side_faults(row: gate.Row, oracle: Certified, mask: Any, values: Any, changed: int,
                split: bool) -> list[str]:
    """What one side does wrong on one row by itself, judged as the patched side would be
    (the module docstring's list), in :data:`FAULTS` order."""
    faults: set[str] = set()
    if mask.has_nan:
        faults.add("nan_output")
    if changed:
        faults.add("kept_value_changed")
    kept = set(mask.kept)
    oracle_set = set(oracle.kept)
    if row.kind == FORCED:
        failed = gate._forced_failures(row, mask, values, split)
        if failed:  # an all-masked row fails "all_masked" whatever its argmax says
            faults.add("forced_failure")
        if not gate.within_count_bound(len(mask.kept), oracle.count):
            faults.add("count_bound")
    elif not oracle.top_p_applied:
        if kept != oracle_set:
            faults.add("topk_mismatch")
    else:
        violation = gate.prefix_violation(row.logits, mask.kept)
        if violation:
            faults.add(violation)
        if not oracle_set <= kept:
            faults.add("missing_oracle_token")
        if len(mask.kept) < oracle.count:
            faults.add("under_keep")
        if not gate.within_count_bound(len(mask.kept), oracle.count):
            faults.add("count_bound")
    return [f for f in FAULTS if f in faults]


def _regression_stops(base: list[str], change: list[str], base_symdiff: int,
                      change_symdiff: int) -> list[str]:
    stops = list(change) if not base else []
    if "kept_value_changed" in change:
        stops.append("kept_value_changed")
    if change_symdiff > base_symdiff:
        stops.append(SYMDIFF_GROWTH)
    return stops


@dataclass
class PairedRow:
    """What every regression rule set reads first of a row (its judge goes on from here):
    the row header with both sides' summaries, the certified oracle (None when ambiguous),
    the fail-closed stops so far, each side's mask and whether each side proved the split
    path."""

    result: dict[str, Any]
    certified: Certified | None
    stops: list[str]
    masks: dict[str, Any]
    splits: dict[str, bool]


def paired_row(data: Any) -> PairedRow:
    """The shared first phase of ``regression/v1`` and ``regression/v2`` on one row."""
    splits = dict(zip(("stock", "patched"),
                      data.split_sides if data.split_sides is not None
                      else (data.split_path, data.split_path), strict=True))
    result = row_head(data)
    certified = data.oracle if isinstance(data.oracle, Certified) else None
    stops: list[str] = [] if certified is not None else ["oracle_boundary_ambiguous"]
    sides = read_sides(data, certified)
    masks: dict[str, Any] = {name: side.mask for name, side in sides.items()}
    stops.extend(side.status for side in sides.values() if side.mask is None)
    result.update({name: side.summary for name, side in sides.items()})
    return PairedRow(result, certified, stops, masks, splits)


def judge(data: Any) -> dict[str, Any]:
    """One row (a :class:`harness.core.rulesets.RowInput`) by ``regression/v1``."""
    row = data.row
    paired = paired_row(data)
    result, certified, stops = paired.result, paired.certified, paired.stops
    masks, splits = paired.masks, paired.splits
    diagnostics: dict[str, Any] = {}
    changed = {}
    for name, mask in masks.items():
        if mask is not None:
            changed[name] = changed_values(data.logits_bytes, data.side_bytes[name],
                                           fast=data.fast)
            diagnostics[f"{name}_values_changed"] = changed[name]
    if certified is not None and all(m is not None for m in masks.values()):
        faults = {name: side_faults(row, certified, masks[name], side.values, changed[name],
                                    splits[name])
                  for name, side in (("stock", data.stock), ("patched", data.patched))}
        diagnostics["stock_faults"] = faults["stock"]
        diagnostics["patched_faults"] = faults["patched"]
        diagnostics["base_defect"] = bool(faults["stock"])
        stops.extend(_regression_stops(faults["stock"], faults["patched"],
                                       result["stock"]["symdiff"],
                                       result["patched"]["symdiff"]))
    if certified is not None:
        for name, mask in masks.items():
            if mask is not None:
                diagnostics[f"{name}_exact"] = set(mask.kept) == set(certified.kept)
                diagnostics[f"{name}_minimal"] = gate._minimal(row.logits, mask, certified)
    result["diagnostics"] = diagnostics
    result["stops"] = sorted(set(stops))
    return result


def base_defects(rows: Iterable[Mapping[str, Any]],
                 known: Sequence[str] = FAULTS) -> dict[str, Any]:
    """The verdict's ``base_defects``: how many rows the base already fails, and per fault
    how many rows have it (zero counts left out), in ``known`` order (a rule set that
    judges more faults, ``regression-support/v1``, passes its own list)."""
    count = 0
    reasons: Counter[str] = Counter()
    for result in rows:
        faults = result["diagnostics"].get("stock_faults") or []
        if faults:
            count += 1
            reasons.update(faults)
    return {"rows": count, "reasons": {f: reasons[f] for f in known if reasons[f]}}


def verdict_extra(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What ``regression/v1`` adds to the gate's verdict: ``base_defects``, always present
    (``{"rows": 0, "reasons": {}}`` when the base fails no row)."""
    return {"base_defects": base_defects(rows)}
