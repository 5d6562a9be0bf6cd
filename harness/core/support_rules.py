"""Rule set ``support/v1``: sampling kernels judged by the support of their draws.

A sampling kernel (FlashInfer's ``top_p_sampling_from_probs``,
``top_k_top_p_sampling_from_logits``) returns token ids, not a mask. Its kernel child draws a
predeclared number of tokens per row with fixed seeds (both recorded in its evidence) and
writes the row the way a masking kernel would: the input logit, bit for bit, at every token
it drew, and -inf elsewhere; the draw counts per token go into the case's evidence record
(``draws``). A masking kernel's output is read the same way (its kept set is its support),
so either side of a gate may be a sampler or a mask.

Predeclared (README "Implementations"), written before any run with these rules:

- the oracle is :func:`harness.core.oracle.top_k_top_p` (top-k keeps exactly ``min(k, U)``
  tokens in canonical order, then the seed's top-p on those tokens);
- the *allowed set* of a row is the first ``n`` unmasked tokens in canonical order (logit
  descending, token id ascending), where ``n`` is the oracle's count on forced rows and on
  top-k-only rows (no envelope: top-k is exact), and otherwise the largest count the seed's
  envelope allows around the oracle's count (:func:`harness.core.gate.within_count_bound`),
  capped at ``min(k, U)`` when the row has top-k;
- every row, patched side: both outputs readable, no NaN (``nan_output``), every drawn
  position carries the input's bits (``kept_value_changed``), at least one token drawn
  (``no_draw``), every drawn token in the allowed set (``draw_outside_support``), and when
  the evidence records draw counts, their tokens are exactly the drawn positions of the
  output (``draw_evidence_mismatch``). The stock side is judged by the same checks as
  diagnostics only (``stock_outside_support``...): a release's faults never stop its fix.

Diagnostics (never a stop), per side: tokens drawn, drawn outside the oracle's set and
outside the allowed set, their binary64 probability mass (softmax of the whole row,
``{side}_mass_outside``), and, when draw counts are recorded, a goodness-of-fit statistic of
the draws inside the oracle's set against its renormalized nucleus probabilities
(``{side}_gof``: Pearson's chi-square over bins pooled to an expected count of at least 5,
its degrees of freedom and upper-tail p-value; null when fewer than two bins). A small
p-value is a lead to look at, not a verdict: the draws are few and the seeds fixed.

Standard library only (trusted core).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from . import gate
from .f32 import hexf
from .integrity import changed_values
from .names import FORCED
from .oracle import Certified
from .rule_rows import read_sides, row_head
from .serve_rules import RowMass

SUPPORT_V1 = "support/v1"
STOP_REASONS = (*gate.SEED_STOP_REASONS, "kept_value_changed", "no_draw",
                "draw_outside_support", "draw_evidence_mismatch")
MIN_EXPECTED = 5.0  # pooled bins of the goodness-of-fit statistic


def _values(logits: Any) -> Sequence[float]:
    values: Sequence[float] = logits.tolist() if hasattr(logits, "tolist") else logits
    return values


def canonical_order(logits: Sequence[float]) -> list[int]:
    """Unmasked token ids, logit descending then id ascending."""
    return sorted((i for i, v in enumerate(logits) if v != -math.inf),
                  key=lambda i: (-logits[i], i))


def allowed_count(oracle: Certified, unmasked: int, k: int | None, forced: bool) -> int:
    """How many canonical tokens a draw may come from (see the module's rules)."""
    cap = unmasked if k is None else min(k, unmasked)
    if forced or not oracle.top_p_applied:
        return oracle.count
    n = oracle.count
    while n < cap and gate.within_count_bound(n + 1, oracle.count):
        n += 1
    return n


# --- goodness of fit ------------------------------------------------------------------------


def _upper_gamma_q(a: float, x: float) -> float:
    """The regularized upper incomplete gamma Q(a, x) (series below a + 1, else Lentz's
    continued fraction); binary64, for the chi-square tail."""
    if x <= 0.0:
        return 1.0
    log_front = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1.0:
        term = total = 1.0 / a
        n = a
        for _ in range(10_000):
            n += 1.0
            term *= x / n
            total += term
            if abs(term) < abs(total) * 1e-16:
                break
        return max(0.0, 1.0 - total * math.exp(log_front))
    tiny = 1e-300
    b = x + 1.0 - a
    c = 1.0 / tiny
    d = 1.0 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-16:
            break
    return min(1.0, h * math.exp(log_front))


def chi_square_gof(counts: Sequence[int], probs: Sequence[float]) -> dict[str, Any] | None:
    """Pearson's chi-square of ``counts`` against ``probs`` (same order, probs summing to
    1), bins pooled in that order to an expected count of at least :data:`MIN_EXPECTED`
    (a short last bin joins the one before). None with fewer than two bins."""
    total = sum(counts)
    if total <= 0 or len(counts) != len(probs):
        return None
    bins: list[list[float]] = []  # [observed, expected]
    current = [0.0, 0.0]
    for count, prob in zip(counts, probs, strict=True):
        current[0] += count
        current[1] += prob * total
        if current[1] >= MIN_EXPECTED:
            bins.append(current)
            current = [0.0, 0.0]
    if current[1] > 0.0 or current[0] > 0.0:
        if bins:
            bins[-1][0] += current[0]
            bins[-1][1] += current[1]
        else:
            bins.append(current)
    if len(bins) < 2:
        return None
    statistic = math.fsum((o - e) ** 2 / e for o, e in bins)
    dof = len(bins) - 1
    return {"statistic": hexf(statistic), "dof": dof,
            "p_value": hexf(_upper_gamma_q(dof / 2.0, statistic / 2.0)), "draws": total}


def _gof(logits: Sequence[float], oracle: Certified, draws: Mapping[int, int]) -> Any:
    """The draws inside the oracle's set against its renormalized nucleus probabilities."""
    kept = list(oracle.kept)
    top = max(logits[i] for i in kept)
    weights = [math.exp(logits[i] - top) for i in kept]
    norm = math.fsum(weights)
    return chi_square_gof([int(draws.get(i, 0)) for i in kept], [w / norm for w in weights])


# --- the rule set ---------------------------------------------------------------------------


def case_draws(evidence: Mapping[str, Any], case_id: str) -> dict[str, Any] | None:
    """side -> the per-row ``draws`` its kernel evidence records for ``case_id`` (sides that
    record none are left out; None when no side does). The runner and the verifier both
    read the draws here, from the evidence the receipt holds."""
    found: dict[str, Any] = {}
    for side, data in evidence.items():
        cases = data.get("cases") if isinstance(data, dict) else None
        for record in cases if isinstance(cases, list) else []:
            if isinstance(record, dict) and record.get("id") == case_id and "draws" in record:
                found[side] = record["draws"]
    return found or None


def parse_draws(value: Any, vocab: int) -> dict[int, int] | None:
    """One row's recorded draws (``[[token, count], ...]``) as a mapping, or None when the
    record is absent or malformed (then it cannot match the output: a mismatch)."""
    if value is None:
        return None
    out: dict[int, int] = {}
    try:
        for token, count in value:
            if (not isinstance(token, int) or not isinstance(count, int) or isinstance(
                    token, bool) or not 0 <= token < vocab or count <= 0 or token in out):
                return {}
            out[token] = count
    except (TypeError, ValueError):
        return {}
    return out


def tie_closure(logits: Sequence[float], order: Sequence[int], n: int) -> set[int]:
    """The first ``n`` tokens of ``order`` and every later one whose logit equals the n-th's:
    the allowed set closed under ties at its boundary (``regression-support/v2``)."""
    allowed = set(order[:n])
    if n:
        boundary = logits[order[n - 1]]
        for token in order[n:]:  # logit descending: the ties follow at once
            if logits[token] != boundary:
                break
            allowed.add(token)
    return allowed


def judge(data: Any, *, tie_closed: bool = False) -> dict[str, Any]:
    """One row (a :class:`harness.core.rulesets.RowInput`) by ``support/v1``; with
    ``tie_closed`` (``regression-support/v2`` only) the allowed set is closed under ties at
    its boundary (:func:`tie_closure`, its size the ``allowed_tie_closed`` diagnostic) and
    each side's binary64 mass outside it is a diagnostic too (``{side}_mass_outside_allowed``).
    Without it the row's result is ``support/v1``'s, unchanged."""
    row, oracle = data.row, data.oracle
    logits = _values(row.logits)
    result = row_head(data)
    certified = oracle if isinstance(oracle, Certified) else None
    stops: list[str] = [] if certified is not None else ["oracle_boundary_ambiguous"]
    diagnostics: dict[str, Any] = {}
    order = canonical_order(logits) if certified is not None else []
    allowed: set[int] = set()
    if certified is not None:
        n = allowed_count(certified, len(order), row.k, row.kind == FORCED)
        allowed = tie_closure(logits, order, n) if tie_closed else set(order[:n])
        diagnostics["allowed"] = n
        if tie_closed:
            diagnostics["allowed_tie_closed"] = len(allowed)
        mass = RowMass(logits)
    recorded = getattr(data, "draws", None) or {}
    for name, side in read_sides(data, certified).items():
        result[name] = side.summary
        mask = side.mask
        if mask is None:
            if name == "patched" or side.status in gate.SIDE_FAILURES:
                stops.append(side.status)
            continue
        problems = []
        if mask.has_nan:
            problems.append("nan_output")
        if changed_values(data.logits_bytes, data.side_bytes[name], fast=data.fast):
            problems.append("kept_value_changed")
        drawn = set(mask.kept)
        if not drawn:
            problems.append("no_draw")
        counts = parse_draws(recorded.get(name), len(logits)) if name in recorded else None
        if counts is not None and set(counts) != drawn:
            problems.append("draw_evidence_mismatch")
        if certified is not None:
            oracle_set = set(certified.kept)
            if drawn - allowed:
                problems.append("draw_outside_support")
            diagnostics[f"{name}_drawn"] = len(drawn)
            diagnostics[f"{name}_outside_oracle"] = len(drawn - oracle_set)
            diagnostics[f"{name}_outside_allowed"] = len(drawn - allowed)
            diagnostics[f"{name}_mass_outside"] = hexf(mass.of(drawn - oracle_set))
            if tie_closed:
                diagnostics[f"{name}_mass_outside_allowed"] = hexf(mass.of(drawn - allowed))
            if counts is not None:
                diagnostics[f"{name}_gof"] = _gof(logits, certified, counts)
        diagnostics[f"{name}_problems"] = sorted(problems)
        if name == "patched":
            stops.extend(problems)
    result["diagnostics"] = diagnostics
    result["stops"] = sorted(set(stops))
    return result
