"""The registry of rule sets: every judgement is made, and re-made, by the rules it names.

A receipt names its rule set by id (``predicate.judgement.rules``); ``verify`` re-judges a
bundle by exactly those rules, and refuses an id it does not know. A rule set never changes
once its id exists: new behaviour is a new id, and every committed bundle keeps verifying by
the rules it was judged with. Receipts written before ids existed were judged by
:data:`LEGACY_RULES` (the seed's rules, which this registry holds unchanged).

Rule sets:

``seed/v1``
    The seed's predeclared gate exactly (:mod:`harness.core.gate`): forced rows, the four
    ordinary-row rules, the diagnostics. Frozen.
``seed/v2``
    ``seed/v1`` on every row, plus kept-value integrity: a masking kernel returns every kept
    logit bit for bit unchanged, so a patched output that keeps a position with other bits
    than the input's stops the row (``kept_value_changed``); each side's count of changed
    positions is a diagnostic (``stock_values_changed``, ``patched_values_changed``). A
    forced row whose every token is masked has no argmax (``seed/v1``'s diagnostic counted
    token 0 as its argmax; fixed here, frozen there).
``serve/v1``
    every path a server takes (:mod:`harness.core.serve_rules`): the top-k then top-p
    oracle, the seed's rules on rows with top-p, the exact k-prefix on top-k-only rows,
    forced rows held to the count envelope on every path, kept-value integrity, and the
    probability mass of every difference as a diagnostic.
``regression/v1``
    a pull request against its base (:mod:`harness.core.regression_rules`): each side judged
    alone against the oracle; a row stops the change when the base has no fault there and
    the change has one, or when the change's symmetric difference from the oracle is larger
    than the base's; rows the base already fails are the base's defects, counted in the
    verdict's ``base_defects`` (never a pass of the base, never hidden).
``regression/v2``
    a pull request against its base on every row, base defect or not
    (:mod:`harness.core.regression_v2`): the change stops on a fault the base does not have,
    an oracle token the base kept and it drops, growth of its missing-oracle count, symmetric
    difference or binary64 mass outside/dropped, or a rewritten kept value; the verdict lists
    the base-defect rows, how many the change altered, and the broken rows by reason.
``support/v1``
    sampling kernels (:mod:`harness.core.support_rules`): every token a side drew (the
    finite positions of its output row) lies in the oracle's set plus the count envelope,
    with the input's bits; a goodness-of-fit statistic of the recorded draw counts as a
    diagnostic.
``regression-support/v1``
    a pull request to a sampler family against its base (:mod:`harness.core.
    regression_support`): rows whose evidence records draws are judged on each side by
    ``support/v1``'s checks, and the change stops on a fault the base does not have, more
    drawn tokens outside the allowed set or more binary64 mass outside the oracle's set
    than the base, or a rewritten value; every other row exactly as ``regression/v2``.
``regression-support/v2``
    ``regression-support/v1`` with the sampling rows' allowed set closed under ties at its
    boundary (``regression_support.V2_NOTE``): a draw of another member of the boundary's
    tie group is in the support, and counts and masses outside are read against that set.

Standard library only (trusted core).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from . import gate, regression_rules, regression_support, regression_v2, serve_rules, support_rules
from .errors import InternalError, UnknownJudgementError
from .oracle import OracleOutcome

SEED_V1 = "seed/v1"
SEED_V2 = "seed/v2"
LEGACY_RULES = SEED_V1  # receipts and manifests written before rule-set ids existed
DEFAULT_RULES = SEED_V2  # what ``manifest new`` freezes unless told otherwise


@dataclass(frozen=True)
class RowInput:
    """Everything a rule set may read of one row: the captured row and oracle outcome, each
    side's decoded output, the raw bytes (for bit-level checks) and the proven paths."""

    row: gate.Row
    oracle: OracleOutcome
    stock: gate.SideOutput
    patched: gate.SideOutput
    split_path: bool
    split_sides: tuple[bool, bool] | None
    logits_bytes: bytes
    side_bytes: Mapping[str, bytes | None]  # raw output row per side, None when unreadable
    fast: bool
    # per side, the row's recorded draws ``[[token, count], ...]`` (sampling kernels'
    # evidence; support/v1 reads them), absent for a side that records none
    draws: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class RuleSet:
    id: str
    summary: str
    stop_reasons: tuple[str, ...]
    judge: Callable[[RowInput], dict[str, Any]]
    needs_raw: bool  # whether ``judge`` reads ``logits_bytes``/``side_bytes``
    top_k: bool = False  # the oracle is top_k_top_p (per-row k, p >= 1: no top-p)
    # Extra verdict fields computed from the row results (None: the gate's verdict alone).
    verdict_extra: Callable[[list[dict[str, Any]]], dict[str, Any]] | None = None

    def verdict(self, rows: Any, run_stops: Any = ()) -> dict[str, Any]:
        rows = list(rows)
        result = gate.verdict(rows, run_stops, known=self.stop_reasons)
        if self.verdict_extra is not None:
            result.update(self.verdict_extra(rows))
        return result


def _seed_v1(data: RowInput) -> dict[str, Any]:
    return gate.judge_row(data.row, data.oracle, data.stock, data.patched,
                          split_path=data.split_path, split_sides=data.split_sides)


def _seed_v2(data: RowInput) -> dict[str, Any]:
    from .integrity import changed_values

    result = _seed_v1(data)
    diagnostics = result["diagnostics"]
    stops = set(result["stops"])
    for side in ("stock", "patched"):  # an all-masked row has no argmax (seed/v1 said id 0)
        failures = diagnostics.get(f"{side}_forced_failures")
        if failures is not None and "all_masked" in failures \
                and "argmax_not_forced" not in failures:
            failures.insert(failures.index("all_masked") + 1, "argmax_not_forced")
    for side in ("stock", "patched"):
        raw = data.side_bytes.get(side)
        if raw is None:
            continue
        changed = changed_values(data.logits_bytes, raw, fast=data.fast)
        diagnostics[f"{side}_values_changed"] = changed
        if side == "patched" and changed:
            stops.add("kept_value_changed")
    result["stops"] = sorted(stops)
    return result


RULE_SETS: dict[str, RuleSet] = {
    SEED_V1: RuleSet(SEED_V1, "the seed's predeclared gate, unchanged",
                     gate.SEED_STOP_REASONS, _seed_v1, needs_raw=False),
    SEED_V2: RuleSet(SEED_V2, "the seed's gate plus kept-value integrity (bit for bit)",
                     (*gate.SEED_STOP_REASONS, "kept_value_changed"), _seed_v2,
                     needs_raw=True),
    serve_rules.SERVE_V1: RuleSet(serve_rules.SERVE_V1,
                                  "every server path: top-k, top-k then top-p, forced rows held "
                                  "to the count envelope, kept-value integrity, mass diagnostics",
                                  serve_rules.STOP_REASONS, serve_rules.judge, needs_raw=True,
                                  top_k=True),
    regression_rules.REGRESSION_V1: RuleSet(
        regression_rules.REGRESSION_V1,
        "a pull request against its base: the change's new faults and symmetric-difference "
        "growth stop; the base's own failures are reported as base defects",
        regression_rules.STOP_REASONS, regression_rules.judge, needs_raw=True, top_k=True,
        verdict_extra=regression_rules.verdict_extra),
    support_rules.SUPPORT_V1: RuleSet(support_rules.SUPPORT_V1,
                                      "sampling kernels by the support of their draws: every "
                                      "drawn token in the oracle's set plus the count envelope",
                                      support_rules.STOP_REASONS, support_rules.judge,
                                      needs_raw=True, top_k=True),
    regression_v2.REGRESSION_V2: RuleSet(
        regression_v2.REGRESSION_V2,
        "a pull request against its base on every row: the change's new faults, lost oracle "
        "tokens, missing-oracle, symmetric-difference and binary64 mass growth, rewritten "
        "kept values stop; base-defect rows are listed with whether the change altered them",
        regression_v2.STOP_REASONS, regression_v2.judge, needs_raw=True, top_k=True,
        verdict_extra=regression_v2.verdict_extra),
    regression_support.REGRESSION_SUPPORT_V1: RuleSet(
        regression_support.REGRESSION_SUPPORT_V1,
        "a pull request to a sampler family against its base: sampling rows by support/v1's "
        "checks on each side (new faults, growth of draws outside the allowed set or of "
        "binary64 mass outside the oracle's set stop), every other row as regression/v2",
        regression_support.STOP_REASONS, regression_support.judge, needs_raw=True,
        top_k=True, verdict_extra=regression_support.verdict_extra),
    regression_support.REGRESSION_SUPPORT_V2: RuleSet(
        regression_support.REGRESSION_SUPPORT_V2,
        "regression-support/v1 with the sampling rows' allowed set closed under ties at its "
        "boundary (a draw of any member of the boundary's tie group is in the support)",
        regression_support.STOP_REASONS, regression_support.judge_v2, needs_raw=True,
        top_k=True, verdict_extra=regression_support.verdict_extra),
}

# Every stop reason any rule set can give (the receipt schema enumerates this set).
ALL_STOP_REASONS = tuple(dict.fromkeys(r for rs in RULE_SETS.values() for r in rs.stop_reasons))


def known_rules() -> tuple[str, ...]:
    return tuple(RULE_SETS)


def rule_set(rules_id: str) -> RuleSet:
    """The rule set ``rules_id`` names; an unknown id is refused (never judged by others)."""
    found = RULE_SETS.get(rules_id)
    if found is None:
        raise UnknownJudgementError("rule set", rules_id, known_rules())
    return found


def check_registry() -> None:
    """Invariants a test pins: ids are their keys, every reason is known to the gate's
    verdict, and the seed's rule set is the legacy one."""
    for key, rs in RULE_SETS.items():
        if rs.id != key or not rs.stop_reasons:
            raise InternalError(f"rule set {key!r} is registered inconsistently")
    if RULE_SETS[LEGACY_RULES].judge is not _seed_v1:
        raise InternalError("the legacy rule set must be the seed's gate")
