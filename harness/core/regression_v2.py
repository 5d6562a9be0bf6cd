"""Rule set ``regression/v2``: gate a pull request against its base on every row, base
defect or not.

``regression/v1`` (frozen) judges a change on a row the base already fails only by the growth
of its symmetric difference from the oracle, so on a row where the base keeps the whole
vocabulary a change that keeps as many wrong tokens but none of the oracle's passes.
``regression/v2`` compares the change with the base on every row, fact by fact.

Predeclared (issues 26 and 27; README "Which rule set"), written before any run with these
rules. The base is the ``stock`` side, the change the ``patched`` side; each side is judged
alone against the oracle exactly as ``regression/v1`` does
(:func:`harness.core.regression_rules.side_faults`, the oracle
:func:`harness.core.oracle.top_k_top_p`). On every row the change stops when

- it has a fault the base does not have on that row, compared fault by fault
  (``new_fault``; the faults themselves are the row's ``new_faults`` diagnostic); on a
  forced row ``forced_failure`` is new when the change fails a forced rule (forced token
  dropped, NaN, all masked, argmax not the forced token, not exactly one token where the
  change proved the split path) that the base does not fail;
- it drops an oracle token the base kept (``lost_oracle_token``);
- it misses more oracle tokens than the base (``missing_oracle_growth``);
- its symmetric difference from the oracle's kept set is larger than the base's
  (``symdiff_growth``);
- the binary64 probability mass it keeps outside the oracle's set is larger than the base's
  (``mass_outside_growth``), or the mass of the oracle tokens it drops is
  (``mass_dropped_growth``): softmax of the whole captured row in binary64
  (:class:`harness.core.serve_rules.RowMass`, the masses ``serve/v1`` reports), both sides
  computed by the same expression, so an unchanged base gives exactly equal numbers;
- it rewrites a kept value (``kept_value_changed``), whatever the base does (kept-value
  integrity is absolute, as in ``seed/v2``).

Fail closed as ``regression/v1``: an unreadable or mismatched output of either side, or an
ambiguous oracle boundary, stops the row. A row the base already fails is the base's defect:
counted in the verdict's ``base_defects`` (as ``regression/v1``), listed with its base faults
and whether the change altered it in ``base_defect_rows``; the change's stops are listed by
reason in ``broken_rows``.

Diagnostics (never a stop), per row: both sides' faults, ``new_faults``, ``base_defect``,
which forced rules each side fails on a forced row (``{side}_forced_failures``, as
``serve/v1`` names them),
``altered`` (the change's kept set differs from the base's), both sides' masses (IEEE-754
hex), changed kept values, exact mask equality, and minimality by the seed's own test
(:func:`minimal`): ``regression/v1`` and the seed's gate call a p >= 1 row minimal by the
top-k count, not by the mass test, and so say true where the seed's test says false.

Standard library only (trusted core); numpy rows are accepted as the gate accepts them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from . import gate
from .f32 import hexf
from .integrity import changed_values
from .names import FORCED
from .oracle import Certified
from .regression_rules import SYMDIFF_GROWTH, base_defects, paired_row, side_faults
from .serve_rules import RowMass
from .serve_rules import _forced_failures as forced_failures

REGRESSION_V2 = "regression/v2"
NEW_FAULT = "new_fault"
LOST_ORACLE_TOKEN = "lost_oracle_token"  # noqa: S105 - a stop reason, not a password
MISSING_ORACLE_GROWTH = "missing_oracle_growth"
MASS_OUTSIDE_GROWTH = "mass_outside_growth"
MASS_DROPPED_GROWTH = "mass_dropped_growth"
KEPT_VALUE_CHANGED = "kept_value_changed"
# The change's stops on a judged row, in the order the module docstring lists them.
CHANGE_STOPS = (NEW_FAULT, LOST_ORACLE_TOKEN, MISSING_ORACLE_GROWTH, SYMDIFF_GROWTH,
                MASS_OUTSIDE_GROWTH, MASS_DROPPED_GROWTH, KEPT_VALUE_CHANGED)
# The seed's reasons (fail-closed side statuses and an ambiguous oracle among them) plus the
# change's stops.
STOP_REASONS = tuple(dict.fromkeys((*gate.SEED_STOP_REASONS, *CHANGE_STOPS)))


def minimal(mask: gate._Mask, oracle: Certified, logits: Sequence[float]) -> bool | None:
    """The seed's test: whether removing the lowest-priority kept token drops the reference
    prefix (the fsum of the oracle's canonical weights) below the target (p times the
    normalizer; the normalizer itself on a p >= 1 row, as the oracle's top-k-only outcome
    sets it). Defined only for a non-empty canonical prefix without NaN; None otherwise.

    ``gate._minimal`` answers p >= 1 rows by the count (``length - 1 >= count``), so on a
    p = 1 forced row whose forced token alone reaches the target it says true where the
    seed's test says false (issue 27)."""
    if not mask.kept or mask.has_nan or gate.prefix_violation(logits, mask.kept):
        return None
    shorter = len(mask.kept) - 1
    return shorter <= 0 or math.fsum(oracle.weights[:shorter]) < oracle.target


def _row_values(logits: Any) -> Sequence[float]:
    values: Sequence[float] = logits.tolist() if hasattr(logits, "tolist") else logits
    return values


def _masses(mass: RowMass, oracle_set: set[int], kept: set[int]) -> tuple[float, float]:
    """(mass kept outside the oracle's set, mass of the oracle tokens dropped), binary64."""
    return mass.of(sorted(kept - oracle_set)), mass.of(sorted(oracle_set - kept))


def new_faults(base: list[str], change: list[str], base_forced: list[str] | None,
               change_forced: list[str] | None) -> list[str]:
    """The change's faults the base does not have on the row (in the change's order):
    ``forced_failure`` counts as new when a forced rule the change fails is one the base
    does not fail (``*_forced``: each side's failed forced rules; None off forced rows)."""
    forced_new = not set(change_forced or ()) <= set(base_forced or ())
    return [f for f in change if f not in base or (f == "forced_failure" and forced_new)]


def change_stops(new: list[str], oracle_set: set[int],
                 base: set[int], change: set[int], base_masses: tuple[float, float],
                 change_masses: tuple[float, float], change_rewrote: bool) -> list[str]:
    """The change's stops on one judged row (the module docstring's list), in
    :data:`CHANGE_STOPS` order."""
    stops = set()
    if new:
        stops.add(NEW_FAULT)
    if (oracle_set & base) - change:
        stops.add(LOST_ORACLE_TOKEN)
    if len(oracle_set - change) > len(oracle_set - base):
        stops.add(MISSING_ORACLE_GROWTH)
    if len(oracle_set ^ change) > len(oracle_set ^ base):
        stops.add(SYMDIFF_GROWTH)
    if change_masses[0] > base_masses[0]:
        stops.add(MASS_OUTSIDE_GROWTH)
    if change_masses[1] > base_masses[1]:
        stops.add(MASS_DROPPED_GROWTH)
    if change_rewrote:
        stops.add(KEPT_VALUE_CHANGED)
    return [s for s in CHANGE_STOPS if s in stops]


def judge(data: Any) -> dict[str, Any]:
    """One row (a :class:`harness.core.rulesets.RowInput`) by ``regression/v2``."""
    row = data.row
    paired = paired_row(data)
    result, certified, stops = paired.result, paired.certified, paired.stops
    masks, splits = paired.masks, paired.splits
    diagnostics: dict[str, Any] = {}
    changed = {}
    for name, side in (("stock", data.stock), ("patched", data.patched)):
        mask = masks[name]
        if mask is not None:
            changed[name] = changed_values(data.logits_bytes, data.side_bytes[name],
                                           fast=data.fast)
            diagnostics[f"{name}_values_changed"] = changed[name]
            if row.kind == FORCED:  # which forced rules fail (the report's forced table)
                diagnostics[f"{name}_forced_failures"] = forced_failures(
                    row, mask, side.values, splits[name])
    if certified is not None and all(m is not None for m in masks.values()):
        faults = {name: side_faults(row, certified, masks[name], side.values, changed[name],
                                    splits[name])
                  for name, side in (("stock", data.stock), ("patched", data.patched))}
        kept = {name: set(mask.kept) for name, mask in masks.items()}
        oracle_set = set(certified.kept)
        mass = RowMass(_row_values(row.logits))
        masses = {name: _masses(mass, oracle_set, kept[name]) for name in kept}
        diagnostics["stock_faults"] = faults["stock"]
        diagnostics["patched_faults"] = faults["patched"]
        diagnostics["new_faults"] = new_faults(faults["stock"], faults["patched"],
                                               diagnostics.get("stock_forced_failures"),
                                               diagnostics.get("patched_forced_failures"))
        diagnostics["base_defect"] = bool(faults["stock"])
        diagnostics["altered"] = kept["stock"] != kept["patched"]
        for name in ("stock", "patched"):
            diagnostics[f"{name}_mass_outside"] = hexf(masses[name][0])
            diagnostics[f"{name}_mass_dropped"] = hexf(masses[name][1])
        stops.extend(change_stops(diagnostics["new_faults"], oracle_set,
                                  kept["stock"], kept["patched"], masses["stock"],
                                  masses["patched"], bool(changed["patched"])))
    elif masks["patched"] is not None and changed.get("patched"):
        stops.append(KEPT_VALUE_CHANGED)
    if certified is not None:
        for name, mask in masks.items():
            if mask is not None:
                diagnostics[f"{name}_exact"] = set(mask.kept) == set(certified.kept)
                diagnostics[f"{name}_minimal"] = minimal(mask, certified, row.logits)
    result["diagnostics"] = diagnostics
    result["stops"] = sorted(set(stops))
    return result


def row_id(result: dict[str, Any]) -> str:
    """``case[row]``, how the verdict and the report name one row."""
    return f"{result['case']}[{result['row']}]"


def verdict_extra(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What ``regression/v2`` adds to the gate's verdict: ``base_defects`` (as
    ``regression/v1``); ``base_defect_rows``, each row the base fails with its base faults
    and whether the change altered it; ``base_defects_altered``, how many of them it
    altered; ``broken_rows``, per stop reason the rows it stops (reasons sorted, rows in
    judged order)."""
    defect_rows = []
    broken: dict[str, list[str]] = {}
    for result in rows:
        diagnostics = result["diagnostics"]
        faults = diagnostics.get("stock_faults") or []
        if faults:
            defect_rows.append({"row": row_id(result), "faults": list(faults),
                                "altered": bool(diagnostics.get("altered"))})
        for reason in result["stops"]:
            broken.setdefault(reason, []).append(row_id(result))
    return {"base_defects": base_defects(rows),
            "base_defect_rows": defect_rows,
            "base_defects_altered": sum(1 for r in defect_rows if r["altered"]),
            "broken_rows": {reason: broken[reason] for reason in sorted(broken)}}
