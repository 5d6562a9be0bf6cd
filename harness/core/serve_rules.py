"""Rule set ``serve/v1``: every path a vLLM server takes, on the rows real models produce.

Predeclared (README "The gate"), written before any run with these rules:

- the oracle is :func:`harness.core.oracle.top_k_top_p`: top-k keeps exactly ``min(k, U)``
  tokens, the first in canonical order (U: the unmasked tokens); top-p then runs the seed's
  procedure on those tokens alone; a row with p >= 1 is top-k only, a row with k >= V is
  the seed's top-p; -inf inputs are masked tokens, never kept;
- every row: both outputs readable and from the captured bytes; no NaN (``nan_output``);
  every kept position carries the input's bits (``kept_value_changed``, patched side);
- forced rows: the seed's forced rules on every path (forced token kept, no NaN, not all
  masked, argmax is the forced token, exactly one token where the side proved the split
  path), and on every path the patched kept count is also held to the seed's count envelope
  against the oracle (``count_bound``): a path that keeps the whole vocabulary on a forced
  row is not "exactly one token" by another name. A row with every token masked has no
  argmax (seed/v1 counted token 0 as its argmax);
- top-k-only rows (p >= 1): stock omitting an oracle token stops (``stock_under_keep``);
  the patched kept set must be exactly the canonical k-prefix (``topk_mismatch``);
- rows with top-p (with or without top-k): the seed's four ordinary rules against this
  oracle (``stock_under_keep``; ``non_prefix``, ``noncanonical_tie``,
  ``missing_oracle_token``, ``under_keep``; ``count_bound``; ``symdiff_regression``).

Diagnostics (never a stop), per side: exact mask equality, minimality as the seed defines
it, the count of changed kept values, and what a difference costs a user: the binary64
probability mass (softmax of the whole row) of kept tokens outside the oracle's set
(``{side}_mass_outside``) and of oracle tokens the side dropped (``{side}_mass_dropped``),
as IEEE-754 hex strings.

Standard library only (trusted core); numpy rows are accepted as the gate accepts them.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from typing import Any

from . import gate
from .f32 import hexf
from .integrity import changed_values
from .names import FORCED
from .oracle import Certified
from .rule_rows import read_sides, row_head

SERVE_V1 = "serve/v1"
STOP_REASONS = (*gate.SEED_STOP_REASONS, "kept_value_changed", "topk_mismatch")


def _values(logits: Any) -> Sequence[float]:
    values: Sequence[float] = logits.tolist() if hasattr(logits, "tolist") else logits
    return values


class RowMass:
    """Binary64 softmax masses over one whole row (masked tokens weigh 0): the maximum and
    the fsum of every weight are computed once, each mass is ``fsum(ids) / total``."""

    def __init__(self, logits: Sequence[float]) -> None:
        self.logits = logits
        self.top = max(v for v in logits if v != -math.inf)
        self.total = math.fsum(math.exp(v - self.top) for v in logits if v != -math.inf)

    def of(self, ids: Collection[int]) -> float:
        weights = (math.exp(self.logits[i] - self.top) for i in ids
                   if self.logits[i] != -math.inf)
        return math.fsum(weights) / self.total


def _forced_failures(row: gate.Row, mask: gate._Mask, values: Any, split: bool) -> list[str]:
    failed = gate._forced_failures(row, mask, values, split)
    if not mask.kept and "argmax_not_forced" not in failed:
        failed.append("argmax_not_forced")  # an all-masked row has no argmax at all
    return sorted(failed, key=_FORCED_ORDER.index)


_FORCED_ORDER = ("forced_token_dropped", "nan", "all_masked", "argmax_not_forced",
                 "not_exactly_one")


def _ordinary_stops(row: gate.Row, oracle: Certified, stock: gate._Mask,
                    patched: gate._Mask) -> list[str]:
    oracle_set = set(oracle.kept)
    stops = []
    stock_short = not oracle_set <= set(stock.kept)
    if stock_short:
        stops.append("stock_under_keep")
    if not oracle.top_p_applied:  # top-k only: exactly the canonical k-prefix
        if set(patched.kept) != oracle_set:
            stops.append("topk_mismatch")
        return stops
    violation = gate.prefix_violation(row.logits, patched.kept)
    if violation:
        stops.append(violation)
    if not oracle_set <= set(patched.kept):
        stops.append("missing_oracle_token")
    if len(patched.kept) < oracle.count:
        stops.append("under_keep")
    if not gate.within_count_bound(len(patched.kept), oracle.count):
        stops.append("count_bound")
    if not stock_short and (len(oracle_set.symmetric_difference(patched.kept))
                            > len(oracle_set.symmetric_difference(stock.kept))):
        stops.append("symdiff_regression")
    return stops


def judge(data: Any) -> dict[str, Any]:
    """One row (a :class:`harness.core.rulesets.RowInput`) by ``serve/v1``."""
    row, oracle = data.row, data.oracle
    stock_split, patched_split = (data.split_sides if data.split_sides is not None
                                  else (data.split_path, data.split_path))
    result = row_head(data)
    certified = oracle if isinstance(oracle, Certified) else None
    stops: list[str] = [] if certified is not None else ["oracle_boundary_ambiguous"]
    sides = read_sides(data, certified)
    masks = {name: side.mask for name, side in sides.items()}
    stops.extend(side.status for side in sides.values() if side.mask is None)
    result.update({name: side.summary for name, side in sides.items()})
    stock, patched = masks["stock"], masks["patched"]
    diagnostics: dict[str, Any] = {}
    if (stock is not None and stock.has_nan) or (patched is not None and patched.has_nan):
        stops.append("nan_output")
    for name, split, side in (("stock", stock_split, data.stock),
                              ("patched", patched_split, data.patched)):
        mask = masks[name]
        if mask is None:
            continue
        changed = changed_values(data.logits_bytes, data.side_bytes[name], fast=data.fast)
        diagnostics[f"{name}_values_changed"] = changed
        if name == "patched" and changed:
            stops.append("kept_value_changed")
        if row.kind == FORCED:
            failures = _forced_failures(row, mask, side.values, split)
            diagnostics[f"{name}_forced_failures"] = failures
            if name == "patched" and failures:
                stops.append("forced_failure")
    if certified is not None:
        mass = RowMass(_values(row.logits))
        if row.kind == FORCED and patched is not None \
                and not gate.within_count_bound(len(patched.kept), certified.count):
            stops.append("count_bound")
        elif row.kind != FORCED and stock is not None and patched is not None:
            stops.extend(_ordinary_stops(row, certified, stock, patched))
        oracle_set = set(certified.kept)
        for name, mask in masks.items():
            if mask is None:
                continue
            diagnostics[f"{name}_exact"] = set(mask.kept) == oracle_set
            diagnostics[f"{name}_minimal"] = gate._minimal(row.logits, mask, certified)
            diagnostics[f"{name}_mass_outside"] = hexf(mass.of(set(mask.kept) - oracle_set))
            diagnostics[f"{name}_mass_dropped"] = hexf(mass.of(oracle_set - set(mask.kept)))
    result["diagnostics"] = diagnostics
    result["stops"] = sorted(set(stops))
    return result
