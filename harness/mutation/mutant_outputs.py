"""Which rows a mutant's kernel answered differently from the base's (issue 20).

A survivor of mutation testing is one of two things, and a reader needs to know which:

* **same outputs**: on every captured row the mutant's patched output is byte-identical to
  the base's, so the matrix never made the mutation observable. Either the mutation is
  equivalent on this backend, or the matrix lacks the rows that would expose it;
* **changed outputs**: some rows came out differently and the rule set judged none of them
  worse than the base (a mutation that only moves outputs the rules accept, or toward the
  reference).

Both bundles must already be opened from verified evidence (:func:`open_bundle` after
:func:`verify_bundle`); their captured inputs are compared by the digests the signed
statements bind, and a pair whose inputs differ is not compared (None).
"""

from __future__ import annotations

import json
from typing import Any

from ..core.errors import MalformedEvidenceError


def _cases(view: Any) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads(view.raw("cases.json"))["cases"]
    return cases


def changed_rows(base: Any, other: Any) -> list[str] | None:
    """The rows (``case[row]``) whose patched output in ``other`` differs from ``base``'s,
    or None when the two bundles did not run the same captured inputs or an output is
    missing (a crashed side: nothing to compare)."""
    base_cases, other_cases = _cases(base), _cases(other)
    if [c["id"] for c in base_cases] != [c["id"] for c in other_cases]:
        return None
    changed: list[str] = []
    for case, theirs in zip(base_cases, other_cases, strict=True):
        if any(base.digest(case[k]) != other.digest(theirs[k]) for k in ("logits", "p")):
            return None
        name = f"outputs/patched/{case['id']}.out.f32"
        try:
            same = base.digest(name) == other.digest(name)
        except MalformedEvidenceError:  # the statement has no such output: a crashed side
            return None
        if same:
            continue
        width = 4 * int(case["vocab"])
        mine, yours = base.raw(name), other.raw(name)
        changed += [f"{case['id']}[{i}]" for i in range(len(case["rows"]))
                    if mine[i * width:(i + 1) * width] != yours[i * width:(i + 1) * width]]
    return changed
