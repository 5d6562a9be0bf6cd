"""The human report of one gate run: ``report.md`` (Markdown) and ``report.png`` (a plot).

Both are pure functions of :class:`ReportInputs` (the manifest name and backend, the
judge's per-row results, the verdict, each side's kernel-path evidence and the captured
cases index), so the same inputs always give the same bytes and the bundle can bind them by
hash: no timestamps, no host names, no absolute paths, PNG metadata fixed.

The Markdown part needs only the standard library. :func:`render_png` imports matplotlib
(kernel-side extra) when called.

Figures are computed once, by :func:`summarize`, and reused by ``scripts/results_section.py``
for the README's results section.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from .names import FORCED, ORDINARY, SIDES
from .regression_rules import REGRESSION_V1
from .regression_support import REGRESSION_SUPPORT_V1, REGRESSION_SUPPORT_V2
from .regression_v2 import REGRESSION_V2
from .terminal import printable

AMBIGUOUS = "oracle_boundary_ambiguous"
INTERPRETER = "interpreter"
_MINIMAL = {True: "yes", False: "no", None: "undefined"}
_VALUE = re.compile(r"(?:^|\s)value=(\S+)")


@dataclass(frozen=True)
class ReportInputs:
    """Everything the report reads. ``cases`` is the parsed ``cases.json`` (dict or its
    ``cases`` list); it supplies row labels (forced magnitudes) and vocabularies. Missing
    evidence keys are shown as ``-``, never guessed."""

    manifest_name: str
    backend: str
    rows: Sequence[Mapping[str, Any]]
    verdict: Mapping[str, Any]
    evidence: Mapping[str, Mapping[str, Any] | None] = field(default_factory=dict)
    cases: Mapping[str, Any] | Sequence[Mapping[str, Any]] = ()
    # The rule set that judged the rows (shown from report/v2 on; report/v1 predates ids).
    rules: str | None = None


# --- figures --------------------------------------------------------------------------------


def _case_entries(cases: Mapping[str, Any] | Sequence[Mapping[str, Any]]
                  ) -> list[Mapping[str, Any]]:
    if isinstance(cases, Mapping):
        return list(cases.get("cases", []))
    return list(cases)


def case_info(cases: Mapping[str, Any] | Sequence[Mapping[str, Any]]
              ) -> tuple[dict[tuple[str, int], str], dict[str, int]]:
    """(row labels by (case id, row), vocabulary by case id) from a cases index."""
    labels: dict[tuple[str, int], str] = {}
    vocab: dict[str, int] = {}
    for case in _case_entries(cases):
        cid = str(case.get("id"))
        if isinstance(case.get("vocab"), int):
            vocab[cid] = case["vocab"]
        for i, row in enumerate(case.get("rows", [])):
            if isinstance(row, Mapping) and "label" in row:
                labels[(cid, i)] = str(row["label"])
    return labels, vocab


def forced_value(label: str | None) -> str | None:
    """The forced value as written in the manifest (``value=1e30 ...`` -> ``1e30``)."""
    if not label:
        return None
    match = _VALUE.search(label)
    return match.group(1) if match else None


def _value_key(text: str) -> tuple[int, float, str]:
    try:
        return (0, float(text), text)
    except ValueError:
        return (1, 0.0, text)


def oracle_count(result: Mapping[str, Any]) -> int | None:
    oracle = result.get("oracle", {})
    if oracle.get("status") == "certified" and isinstance(oracle.get("count"), int):
        return int(oracle["count"])
    return None


def side_kept(result: Mapping[str, Any], side: str) -> int | None:
    info = result.get(side, {})
    if info.get("status") == "ok" and isinstance(info.get("kept"), int):
        return int(info["kept"])
    return None


def _forced_failures(result: Mapping[str, Any], side: str) -> list[str]:
    """Failure names of a forced row's side; a side without output fails by its status."""
    info = result.get(side, {})
    if info.get("status") != "ok":
        return [str(info.get("status", "missing"))]
    return list(result.get("diagnostics", {}).get(f"{side}_forced_failures", []))


def forced_failures_v3(result: Mapping[str, Any], side: str) -> list[str]:
    """report/v3: a forced row's failures of one side, whatever the rule set records: the
    named forced rules (``{side}_forced_failures``), else ``forced_failure`` when that side's
    faults hold it (``regression/v1`` names no rule), and never none for the patched side
    of a row that stops for ``forced_failure`` (report/v2 read only the named rules, and so
    showed such a side as holding the forced token)."""
    info = result.get(side, {})
    if info.get("status") != "ok":
        return [str(info.get("status", "missing"))]
    diagnostics = result.get("diagnostics", {})
    named = diagnostics.get(f"{side}_forced_failures")
    if isinstance(named, list):
        failures = [str(f) for f in named]
    else:
        failures = ["forced_failure"] if "forced_failure" in diagnostics.get(
            f"{side}_faults", []) else []
    if side == SIDES[1] and not failures and "forced_failure" in result.get("stops", []):
        failures = ["forced_failure"]
    return failures


ForcedFailures = Callable[[Mapping[str, Any], str], list[str]]


def _row_id(result: Mapping[str, Any]) -> str:
    return f"{result.get('case')}[{result.get('row')}]"


def summarize(inputs: ReportInputs, failures: ForcedFailures = _forced_failures
              ) -> dict[str, Any]:
    """Every figure the report shows, as plain data (deterministic; ints and strings).
    ``failures`` reads a forced row's failures per side (report/v3: :func:`forced_failures_v3`)."""
    labels, vocabs = case_info(inputs.cases)
    rows = list(inputs.rows)
    forced = [r for r in rows if r.get("kind") == FORCED]
    ordinary = [r for r in rows if r.get("kind") == ORDINARY]
    forced_table = forced_groups(forced, labels, vocabs, failures)
    stop_rows: Counter[str] = Counter()
    for r in rows:
        stop_rows.update(r.get("stops", []))
    side_status = {side: dict(sorted(Counter(str(r.get(side, {}).get("status", "missing"))
                                             for r in rows).items())) for side in SIDES}
    return {
        "manifest": inputs.manifest_name,
        "backend": backend_label(inputs.backend, inputs.evidence),
        "interpreter": is_interpreter(inputs.backend, inputs.evidence),
        "verdict": str(inputs.verdict.get("verdict", "?")),
        "reasons": list(inputs.verdict.get("reasons", [])),
        "rows": len(rows), "forced_rows": len(forced), "ordinary_rows": len(ordinary),
        "rows_stopped": sum(bool(r.get("stops")) for r in rows),
        "stop_rows": dict(sorted(stop_rows.items())),
        "forced": forced_table,
        "stock_lost_forced": sum(g["stock_lost_forced"] for g in forced_table),
        "stock_failed": sum(g["stock_failed"] for g in forced_table),
        "patched_held": sum(g["patched_held"] for g in forced_table),
        "envelope": {side: count_envelope(ordinary, side) for side in SIDES},
        "symdiff": symdiff_comparison(ordinary),
        "diagnostics": {kind: {side: side_diagnostics(subset, side) for side in SIDES}
                        for kind, subset in ((ORDINARY, ordinary), (FORCED, forced))},
        "oracle": {kind: oracle_statuses(subset)
                   for kind, subset in ((FORCED, forced), (ORDINARY, ordinary))},
        "side_status": side_status,
    }


def forced_groups(forced: Sequence[Mapping[str, Any]], labels: Mapping[tuple[str, int], str],
                  vocabs: Mapping[str, int], failures: ForcedFailures = _forced_failures
                  ) -> list[dict[str, Any]]:
    """The forced-rows table: one group per (forced value, vocabulary), in value order."""
    groups: dict[tuple[str, int | None], dict[str, Any]] = {}
    for r in forced:
        value = forced_value(labels.get((str(r.get("case")), int(r.get("row", -1)))))
        key = (value or "?", vocabs.get(str(r.get("case"))))
        g = groups.setdefault(key, {"value": key[0], "vocab": key[1], "rows": 0,
                                    "stock_lost_forced": 0, "stock_failed": 0,
                                    "patched_held": 0, "stock_failures": Counter(),
                                    "patched_failures": Counter()})
        g["rows"] += 1
        stock_f, patched_f = failures(r, "stock"), failures(r, "patched")
        g["stock_failures"].update(stock_f)
        g["patched_failures"].update(patched_f)
        g["stock_failed"] += bool(stock_f)
        g["stock_lost_forced"] += ("forced_token_dropped" in stock_f
                                   or r.get("stock", {}).get("status") != "ok")
        g["patched_held"] += not patched_f
    forced_table = []
    for key in sorted(groups, key=lambda k: (_value_key(k[0]), k[1] or 0)):
        g = groups[key]
        forced_table.append({**g, "stock_failures": dict(sorted(g["stock_failures"].items())),
                             "patched_failures": dict(sorted(g["patched_failures"].items()))})
    return forced_table


def count_envelope(ordinary: Sequence[Mapping[str, Any]], side: str) -> dict[str, Any]:
    """The ordinary-rows envelope of one side: kept count against the oracle's, row by row
    (over, under, equal; the largest absolute and relative differences and their rows)."""
    best_abs: tuple[int, str] | None = None
    best_rel: tuple[Fraction, str, int, int] | None = None
    over = under = equal = 0
    for r in ordinary:
        kept, count = side_kept(r, side), oracle_count(r)
        if kept is None or count is None:
            continue
        diff = kept - count
        over += diff > 0
        under += diff < 0
        equal += diff == 0
        if best_abs is None or abs(diff) > abs(best_abs[0]):
            best_abs = (diff, _row_id(r))
        rel = Fraction(abs(diff), count) if count else Fraction(0)
        if best_rel is None or rel > best_rel[0]:
            best_rel = (rel, _row_id(r), diff, count)
    return {
        "rows": over + under + equal, "over_keep": over, "under_keep": under,
        "equal_count": equal,
        "max_abs_diff": None if best_abs is None else best_abs[0],
        "max_abs_row": None if best_abs is None else best_abs[1],
        "max_rel_diff": None if best_rel is None else f"{float(best_rel[0]):.6g}",
        "max_rel_row": None if best_rel is None else best_rel[1],
        "max_rel_fraction": None if best_rel is None else f"{best_rel[2]}/{best_rel[3]}",
    }


def symdiff_comparison(ordinary: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Ordinary rows where patched's symmetric difference to the oracle set is smaller
    than, equal to, or larger than stock's."""
    better = equal_sd = worse = 0
    for r in ordinary:
        s, p = r.get("stock", {}).get("symdiff"), r.get("patched", {}).get("symdiff")
        if isinstance(s, int) and isinstance(p, int):
            better += p < s
            equal_sd += p == s
            worse += p > s
    return {"better": better, "equal": equal_sd, "worse": worse}


def side_diagnostics(subset: Sequence[Mapping[str, Any]], side: str) -> dict[str, int]:
    """The diagnostics table of one side over rows of one kind: exact sets, minimality."""
    exact: Counter[bool] = Counter()
    minimal: Counter[str] = Counter()
    for r in subset:
        d = r.get("diagnostics", {})
        if f"{side}_exact" in d:
            exact[bool(d[f"{side}_exact"])] += 1
        if f"{side}_minimal" in d:
            minimal[_MINIMAL[d[f"{side}_minimal"]]] += 1
    return {"exact": exact[True], "judged": exact[True] + exact[False],
            "minimal_yes": minimal["yes"], "minimal_no": minimal["no"],
            "minimal_undefined": minimal["undefined"]}


def oracle_statuses(subset: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """How many rows of one kind the oracle certified, and how many were ambiguous."""
    return {"certified": sum(oracle_count(r) is not None for r in subset),
            "ambiguous": sum(r.get("oracle", {}).get("status") == AMBIGUOUS for r in subset)}


def is_interpreter(backend: str, evidence: Mapping[str, Mapping[str, Any] | None]) -> bool:
    return backend == INTERPRETER or any(
        isinstance(ev, Mapping) and ev.get("interpreter") is True for ev in evidence.values())


def device_name(ev: Mapping[str, Any] | None) -> str:
    """The device an evidence dict names (``device`` may be a string or ``{"name": ...}``)."""
    if not isinstance(ev, Mapping):
        return ""
    device = ev.get("device")
    if isinstance(device, Mapping):
        device = device.get("name")
    return str(device) if device else ""


def backend_label(backend: str, evidence: Mapping[str, Mapping[str, Any] | None],
                  text: Callable[[str], str] = str) -> str:
    """Say plainly what ran the kernels (``text`` escapes the evidence's device names)."""
    devices = sorted({text(device_name(ev)) for ev in evidence.values() if device_name(ev)})
    where = f" ({', '.join(devices)})" if devices else ""
    if is_interpreter(backend, evidence):
        note = ""
        if backend != INTERPRETER:
            note = f"; the run asked for backend {backend!r} but the evidence says interpreter"
        return ("Triton's interpreter on the CPU (TRITON_INTERPRET=1): the real kernel code, "
                f"emulated, not GPU evidence{where}{note}")
    return f"{backend}{where}"


# --- report formats ---------------------------------------------------------------------------
#
# A receipt names its report format (``predicate.judgement.report``); ``verify`` regenerates
# report.md in exactly that format and requires the signed bytes. A format never changes
# once its id exists: new wording is a new id.
#
# ``report/v1``: the format of every receipt written before ids existed. It wrote evidence
#   strings as they were, so it is accepted only while every evidence-supplied string it
#   shows is plainly safe Markdown (:func:`legacy_text`): a bundle naming report/v1 whose
#   device string holds Markdown or HTML is refused, not rendered.
# ``report/v2``: every evidence-supplied string (device, versions, evidence keys and values,
#   the manifest's name and labels) is escaped for Markdown and HTML (:func:`markdown_text`);
#   it also names the rule set that judged the rows.
# ``report/v3`` (issue 29): report/v2's escaping, and
#   - a forced row's failures per side are read whatever the rule set records
#     (:func:`forced_failures_v3`): a regression/v1 side failing a forced rule, or a patched
#     side whose row stops for ``forced_failure``, is never shown as holding the forced token;
#     under regression/v1, which names no forced rule, the table counts the rows on which
#     each side failed one (whether it lost the forced token is not recorded);
#   - a pull request judged by ``regression/v1`` is told in the base/change words of
#     ``regression/v2`` (its own scope, not the fix question's), with the rows the change
#     stopped on listed by reason.

REPORT_V1 = "report/v1"
REPORT_V2 = "report/v2"
REPORT_V3 = "report/v3"
LEGACY_REPORT = REPORT_V1  # receipts written before report-format ids existed
DEFAULT_REPORT = REPORT_V3
REPORT_FORMATS = (REPORT_V1, REPORT_V2, REPORT_V3)

_LEGACY_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                         " ()+,-./_:=@%'")
_MARKDOWN_ACTIVE = {"&": "&amp;", "<": "&lt;", ">": "&gt;",
                    **{c: "\\" + c for c in "\\`*_[]|!~#"}}


class UnsafeLegacyText(ValueError):
    """An evidence string report/v1 cannot show safely (the verifier refuses the bundle)."""


def legacy_text(text: str) -> str:
    """report/v1: the string unchanged, when it holds only characters that cannot form
    Markdown or HTML (letters, digits, space and ``()+,-./_:=@%'``); else refused."""
    if not set(text) <= _LEGACY_SAFE:
        raise UnsafeLegacyText(f"report/v1 cannot show the evidence string {text!r} safely")
    return text


def markdown_text(text: str) -> str:
    """report/v2: non-printable characters as their escapes (:func:`printable`), HTML's
    ``& < >`` as entities, and every other character that can start Markdown inline syntax
    backslash-escaped, so the string renders as exactly its characters. An underscore
    between two letters or digits (``split_slices``) is left as it is: CommonMark never
    reads an intraword ``_`` as emphasis."""
    shown = printable(text)
    return "".join(c if c == "_" and _intraword(shown, i) else _MARKDOWN_ACTIVE.get(c, c)
                   for i, c in enumerate(shown))


def _intraword(text: str, i: int) -> bool:
    return 0 < i < len(text) - 1 and text[i - 1].isalnum() and text[i + 1].isalnum()


def _text_for(report_format: str) -> Callable[[str], str]:
    if report_format == REPORT_V1:
        return legacy_text
    if report_format in (REPORT_V2, REPORT_V3):
        return markdown_text
    raise ValueError(f"unknown report format {report_format!r}")


# --- Markdown -------------------------------------------------------------------------------


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value).replace("|", "\\|").replace("\n", " ")


def _forced_table(groups: Any, text: Any, sides: tuple[str, str], *, v3: bool = False
                  ) -> list[str]:
    """The forced rows' table, its columns named by the two sides' words (``stock`` and
    ``patched`` for the fix question, ``base`` and ``change`` for a pull request)."""
    first, second = sides
    # v3 counts a side that failed any forced rule; v1/v2 counted only a lost forced token
    label, key = ("failed a forced rule", "stock_failed") if v3 else \
        ("lost forced token", "stock_lost_forced")
    return _table(["forced value", "vocab", "rows", f"{first} {label}",
                   f"{first} failures", f"{second} held", f"{second} failures"],
                  ([_shown(g["value"], text), g["vocab"], g["rows"],
                    f"{g[key]}/{g['rows']}", _counts(g["stock_failures"]),
                    f"{g['patched_held']}/{g['rows']}", _counts(g["patched_failures"])]
                   for g in groups))


def _table(header: Sequence[str], body: Iterable[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in body]
    return lines


def _counts(counter: Mapping[str, int]) -> str:
    return ", ".join(f"{name} x{n}" for name, n in counter.items()) or "none"


_EVIDENCE_KEYS = ("backend", "interpreter", "device", "driver", "python", "torch", "triton",
                  "vllm", "vllm_version", "kernel_sha256", "entry_point", "num_sm")


def _scalar_items(value: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    for key in sorted(value):
        item = value[key]
        if isinstance(item, Mapping):
            yield from _scalar_items(item, f"{prefix}{key}.")
        elif item is None or isinstance(item, (str, int, float, bool)):
            yield f"{prefix}{key}", item


def _evidence_cases(ev: Mapping[str, Any] | None) -> dict[str, Mapping[str, Any]]:
    if not isinstance(ev, Mapping):
        return {}
    cases = ev.get("cases")
    if isinstance(cases, Mapping):
        return {str(k): v for k, v in cases.items() if isinstance(v, Mapping)}
    if isinstance(cases, list):
        return {str(c.get("id", i)): c for i, c in enumerate(cases) if isinstance(c, Mapping)}
    return {}


def _shown(value: Any, text: Callable[[str], str]) -> Any:
    return text(value) if isinstance(value, str) else value


def _evidence_lines(evidence: Mapping[str, Mapping[str, Any] | None],
                    text: Callable[[str], str]) -> list[str]:
    """The kernel-path evidence tables; every key and string value is the evidence's own
    text, so it goes through ``text``."""
    lines = ["## Kernel-path evidence", ""]
    if not any(isinstance(evidence.get(s), Mapping) for s in SIDES):
        return lines + ["No kernel-path evidence was recorded for either side.", ""]
    top: dict[str, dict[str, Any]] = {}
    for side in SIDES:
        ev = evidence.get(side)
        if isinstance(ev, Mapping):
            for key, value in _scalar_items({k: v for k, v in ev.items() if k != "cases"}):
                top.setdefault(key, {})[side] = value
    keys = [k for k in _EVIDENCE_KEYS if k in top] + sorted(k for k in top
                                                            if k not in _EVIDENCE_KEYS)
    lines += _table(["field", *SIDES], ([text(k), *(_shown(top[k].get(s), text) for s in SIDES)]
                                        for k in keys))
    per_case: dict[tuple[str, str], dict[str, Any]] = {}
    for side in SIDES:
        for cid, entry in _evidence_cases(evidence.get(side)).items():
            for key, value in _scalar_items(entry):
                if key == "id" or key.endswith("sha256"):
                    continue  # digests stay in evidence.json; the receipt binds them
                per_case.setdefault((cid, key), {})[side] = value
    if per_case:
        lines += ["", "Per case (split path, slice counts, timings; digests are in each "
                  "side's `evidence.json`):", ""]
        lines += _table(["case", "field", *SIDES],
                        ([text(cid), text(key), *(_shown(v.get(s), text) for s in SIDES)]
                         for (cid, key), v in sorted(per_case.items())))
    return lines + [""]


def render_markdown(inputs: ReportInputs, report_format: str = DEFAULT_REPORT) -> str:
    """``report.md`` in ``report_format``: verdict and stop reasons first, then the tables.
    Deterministic. Raises :class:`UnsafeLegacyText` for report/v1 when an evidence string
    cannot be shown safely in that format."""
    text = _text_for(report_format)
    v3 = report_format not in (REPORT_V1, REPORT_V2)
    s = summarize(inputs, forced_failures_v3 if v3 else _forced_failures)
    # a change against its base: base/change words (report/v3: either regression rule set)
    change = inputs.rules in PER_ROW_CHANGE_RULES or (v3 and inputs.rules == REGRESSION_V1)
    heads = ("base (stock)", "change (patched)") if change else SIDES
    out = [f"# topp-gate report: {text(s['manifest'])}", ""]
    out += [f"**Verdict: {s['verdict']}**", ""]
    if s["reasons"]:
        out += ["Stop reasons (every one found; rows stopped per reason, 0 for a run-level "
                "condition):", ""]
        out += [f"- `{reason}`: {s['stop_rows'].get(reason, 0)} row(s)" for reason in s["reasons"]]
    else:
        out += ["No row and no run-level condition stopped the gate."]
    if report_format != REPORT_V1:
        out += ["", f"Judged by rule set `{text(inputs.rules or '?')}`; report format "
                f"`{report_format}`."]
    out += ["", f"Backend: {backend_label(inputs.backend, inputs.evidence, text)}.", "",
            f"Rows judged: {s['rows']} ({s['forced_rows']} forced, {s['ordinary_rows']} "
            f"ordinary or boundary); rows stopped: {s['rows_stopped']}.", "",
            _change_scope(inputs.rules) if change else
            "Passing proves only that the forced masking defect is fixed without a detected "
            "regression against the bounded ordinary-row contract; it does not prove exact "
            "top-p behaviour in general.", ""]

    if inputs.rules in PER_ROW_CHANGE_RULES:
        out += regression_v2_lines(inputs, text)
    elif change:  # report/v3, regression/v1
        out += base_defect_lines(inputs, text) + stopped_rows_lines(inputs, text)
    else:
        out += base_defect_lines(inputs, text)
    out += ["## Forced rows", ""]
    if s["forced"] and change and inputs.rules == REGRESSION_V1:  # report/v3 only
        # regression/v1 names no forced rule (its faults say only ``forced_failure``), so
        # whether a side lost the forced token is unknown: count the rows it failed
        out += [f"The base failed a forced rule on {s['stock_failed']} of "
                f"{s['forced_rows']} forced rows; the change held on {s['patched_held']} of "
                f"{s['forced_rows']}. The base's failures are its defects (listed above); "
                "the change's are judged against the base's.", ""]
        out += _forced_table(s["forced"], text, ("base", "change"), v3=True)
    elif s["forced"] and change:
        out += [f"The base lost the forced token on {s['stock_lost_forced']} of "
                f"{s['forced_rows']} forced rows; the change held on {s['patched_held']} of "
                f"{s['forced_rows']}. The base's failures are its defects (listed above); the "
                "change's are judged against the base's.", ""]
        out += _forced_table(s["forced"], text, ("base", "change"))
    elif s["forced"]:
        out += [f"Stock lost the forced token on {s['stock_lost_forced']} of {s['forced_rows']} "
                f"forced rows; patched held on {s['patched_held']} of {s['forced_rows']}. "
                "Stock failures are the reproduced defect, never a stop.", ""]
        out += _forced_table(s["forced"], text, ("stock", "patched"))
    else:
        out += ["No forced rows."]
    out += [""]

    out += ["## Ordinary rows (boundary rows included)", ""]
    env = s["envelope"]
    out += _table(["figure", *heads], [
        ["rows with a count", *(env[x]["rows"] for x in SIDES)],
        ["largest kept - oracle (signed, by magnitude)",
         *(f"{env[x]['max_abs_diff']} at {env[x]['max_abs_row']}"
           if env[x]["max_abs_row"] else None for x in SIDES)],
        ["largest |kept - oracle| / oracle",
         *(f"{env[x]['max_rel_diff']} ({env[x]['max_rel_fraction']}) at {env[x]['max_rel_row']}"
           if env[x]["max_rel_row"] else None for x in SIDES)],
        ["rows over-keeping", *(env[x]["over_keep"] for x in SIDES)],
        ["rows under-keeping", *(env[x]["under_keep"] for x in SIDES)],
        ["rows with the oracle's count", *(env[x]["equal_count"] for x in SIDES)],
    ])
    sd = s["symdiff"]
    compared = "change against base" if change else "patched against stock"
    out += ["", f"Symmetric difference from the oracle, {compared}, row by row: "
            f"{sd['better']} better, {sd['equal']} equal, {sd['worse']} worse.", ""]

    out += ["## Diagnostics (never a stop)", ""]
    body = []
    for kind in (ORDINARY, FORCED):
        for side in SIDES:
            d = s["diagnostics"][kind][side]
            body.append([kind, heads[SIDES.index(side)], f"{d['exact']}/{d['judged']}",
                         d["minimal_yes"],
                         d["minimal_no"], d["minimal_undefined"]])
    out += _table(["rows", "side", "exact mask equality", "minimal", "not minimal",
                   "minimality undefined"], body)
    out += ["", "Minimal: removing the lowest-priority kept token drops the reference prefix "
            "below p" + (" (by mass on every row, p = 1 rows included)" if change else "")
            + ". Undefined: empty, NaN or non-prefix output.", ""]

    out += ["## Oracle", ""]
    out += _table(["rows", "certified", "oracle_boundary_ambiguous"],
                  ([kind, s["oracle"][kind]["certified"], s["oracle"][kind]["ambiguous"]]
                   for kind in (FORCED, ORDINARY)))
    out += ["", "Output status per side: " + "; ".join(
        f"{side}: {_counts(s['side_status'][side])}" for side in SIDES) + ".", ""]
    out += _evidence_lines(inputs.evidence, text)
    return "\n".join(out).rstrip("\n") + "\n"


def base_defect_lines(inputs: ReportInputs, text: Callable[[str], str]) -> list[str]:
    """The base's own failures (rule set regression/v1: the verdict's ``base_defects``),
    every row listed; nothing when the verdict has no ``base_defects``."""
    defects = inputs.verdict.get("base_defects")
    if not isinstance(defects, Mapping):
        return []
    lines = ["## Base defects (the base already fails these rows; never a pass of the base)",
             ""]
    if not defects.get("rows"):
        return lines + ["The base (stock) fails no row judged alone against the oracle.", ""]
    lines += [f"The base (stock) fails {defects['rows']} of {len(inputs.rows)} rows judged "
              "alone against the oracle: "
              + _counts({str(k): v for k, v in defects.get("reasons", {}).items()})
              + ". There the change stops only where its symmetric difference from the "
              "oracle grows, or where it rewrites a kept value.", ""]
    lines += _table(["row", "base faults", "change faults", "change stops"],
                    ([text(_row_id(r)), ", ".join(r["diagnostics"].get("stock_faults", [])),
                      ", ".join(r["diagnostics"].get("patched_faults", [])) or "none",
                      ", ".join(r["stops"]) or "none"]
                     for r in inputs.rows if r["diagnostics"].get("stock_faults")))
    return lines + [""]


REGRESSION_V2_SCOPE = (
    "Judged as a change (patched) against its base (stock) on every row, base defect or not. "
    "Passing proves only that the change introduces no detected regression against its base: "
    "no fault the base does not have, no oracle token the base kept and the change drops, no "
    "growth of missing oracle tokens, symmetric difference or binary64 mass outside or "
    "dropped, no rewritten kept value. It does not prove the base or the change correct.")


REGRESSION_V1_SCOPE = (
    "Judged as a change (patched) against its base (stock): each side alone against the "
    "oracle, then the change stops a row the base does not fail where it has a fault, and "
    "any row where its symmetric difference from the oracle grows or it rewrites a kept "
    "value. Passing proves only that the change introduces no such regression against its "
    "base; it does not prove the base or the change correct.")


REGRESSION_SUPPORT_V1_SCOPE = (
    "Judged as a change (patched) against its base (stock) on every row, base defect or not: "
    "rows of a sampling path by the support of their draws (64 per row, fixed seed), every "
    "other row as regression/v2. Passing proves only that the change introduces no detected "
    "regression against its base: on sampling rows no fault the base does not have, no "
    "growth of drawn tokens outside the allowed set or of binary64 mass outside the oracle's "
    "set, no rewritten value (a sample: a draw that did not happen is not seen); on the "
    "other rows what regression/v2 checks. It does not prove the base or the change correct.")

REGRESSION_SUPPORT_V2_SCOPE = (
    "Judged as a change (patched) against its base (stock) on every row, base defect or not: "
    "rows of a sampling path by the support of their draws (64 per row, fixed seed), every "
    "other row as regression/v2. Passing proves only that the change introduces no detected "
    "regression against its base: on sampling rows no fault the base does not have, no "
    "growth of drawn tokens or of their binary64 mass outside the allowed set closed under "
    "ties at its boundary (any member of the boundary's tie group may be drawn), no "
    "rewritten value (a sample: a draw that did not happen is not seen); on the other rows "
    "what regression/v2 checks. It does not prove the base or the change correct.")

# Rule sets that judge a change against its base on every row, and list their verdicts'
# base-defect and broken rows (regression_v2_lines).
PER_ROW_CHANGE_RULES = (REGRESSION_V2, REGRESSION_SUPPORT_V1, REGRESSION_SUPPORT_V2)


def _change_scope(rules: str | None) -> str:
    if rules == REGRESSION_SUPPORT_V1:
        return REGRESSION_SUPPORT_V1_SCOPE
    if rules == REGRESSION_SUPPORT_V2:
        return REGRESSION_SUPPORT_V2_SCOPE
    return REGRESSION_V1_SCOPE if rules == REGRESSION_V1 else REGRESSION_V2_SCOPE


def stopped_rows_lines(inputs: ReportInputs, text: Callable[[str], str]) -> list[str]:
    """report/v3, ``regression/v1``: the rows the change stopped on, by reason (reasons
    sorted, rows in judged order), as ``regression/v2`` lists its ``broken_rows``."""
    broken: dict[str, list[str]] = {}
    for result in inputs.rows:
        for reason in result.get("stops", []):
            broken.setdefault(str(reason), []).append(_row_id(result))
    lines = ["## Rows the change broke", ""]
    if not broken:
        return lines + ["The change broke no row.", ""]
    lines += [f"- `{reason}` ({len(broken[reason])}): "
              + ", ".join(text(r) for r in broken[reason]) for reason in sorted(broken)]
    return lines + [""]


def _mass(result: Mapping[str, Any], key: str) -> str:
    value = result["diagnostics"].get(key)
    return "-" if not isinstance(value, str) else f"{float.fromhex(value):.3g}"


def _pair(result: Mapping[str, Any], key: str) -> str:
    return " / ".join(_cell(result.get(side, {}).get(key)) for side in SIDES)


def regression_v2_lines(inputs: ReportInputs, text: Callable[[str], str]) -> list[str]:
    """Rule set regression/v2: both sides on every base-defect row (faults, kept, symmetric
    difference, missing oracle tokens, binary64 masses, whether the change altered the row,
    its stops), then the rows the change broke, by reason (the verdict's ``broken_rows``)."""
    defects = inputs.verdict.get("base_defects")
    defects = defects if isinstance(defects, Mapping) else {"rows": 0, "reasons": {}}
    lines = ["## Base defects (the base already fails these rows; never a pass of the base)",
             ""]
    # rows the base has no output for (it crashed, timed out...): the base's failure, never
    # the change's (issue 37); only such bundles read differently from before
    base_down = Counter(str(r.get(SIDES[0], {}).get("status", "missing")) for r in inputs.rows
                        if r.get(SIDES[0], {}).get("status") != "ok")
    if base_down:
        lines += [f"The base (stock) did not run on {sum(base_down.values())} of "
                  f"{len(inputs.rows)} rows ({_counts(dict(sorted(base_down.items())))}): "
                  "it has no output there to judge, so those rows stop for the base's "
                  "failure; they are no verdict on the change.", ""]
    defect_rows = [r for r in inputs.rows if r["diagnostics"].get("stock_faults")]
    if not defect_rows:
        lines += ["The base (stock) fails no row it ran, judged alone against the oracle."
                  if base_down else
                  "The base (stock) fails no row judged alone against the oracle.", ""]
    else:
        altered = sum(bool(r["diagnostics"].get("altered")) for r in defect_rows)
        lines += [f"The base (stock) fails {defects['rows']} of {len(inputs.rows)} rows judged "
                  "alone against the oracle: "
                  + _counts({str(k): v for k, v in defects.get("reasons", {}).items()})
                  + f". The change altered {altered} of them. There, as on every row, the "
                  "change is judged against the base. Each pair is base / change; masses are "
                  "binary64 softmax of the whole row.", ""]
        lines += _table(["row", "base faults", "change faults", "kept", "symdiff",
                         "missing oracle", "mass outside", "mass dropped", "altered",
                         "change stops"],
                        ([text(_row_id(r)), ", ".join(r["diagnostics"]["stock_faults"]),
                          ", ".join(r["diagnostics"].get("patched_faults", [])) or "none",
                          _pair(r, "kept"), _pair(r, "symdiff"), _pair(r, "missing_oracle"),
                          f"{_mass(r, 'stock_mass_outside')} / "
                          f"{_mass(r, 'patched_mass_outside')}",
                          f"{_mass(r, 'stock_mass_dropped')} / "
                          f"{_mass(r, 'patched_mass_dropped')}",
                          bool(r["diagnostics"].get("altered")),
                          ", ".join(r["stops"]) or "none"]
                         for r in defect_rows))
        lines += [""]
    lines += ["## Rows the change broke" if not base_down else
              "## Rows stopped (the base did not run on some: those are the base's failure)",
              ""]
    broken = inputs.verdict.get("broken_rows")
    if not isinstance(broken, Mapping) or not broken:
        return lines + ["The change broke no row.", ""]
    lines += [f"- `{reason}` ({len(rows)}): " + ", ".join(text(str(r)) for r in rows)
              for reason, rows in broken.items()]
    return lines + [""]
