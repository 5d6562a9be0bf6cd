"""Rule set ``regression-support/v1``: a pull request to a sampler family against its base,
on every row, whether the row's path masks or draws.

``regression/v2`` judges a kept set against the oracle's, so a sampler's output (the tokens
it drew: a sample of its support, with gaps) would stop on every row; ``support/v1`` judges
a sampler alone, so a base that already draws outside the allowed set would stop every
change. This rule set judges the change against the base, row by row, by the rules that fit
the row's path (issue 39; FlashInfer's samplers and its renorm and mask paths in one PR
matrix, ``pr-flashinfer-v1``).

Predeclared, written before any run with these rules. The base is the ``stock`` side, the
change the ``patched`` side; the oracle is :func:`harness.core.oracle.top_k_top_p`.

*Which rows are sampling rows.* A row is judged as a sampling row when the kernel evidence
of either side records draws for its case (``draws``, read by
:func:`harness.core.support_rules.case_draws`): the FlashInfer family records them on its
sampling paths (``top-p-sampling``, ``top-k-sampling``, ``top-k-top-p-sampling``) and on no
other. Every other row (``top-p-renorm``, ``top-k-renorm``, ``top-k-mask``; any masking
path) is judged exactly as ``regression/v2`` judges it (:func:`harness.core.regression_v2.
judge`, the same function: same result, row for row). A side cannot escape the support rules
by recording no draws: on a sampling row a readable side without a draws record has the
fault ``draw_evidence_mismatch``, and on a row where neither side records draws a sample's
gaps read as dropped oracle tokens under ``regression/v2``, which stops.

*Sampling rows.* Each side is judged alone by ``support/v1``'s checks (the same function,
:func:`harness.core.support_rules.judge`: allowed set, problems, diagnostics). A side's
faults are its ``support/v1`` problems (``nan_output``, ``kept_value_changed``,
``no_draw``, ``draw_evidence_mismatch``, ``draw_outside_support``) plus the missing draws
record above. The change stops the row when

- it has a fault the base does not have on that row (``new_fault``; the faults themselves
  are the row's ``new_faults`` diagnostic);
- it draws more distinct tokens outside the allowed set than the base
  (``outside_support_growth``);
- the binary64 probability mass of its distinct drawn tokens outside the oracle's set
  (``support/v1``'s ``{side}_mass_outside``: softmax of the whole captured row) is larger
  than the base's (``mass_outside_growth``);
- it rewrites a drawn value (``kept_value_changed``), whatever the base does.

Fail closed as ``regression/v2``: an unreadable output of either side, or an ambiguous
oracle boundary, stops the row. A row the base already fails (its faults, sampling or not)
is the base's defect: counted in the verdict's ``base_defects`` and listed with its faults
and whether the change altered it (its output bytes differ from the base's) in
``base_defect_rows``; the change's stops are listed by reason in ``broken_rows``
(:func:`harness.core.regression_v2.verdict_extra`).

*Draws and seeds.* Each sampling call draws ``draws_per_row`` tokens per row (``indices``
repeats the batch that many times) with a Philox ``seed`` and ``offset``,
``deterministic=True``. A version 3 manifest may declare the three (``sampling``; every
FlashInfer PR matrix from ``pr-flashinfer-v3`` on does, with 64, 20261201 and 0): the
parent passes them to the kernel child in the cases index, the child draws with them and
records them in each sampling case's evidence (``draws_per_row``, ``seed``, ``offset`` in
the path's proof, beside the per-row ``draws``), and ``verify`` refuses the bundle (a
binding mismatch, exit 4) when either side's record of a case that draws names other values
or a row's counts do not sum to ``draws_per_row`` for each output that reads the row
(:func:`harness.core.verify_bindings.check_sampling`): the code under test cannot choose its
seed. A manifest that declares none (``pr-flashinfer-v1``, ``-v2``) is drawn with the
FlashInfer family's constants ``DRAWS`` and ``SEED`` (64, 20261201, offset 0;
``harness/families/flashinfer.py``), recorded the same way and not checked; its bundles
verify as before. This rule set reads the per-row counts only, whichever applies. Both sides
draw with the same seed, so a change that leaves the kernel's arithmetic and its use of the
random stream as they were draws exactly the base's tokens.

*The probability of a false stop.* A change whose draws equal the base's (a comment, a
refactor: any change that leaves the sampled ids as they were) never stops: every
comparison above is between equal numbers (a property test holds it). A change that is
equivalent in distribution but consumes the random stream differently cannot stop by
membership on a row whose true distribution puts no mass outside the allowed set: it never
draws there, and it always draws something. On a row where the base's own distribution puts
mass ``m`` outside the allowed set (FlashInfer's boundary tie groups: a base defect, listed
as one), the count of distinct outside tokens is random on each side, and such a change stops
there with probability about one half for moderate ``m`` (its count exceeds the base's):
a stop on a base-defect sampling row says the change drew differently there, not that it is
worse; the answer names the row and the base's defect beside it.

*The probability of a miss.* A bug that moves probability mass ``eps`` of a row outside the
allowed set (where the base puts none) is missed on that row only when all its draws land
inside: with 64 draws per row probability ``(1 - eps) ** 64`` (0.53 at eps 0.01, 0.04 at
eps 0.05, 0.001 at eps 0.1), and ``(1 - eps) ** (64 r)`` over ``r`` rows it hits alike
(``draws_per_row`` for 64 where a manifest declares another count). A bug that only reweights
tokens inside the allowed set is not stopped by these rules (``support/v1``'s
goodness-of-fit statistic stays a diagnostic).

*Version 2* (``regression-support/v2``, written after the first GPU run of
``pr-flashinfer-v1`` and before any FlashInfer mutant ran; v1 stays as frozen, and every
bundle judged by it keeps verifying by it). See :data:`V2_NOTE`.

Standard library only (trusted core).
"""

from __future__ import annotations

from typing import Any

from . import regression_rules, regression_v2, support_rules
from .names import SIDES
from .oracle import Certified

REGRESSION_SUPPORT_V1 = "regression-support/v1"
REGRESSION_SUPPORT_V2 = "regression-support/v2"
OUTSIDE_SUPPORT_GROWTH = "outside_support_growth"
DRAW_EVIDENCE_MISMATCH = "draw_evidence_mismatch"
# What one side of a sampling row can do wrong by itself (support/v1's problems).
SAMPLING_FAULTS = ("nan_output", "kept_value_changed", "no_draw", DRAW_EVIDENCE_MISMATCH,
                   "draw_outside_support")
# Every fault a base-defect row may name, deterministic rows' first.
FAULTS = tuple(dict.fromkeys((*regression_rules.FAULTS, *SAMPLING_FAULTS)))
# The change's stops on a judged sampling row, in the order the module docstring lists them.
SAMPLING_STOPS = (regression_v2.NEW_FAULT, OUTSIDE_SUPPORT_GROWTH,
                  regression_v2.MASS_OUTSIDE_GROWTH, regression_v2.KEPT_VALUE_CHANGED)
STOP_REASONS = tuple(dict.fromkeys((*regression_v2.STOP_REASONS, *support_rules.STOP_REASONS,
                                    OUTSIDE_SUPPORT_GROWTH)))


V2_NOTE = """\
regression-support/v2 is regression-support/v1 with one change: on a sampling row the
allowed set is closed under ties at its boundary, the first n tokens in canonical order (as
v1) and every further token whose logit equals the n-th token's. A draw, the count of
distinct drawn tokens outside the allowed set and the binary64 mass of the drawn tokens
outside it are all read against that closed set (v1 read the mass outside the oracle's set,
so a change that drew more of the count envelope's tokens than the base stopped by mass,
another stop a correct sampler could draw by chance); masking rows are judged as
regression/v2, as in v1. Why: on the first H100 run of pr-flashinfer-v1 (2026-12-05) all 17
sampling rows where FlashInfer 0.7.2.post1 drew outside v1's allowed set drew only tokens
whose logit equals the boundary token's, that is, another member of the boundary's tie group
than the lowest ids the canonical order takes. Tied tokens are interchangeable: no order
among them is more correct. Under v1 a change that samples the same distribution with other
random numbers would stop on each such row with probability about one half, so a correct
kernel change would almost surely STOP; under v2 it cannot stop there by membership. What v2
gives up: a change that draws more members of a boundary tie group than the base (keeping
more of the group than k or the nucleus needs) is not stopped by it."""


def sampling_row(data: Any) -> bool:
    """Whether either side's kernel evidence records draws for this row's case."""
    return bool(getattr(data, "draws", None))


def _faults(diagnostics: dict[str, Any], side: str, recorded: bool) -> list[str]:
    """One side's faults on a sampling row, in :data:`SAMPLING_FAULTS` order."""
    found = set(diagnostics.get(f"{side}_problems", ()))
    if not recorded:
        found.add(DRAW_EVIDENCE_MISMATCH)
    return [f for f in SAMPLING_FAULTS if f in found]


def _mass(diagnostics: dict[str, Any], key: str) -> float:
    return float.fromhex(diagnostics[key])


def change_stops(faults: dict[str, list[str]], diagnostics: dict[str, Any],
                 mass: str = "mass_outside") -> list[str]:
    """The change's stops on a sampling row both sides could be judged on (the module
    docstring's list), in :data:`SAMPLING_STOPS` order; ``mass`` names the diagnostic the
    mass rule compares (v2: ``mass_outside_allowed``)."""
    stops = set()
    if diagnostics["new_faults"]:
        stops.add(regression_v2.NEW_FAULT)
    if diagnostics["patched_outside_allowed"] > diagnostics["stock_outside_allowed"]:
        stops.add(OUTSIDE_SUPPORT_GROWTH)
    if _mass(diagnostics, f"patched_{mass}") > _mass(diagnostics, f"stock_{mass}"):
        stops.add(regression_v2.MASS_OUTSIDE_GROWTH)
    if "kept_value_changed" in faults["patched"]:
        stops.add(regression_v2.KEPT_VALUE_CHANGED)
    return [s for s in SAMPLING_STOPS if s in stops]


def judge(data: Any) -> dict[str, Any]:
    """One row (a :class:`harness.core.rulesets.RowInput`) by ``regression-support/v1``."""
    if not sampling_row(data):
        return regression_v2.judge(data)
    return _judge_sampling(data, support_rules.judge(data), "mass_outside")


def judge_v2(data: Any) -> dict[str, Any]:
    """One row by ``regression-support/v2``: v1 with the allowed set closed under ties at
    its boundary, for the faults, the count outside and the mass outside alike
    (:data:`V2_NOTE`)."""
    if not sampling_row(data):
        return regression_v2.judge(data)
    return _judge_sampling(data, support_rules.judge(data, tie_closed=True),
                           "mass_outside_allowed")


def _judge_sampling(data: Any, result: dict[str, Any], mass: str) -> dict[str, Any]:
    """A sampling row: ``result`` is ``support/v1``'s judgement of both sides (its
    diagnostics), turned into the change's stops against the base."""
    diagnostics = result["diagnostics"]
    certified = isinstance(data.oracle, Certified)
    stops = [] if certified else ["oracle_boundary_ambiguous"]
    readable = [name for name in SIDES if result[name]["status"] == "ok"]
    stops += [result[name]["status"] for name in SIDES if name not in readable]
    recorded = data.draws or {}
    faults = {name: _faults(diagnostics, name, name in recorded) for name in readable}
    if certified and len(readable) == len(SIDES):
        diagnostics["stock_faults"] = faults["stock"]
        diagnostics["patched_faults"] = faults["patched"]
        diagnostics["new_faults"] = [f for f in faults["patched"] if f not in faults["stock"]]
        diagnostics["base_defect"] = bool(faults["stock"])
        diagnostics["altered"] = data.side_bytes["stock"] != data.side_bytes["patched"]
        stops += change_stops(faults, diagnostics, mass)
    elif "kept_value_changed" in faults.get("patched", ()):
        stops.append(regression_v2.KEPT_VALUE_CHANGED)
    result["stops"] = sorted(set(stops))
    return result


def verdict_extra(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """``regression/v2``'s verdict fields (base-defect rows, how many the change altered,
    the broken rows by reason), with ``base_defects`` counting every fault of
    :data:`FAULTS` (the sampling faults too)."""
    extra = regression_v2.verdict_extra(rows)
    extra["base_defects"] = regression_rules.base_defects(rows, FAULTS)
    return extra
