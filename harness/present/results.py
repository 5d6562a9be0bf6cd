"""The README's "Results" section, rendered from the evidence model of verified bundles.

One section per bundle of a folder (``evidence/bundles``), each from
:func:`harness.present.model.verified_model` (the trusted core verified the bundle in this
process first; one that does not verify is a SectionInputError, never a rendered claim):
the verdict, the backend, the figures report.md shows (the model's ``figures``: forced rows,
the kept-count envelope, the symmetric difference, diagnostics) and the exact-real counts
``topp-gate exact`` derives from the same bytes (the model's ``exact``). Then every CUDA
bundle against every interpreter bundle on the rows both hold with identical captured bytes
(:func:`harness.present.model.row_bytes`), and, when given, the comparison file
``benchmarks/cuda_vs_interpreter.py --json`` writes (not signed; :func:`load_comparison`).

Every evidence string is escaped for Markdown by the one escaper
(:func:`harness.core.terminal.markdown_cell` / ``markdown_code``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.bundle import RECEIPT
from ..core.errors import SectionInputError
from ..core.names import FORCED, ORDINARY, SIDES
from ..core.terminal import markdown_cell, markdown_code
from . import sections
from .model import BundleModel, RowBytes, row_bytes, verified_model

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey


# --- one bundle ------------------------------------------------------------------------------


def _row_ref(ref: object) -> str:
    """A row named ``case[row]`` by the core's figures: the case id escaped, the index as
    it is (an int); anything else escaped whole."""
    case, bracket, rest = str(ref).rpartition("[")
    if bracket and rest.endswith("]") and rest[:-1].isdigit():
        return f"{markdown_cell(case)}[{rest[:-1]}]"
    return markdown_cell(ref)


def _backend(bundle: BundleModel) -> str:
    named = ", ".join(markdown_cell(d) for d in bundle.devices)
    if bundle.figures["interpreter"]:
        recorded = f"; device recorded: {named}" if bundle.devices else ""
        return f"Triton's interpreter on the CPU (not GPU evidence){recorded}"
    backend = markdown_cell(bundle.backend)
    return f"{backend} on {named}" if bundle.devices else backend


def _forced_line(figures: Mapping[str, Any]) -> str:
    groups = figures["forced"]
    if not groups:
        return "- Forced rows: none in this matrix."
    by_value: dict[str, list[int]] = {}
    for g in groups:
        lost_held = by_value.setdefault(markdown_cell(g["value"]), [0, 0, 0])
        lost_held[0] += g["stock_lost_forced"]
        lost_held[1] += g["patched_held"]
        lost_held[2] += g["rows"]
    per_value = "; ".join(f"{value}: stock lost {lost}/{n}, patched held {held}/{n}"
                          for value, (lost, held, n) in by_value.items())
    lost_at = [value for value, (lost, _, _) in by_value.items() if lost]
    return (f"- Forced rows: stock lost the forced token on {figures['stock_lost_forced']} of "
            f"{figures['forced_rows']} rows (forced values {', '.join(lost_at) or 'none'}); "
            f"patched held on {figures['patched_held']} of {figures['forced_rows']}. "
            f"By forced value: {per_value}.")


def _envelope_lines(figures: Mapping[str, Any]) -> list[str]:
    env, sd = figures["envelope"], figures["symdiff"]
    parts = []
    for side in SIDES:
        e = env[side]
        if e["max_abs_row"] is None:
            parts.append(f"{side}: no judged row")
            continue
        parts.append(f"{side}: largest kept - oracle {e['max_abs_diff']:+d} "
                     f"({_row_ref(e['max_abs_row'])}), largest relative {e['max_rel_diff']} "
                     f"({e['max_rel_fraction']}, {_row_ref(e['max_rel_row'])}), "
                     f"{e['over_keep']} over-keeping / {e['under_keep']} under-keeping / "
                     f"{e['equal_count']} exact-count rows of {e['rows']}")
    return [f"- Ordinary and boundary rows ({figures['ordinary_rows']}): " + "; ".join(parts)
            + ".",
            f"- Symmetric difference from the oracle, patched against stock, row by row: "
            f"{sd['better']} better, {sd['equal']} equal, {sd['worse']} worse."]


def _diagnostic_line(figures: Mapping[str, Any]) -> str:
    parts = []
    for kind in (ORDINARY, FORCED):
        for side in SIDES:
            d = figures["diagnostics"][kind][side]
            parts.append(f"{kind} {side} exact {d['exact']}/{d['judged']}, minimal "
                         f"{d['minimal_yes']} (not minimal {d['minimal_no']}, undefined "
                         f"{d['minimal_undefined']})")
    oracle = figures["oracle"]
    ambiguous = oracle["forced"]["ambiguous"] + oracle["ordinary"]["ambiguous"]
    return ("- Diagnostics (never a stop): " + "; ".join(parts)
            + f". Oracle boundary ambiguous on {ambiguous} row(s).")


def _exact_lines(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """The exact-real summary and stopped rows (:mod:`harness.diagnostics.exact_report`),
    their evidence strings (case ids, stop names) escaped before they are laid out."""
    from ..diagnostics.exact_report import exact_keeps, exact_stopped_table, exact_summary

    shown = [{**r, "case": markdown_cell(r.get("case")),
              "stops": [markdown_cell(s) for s in r.get("stops", [])]} for r in records]
    table = exact_stopped_table(shown)
    return [f"- Exact-real counts (derived by `topp-gate exact`, not attested by the receipt; "
            f"never a stop): {exact_summary(shown)} {exact_keeps(shown, ORDINARY)} "
            f"{exact_keeps(shown, FORCED)}"
            + (" Stopped rows:" if table else ""), *([""] + table if table else [])]


def bundle_section(bundle: BundleModel, bundles_dir: Path) -> list[str]:
    """One bundle's lines (with the exact-real counts when its model holds them)."""
    figures = bundle.figures
    reasons = ", ".join(markdown_code(r) for r in bundle.reasons) or "none"
    return [
        f"### {markdown_cell(bundle.name)} "
        f"({markdown_code(f'{bundles_dir.as_posix()}/{bundle.path}/')})", "",
        f"- Verdict: **{markdown_cell(bundle.verdict)}** over {bundle.rows_total} rows "
        f"({bundle.rows_stopped} stopped); stop reasons: {reasons}.",
        f"- Backend: {_backend(bundle)}.",
        _forced_line(figures), *_envelope_lines(figures), _diagnostic_line(figures),
        *(_exact_lines(bundle.exact) if bundle.exact is not None else []), "",
    ]


# --- CUDA against the interpreter ------------------------------------------------------------


@dataclass(frozen=True)
class SideMatch:
    """One side's outputs for one row, CUDA against the interpreter."""

    bytes_equal: bool
    kept_equal: bool
    kept_cuda: int
    kept_interpreter: int


@dataclass(frozen=True)
class RowMatch:
    case: str
    row: int  # row index in the CUDA bundle's case
    sides: dict[str, SideMatch]


def shared_rows(cuda: Sequence[RowBytes], interp: Sequence[RowBytes]) -> list[RowMatch]:
    """Rows both bundles hold with the same case id and label and identical captured
    logits and p bytes, with each side's outputs compared (bytes and kept set)."""
    theirs = {(r.case, r.label): r for r in interp}
    matches = []
    for key, mine in {(r.case, r.label): r for r in cuda}.items():
        other = theirs.get(key)
        if other is None or other.inputs_sha256 != mine.inputs_sha256:
            continue
        sides = {side: SideMatch(a.sha256 == b.sha256, a.kept_sha256 == b.kept_sha256,
                                 a.kept, b.kept)
                 for side in SIDES
                 if (a := mine.outputs.get(side)) is not None
                 and (b := other.outputs.get(side)) is not None}
        matches.append(RowMatch(mine.case, mine.row, sides))
    return sorted(matches, key=lambda m: (m.case, m.row))


COMPARISON_SCHEMA = "topp-gate/cuda-vs-interpreter/v1"
_ROW_KEYS = {"case": str, "row": int, "side": str, "byte_identical": bool,
             "kept_sets_equal": bool, "kept_cuda": int, "kept_interpreter": int}


@dataclass(frozen=True)
class Comparison:
    bundle: str  # the CUDA bundle the interpreter was compared with, as the file names it
    rows: list[RowMatch]
    problems: list[str]  # planned rows that were not compared, and why


def load_comparison(path: Path) -> Comparison:
    """What ``benchmarks/cuda_vs_interpreter.py --json`` writes (schema
    ``topp-gate/cuda-vs-interpreter/v1``): ``bundle.path``, ``problems`` (strings) and
    ``rows``, one per compared row and side, each with at least ``case``, ``row``, ``side``,
    ``byte_identical``, ``kept_sets_equal``, ``kept_cuda`` and ``kept_interpreter``. Rows
    are grouped by (case, row). Anything else is a SectionInputError."""
    try:
        document = json.loads(path.read_bytes())
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise SectionInputError(f"{path} is not JSON ({err})") from None
    if not isinstance(document, dict) or document.get("schema") != COMPARISON_SCHEMA:
        raise SectionInputError(f"{path}: not a {COMPARISON_SCHEMA} document "
                                "(benchmarks/cuda_vs_interpreter.py --json)")
    rows, problems = document.get("rows"), document.get("problems", [])
    bundle = document.get("bundle", {}).get("path") if isinstance(document.get("bundle"),
                                                                  dict) else None
    if not isinstance(rows, list) or not isinstance(problems, list) \
            or not all(isinstance(p, str) for p in problems) or not isinstance(bundle, str):
        raise SectionInputError(f"{path}: needs a rows list, a problems list of strings and "
                                "bundle.path")
    grouped: dict[tuple[str, int], dict[str, SideMatch]] = {}
    for i, entry in enumerate(rows):
        bad = [k for k, t in _ROW_KEYS.items()
               if not isinstance(entry, dict) or type(entry.get(k)) is not t]
        if bad or entry["side"] not in SIDES:
            needs = ", ".join(f"{k} ({t.__name__})" for k, t in _ROW_KEYS.items())
            raise SectionInputError(f"{path}: rows[{i}] needs {needs}, side stock or patched")
        sides = grouped.setdefault((entry["case"], entry["row"]), {})
        if entry["side"] in sides:
            raise SectionInputError(f"{path}: rows[{i}] repeats {entry['case']}[{entry['row']}] "
                                    f"{entry['side']}")
        sides[entry["side"]] = SideMatch(entry["byte_identical"], entry["kept_sets_equal"],
                                         entry["kept_cuda"], entry["kept_interpreter"])
    return Comparison(bundle, [RowMatch(c, r, sides) for (c, r), sides in sorted(grouped.items())],
                      list(problems))


def _match_lines(matches: Sequence[RowMatch]) -> list[str]:
    """Per side: identical output bytes, equal kept sets, equal kept counts; and every row
    whose kept count differs, with both counts."""
    lines = []
    for side in SIDES:
        pairs = [(m, m.sides[side]) for m in matches if side in m.sides]
        if not pairs:
            lines.append(f"- {side}: no row with outputs on both backends.")
            continue
        n = len(pairs)
        same_bytes = sum(s.bytes_equal for _, s in pairs)
        same_set = sum(s.kept_equal for _, s in pairs)
        same_count = sum(s.kept_cuda == s.kept_interpreter for _, s in pairs)
        counts = sorted({(s.kept_cuda, s.kept_interpreter) for _, s in pairs})
        shown = ", ".join(f"{c}/{i}" for c, i in counts[:6])
        more = f" and {len(counts) - 6} more pairs" if len(counts) > 6 else ""
        line = (f"- {side}: output bytes identical on {same_bytes} of {n}, kept set equal on "
                f"{same_set} of {n}, kept count equal on {same_count} of {n} "
                f"(kept counts CUDA/interpreter seen: {shown}{more}).")
        differ = [f"{markdown_cell(m.case)}[{m.row}] {s.kept_cuda}/{s.kept_interpreter}"
                  for m, s in pairs if s.kept_cuda != s.kept_interpreter]
        if differ:
            line = line[:-1] + "; counts differ on " + ", ".join(differ[:10]) + (
                f" and {len(differ) - 10} more" if len(differ) > 10 else "") + "."
        lines.append(line)
    return lines


def compare_section(cuda: BundleModel, interp: BundleModel,
                    matches: Sequence[RowMatch]) -> list[str]:
    """How CUDA and interpreter outputs compare on the rows both bundles hold with
    identical captured bytes (``matches``: :func:`shared_rows`)."""
    title = (f"### CUDA ({markdown_code(cuda.path)}) against the interpreter "
             f"({markdown_code(interp.path)})")
    if not matches:
        return [title, "", "- No shared rows: no row is in both bundles with the same case id, "
                "label and identical captured logits and p bytes.", ""]
    cases = sorted({markdown_cell(m.case) for m in matches})
    return [title, "",
            f"- {len(matches)} shared row(s): same case id and label and identical captured "
            f"logits and p bytes ({', '.join(cases)}; CUDA rows "
            f"{', '.join(str(m.row) for m in matches)}).",
            *_match_lines(matches), ""]


def comparison_file_section(path: Path, display: Path) -> list[str]:
    """The optional comparison made outside the bundles (the interpreter rerun on a CUDA
    bundle's captured bytes); absent file, no section."""
    if not path.is_file():
        return []
    comparison = load_comparison(path)
    matches = comparison.rows
    cases = sorted({markdown_cell(m.case) for m in matches})
    lines = [f"### CUDA ({markdown_code(comparison.bundle)}) against the interpreter on the "
             "same captured "
             f"bytes ({markdown_code(display.as_posix())})", "",
             f"- {len(matches)} row(s) of {len(cases)} case(s) compared"
             + (f" ({', '.join(cases[:8])}{', ...' if len(cases) > 8 else ''})" if cases
                else "")
             + ": the interpreter ran on rows cut from the bundle's captured bytes and was "
             "compared with the bundle's CUDA outputs. Not a signed bundle: the file is "
             "`benchmarks/cuda_vs_interpreter.py`'s output, which `topp-gate verify` does not "
             "check."]
    if matches:
        lines += _match_lines(matches)
    if comparison.problems:
        lines.append(f"- Not compared ({len(comparison.problems)}): "
                     + "; ".join(markdown_cell(p) for p in comparison.problems) + ".")
    return lines + [""]


# --- the section -----------------------------------------------------------------------------


def generate(bundles_dir: Path, display: Path | None = None, *,
             public_key: Ed25519PublicKey, comparison: Path | None = None,
             comparison_display: Path | None = None, exact: bool = True) -> str:
    """The whole section, markers included (``exact=False`` leaves out the exact-real
    counts, which take seconds per bundle; the README always has them)."""
    paths = sorted(p for p in bundles_dir.glob("*") if p.is_dir() and (p / RECEIPT).is_file())
    if not paths:
        raise SectionInputError(f"no bundle (a folder with {RECEIPT}) under {bundles_dir}")
    models = [(p, verified_model(p, public_key, "bundles", exact=exact)) for p in paths]
    shown = display if display is not None else bundles_dir
    lines = [sections.RESULTS.begin, "## Results", "",
             f"Generated by `{sections.RESULTS.script}` from the committed bundles' signed "
             "receipts and results; not typed by hand. `topp-gate verify` checks each "
             "bundle's signature and reruns its oracle and gate.", ""]
    for _, bundle in models:
        lines += bundle_section(bundle, shown)
    cuda = [(p, b) for p, b in models if not b.figures["interpreter"]]
    interp = [(p, b) for p, b in models if b.figures["interpreter"]]
    for cuda_path, cuda_model in cuda:
        for interp_path, interp_model in interp:
            ids = {c.id for c in cuda_model.workload} & {c.id for c in interp_model.workload}
            matches = shared_rows(row_bytes(cuda_path, public_key, ids),
                                  row_bytes(interp_path, public_key, ids))
            lines += compare_section(cuda_model, interp_model, matches)
    if not (cuda and interp):
        lines += ["No CUDA and interpreter bundle pair is committed, so the bundles share "
                  "no rows to compare across backends.", ""]
    if comparison is not None:
        lines += comparison_file_section(comparison, comparison_display or comparison)
    return "\n".join(lines).rstrip("\n") + "\n" + sections.RESULTS.end + "\n"
