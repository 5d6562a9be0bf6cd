#!/usr/bin/env python3
"""Generate docs/results.md's "Results" section from the committed evidence bundles.

    .venv/bin/python scripts/results_section.py                  # print the section
    .venv/bin/python scripts/results_section.py --check docs/results.md  # exit 1 if it differs
    .venv/bin/python scripts/results_section.py --write docs/results.md  # replace it in place

Reads every bundle under ``evidence/bundles/*/`` (``--bundles DIR`` to change) only after
verifying it in this process with the signer's public key (``--pubkey``, default
``evidence/keys/topp-gate-evidence.pub``) through :func:`harness.present.verified.verified_view`:
the trusted core checks the signature, schema, digests and bindings and reruns the oracle
and gate, then every artifact read (``results/rows.json``, ``cases.json``, ``manifest.json``,
each side's ``evidence.json``, and the inputs and outputs of rows both a CUDA and an
interpreter bundle hold) is decoded by the codec the receipt records and checked against
both receipt digests. A bundle that does not verify stops the script (exit 2).

Each bundle's section also carries the exact-real counts ``topp-gate exact`` derives from
the same bytes (:mod:`harness.diagnostics.exact_bundle`; needs the ``exact`` extra, python-flint):
the stopped rows with the exact-real column and one summary line for all rows. They are
derived here, not read from a receipt.

When ``benchmarks/cuda_vs_interpreter.json`` exists (``--comparison FILE`` to change), the
per-row CUDA-versus-interpreter results ``benchmarks/cuda_vs_interpreter.py --json`` wrote
are summarized too (see :func:`load_comparison`).

docs/results.md holds the section between ``<!-- results:begin -->`` and
``<!-- results:end -->``; nothing between the markers is typed by hand.

Exit codes: 0 ok (or the file up to date), 1 the file's section differs (``--check``),
2 bad input (no bundle, missing markers, unreadable or inconsistent bundle).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.core.bundle import (  # noqa: E402
    CASES,
    MANIFEST,
    RECEIPT,
    ROWS,
    evidence_name,
    output_name,
)
from harness.core.digest import sha256_hex  # noqa: E402
from harness.core.errors import HarnessError, SectionInputError  # noqa: E402
from harness.core.keys import load_public_key  # noqa: E402
from harness.core.names import FORCED, ORDINARY, SIDES  # noqa: E402
from harness.core.report import ReportInputs, device_name, summarize  # noqa: E402
from harness.core.terminal import markdown_cell, markdown_code  # noqa: E402
from harness.core.verify import UnsafeBundleView  # noqa: E402
from harness.diagnostics.exact_report import (  # noqa: E402
    exact_keeps,
    exact_stopped_table,
    exact_summary,
)
from harness.present import sections  # noqa: E402
from harness.present.verified import verified_view  # noqa: E402

BEGIN = sections.RESULTS.begin
END = sections.RESULTS.end
DEFAULT_BUNDLES = Path("evidence/bundles")
DEFAULT_PUBKEY = Path("evidence/keys/topp-gate-evidence.pub")
DEFAULT_COMPARISON = Path("benchmarks/cuda_vs_interpreter.json")


class Artifacts:
    """A bundle's artifacts as its signed receipt names them, read only once the bundle
    verified in this process (:func:`harness.present.verified.verified_view`), each
    artifact's stored and raw sha256 checked on read (any codec the writer used)."""

    def __init__(self, path: Path, view: UnsafeBundleView) -> None:
        self.name = path.name
        self.view = view
        self.subjects = {s["name"]: s for s in self.view.statement["subject"]}
        self.predicate: dict[str, Any] = self.view.statement["predicate"]

    def raw(self, name: str) -> bytes:
        """Raw bytes of an artifact, decoded, checked against its receipt digests."""
        try:
            return self.view.raw(name)
        except HarnessError as err:
            raise SectionInputError(f"bundle {self.name}: {err}") from None

    def json(self, name: str) -> Any:
        try:
            return json.loads(self.raw(name))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise SectionInputError(f"bundle {self.name}: {name} is not JSON ({err})") from None


@dataclass(frozen=True)
class Bundle:
    name: str  # directory name under the bundles folder
    artifacts: Artifacts
    inputs: ReportInputs
    cases: list[dict[str, Any]]


def load_bundle(path: Path, public_key: Ed25519PublicKey) -> Bundle:
    """The bundle at ``path``, verified in this process first (exit 2 if it does not)."""
    return bundle_from_view(path, verified_view(path, public_key))


def bundle_from_view(path: Path, view: UnsafeBundleView) -> Bundle:
    art = Artifacts(path, view)
    manifest = art.json(MANIFEST)
    cases = art.json(CASES)
    evidence = {side: art.json(evidence_name(side))
                for side in SIDES if evidence_name(side) in art.subjects}
    backend = str(manifest.get("backend", {}).get("required", "?"))
    inputs = ReportInputs(str(manifest.get("name", path.name)), backend, art.json(ROWS),
                          art.predicate["verdict"], evidence, cases)
    return Bundle(path.name, art, inputs, list(cases.get("cases", [])))


# --- rendering ------------------------------------------------------------------------------


def _backend(bundle: Bundle, summary: Mapping[str, Any]) -> str:
    devices = sorted({device_name(ev) for ev in bundle.inputs.evidence.values()} - {""})
    named = ", ".join(markdown_cell(d) for d in devices)
    if summary["interpreter"]:
        recorded = f"; device recorded: {named}" if devices else ""
        return f"Triton's interpreter on the CPU (not GPU evidence){recorded}"
    backend = markdown_cell(bundle.inputs.backend)
    return f"{backend} on {named}" if devices else backend


def _forced_line(summary: Mapping[str, Any]) -> str:
    groups = summary["forced"]
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
    return (f"- Forced rows: stock lost the forced token on {summary['stock_lost_forced']} of "
            f"{summary['forced_rows']} rows (forced values {', '.join(lost_at) or 'none'}); "
            f"patched held on {summary['patched_held']} of {summary['forced_rows']}. "
            f"By forced value: {per_value}.")


def _envelope_lines(summary: Mapping[str, Any]) -> list[str]:
    env, sd = summary["envelope"], summary["symdiff"]
    parts = []
    for side in SIDES:
        e = env[side]
        if e["max_abs_row"] is None:
            parts.append(f"{side}: no judged row")
            continue
        parts.append(f"{side}: largest kept - oracle {e['max_abs_diff']:+d} "
                     f"({e['max_abs_row']}), largest relative {e['max_rel_diff']} "
                     f"({e['max_rel_fraction']}, {e['max_rel_row']}), "
                     f"{e['over_keep']} over-keeping / {e['under_keep']} under-keeping / "
                     f"{e['equal_count']} exact-count rows of {e['rows']}")
    return [f"- Ordinary and boundary rows ({summary['ordinary_rows']}): " + "; ".join(parts)
            + ".",
            f"- Symmetric difference from the oracle, patched against stock, row by row: "
            f"{sd['better']} better, {sd['equal']} equal, {sd['worse']} worse."]


def _diagnostic_line(summary: Mapping[str, Any]) -> str:
    parts = []
    for kind in (ORDINARY, FORCED):
        for side in SIDES:
            d = summary["diagnostics"][kind][side]
            parts.append(f"{kind} {side} exact {d['exact']}/{d['judged']}, minimal "
                         f"{d['minimal_yes']} (not minimal {d['minimal_no']}, undefined "
                         f"{d['minimal_undefined']})")
    oracle = summary["oracle"]
    ambiguous = oracle["forced"]["ambiguous"] + oracle["ordinary"]["ambiguous"]
    return ("- Diagnostics (never a stop): " + "; ".join(parts)
            + f". Oracle boundary ambiguous on {ambiguous} row(s).")


def exact_records(bundle: Bundle) -> list[dict[str, Any]]:
    """Every row's exact-real count beside its binary64 and kernel counts (what
    ``topp-gate exact`` computes; needs the exact extra)."""
    from harness.core.limits import default_workers
    from harness.diagnostics.exact_bundle import bundle_exact

    rows = bundle_exact(bundle.artifacts.view, workers=default_workers())
    return [row.to_json() for row in rows]


def _exact_lines(records: Sequence[Mapping[str, Any]]) -> list[str]:
    table = exact_stopped_table(records)
    return [f"- Exact-real counts (derived by `topp-gate exact`, not attested by the receipt; "
            f"never a stop): {exact_summary(records)} {exact_keeps(records, ORDINARY)} "
            f"{exact_keeps(records, FORCED)}"
            + (" Stopped rows:" if table else ""), *([""] + table if table else [])]


def bundle_section(bundle: Bundle, bundles_dir: Path,
                   exact: Sequence[Mapping[str, Any]] | None = None) -> list[str]:
    s = summarize(bundle.inputs)
    reasons = ", ".join(markdown_code(r) for r in s["reasons"]) or "none"
    return [
        f"### {markdown_cell(s['manifest'])} "
        f"({markdown_code(f'{bundles_dir.as_posix()}/{bundle.name}/')})", "",
        f"- Verdict: **{markdown_cell(s['verdict'])}** over {s['rows']} rows "
        f"({s['rows_stopped']} stopped); "
        f"stop reasons: {reasons}.",
        f"- Backend: {_backend(bundle, s)}.",
        _forced_line(s), *_envelope_lines(s), _diagnostic_line(s),
        *(_exact_lines(exact) if exact is not None else []), "",
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


def _row_inputs(bundle: Bundle, ids: set[str]) -> dict[tuple[str, str], tuple[int, str]]:
    """(case id, label) -> (row index, sha256 of that row's logits and p bytes)."""
    out: dict[tuple[str, str], tuple[int, str]] = {}
    for case in bundle.cases:
        if case["id"] not in ids:
            continue
        vocab = int(case["vocab"])
        logits, p = bundle.artifacts.raw(case["logits"]), bundle.artifacts.raw(case["p"])
        for i, row in enumerate(case["rows"]):
            digest = sha256_hex(logits[4 * vocab * i : 4 * vocab * (i + 1)] + p[4 * i : 4 * i + 4])
            out[(case["id"], str(row["label"]))] = (i, digest)
    return out


def _row_output(bundle: Bundle, side: str, case_id: str, row: int, vocab: int) -> bytes | None:
    name = output_name(side, case_id)
    if name not in bundle.artifacts.subjects:
        return None  # that side failed for the case: no output file
    return bundle.artifacts.raw(name)[4 * vocab * row : 4 * vocab * (row + 1)]


def _kept(row_bytes: bytes) -> frozenset[int]:
    neg_inf = b"\x00\x00\x80\xff"
    return frozenset(i for i in range(len(row_bytes) // 4)
                     if row_bytes[4 * i : 4 * i + 4] != neg_inf)


def shared_rows(cuda: Bundle, interp: Bundle) -> list[RowMatch]:
    """Rows both bundles hold with the same case id and label and identical captured
    logits and p bytes, with each side's outputs compared (bytes and kept set)."""
    ids = {c["id"] for c in cuda.cases} & {c["id"] for c in interp.cases}
    a, b = _row_inputs(cuda, ids), _row_inputs(interp, ids)
    vocab = {c["id"]: int(c["vocab"]) for c in cuda.cases}
    matches = []
    for key in sorted(k for k in a.keys() & b.keys() if a[k][1] == b[k][1]):
        case_id, (row_a, _), (row_b, _) = key[0], a[key], b[key]
        sides = {}
        for side in SIDES:
            out_a = _row_output(cuda, side, case_id, row_a, vocab[case_id])
            out_b = _row_output(interp, side, case_id, row_b, vocab[case_id])
            if out_a is None or out_b is None:
                continue
            kept_a, kept_b = _kept(out_a), _kept(out_b)
            sides[side] = SideMatch(out_a == out_b, kept_a == kept_b, len(kept_a), len(kept_b))
        matches.append(RowMatch(case_id, row_a, sides))
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
    are grouped by (case, row). Anything else is refused (exit 2)."""
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


def compare_section(cuda: Bundle, interp: Bundle) -> list[str]:
    """How CUDA and interpreter outputs compare on the rows both bundles hold with
    identical captured bytes."""
    matches = shared_rows(cuda, interp)
    title = (f"### CUDA ({markdown_code(cuda.name)}) against the interpreter "
             f"({markdown_code(interp.name)})")
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
             f"bytes (`{display.as_posix()}`)", "",
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


def generate(bundles_dir: Path, display: Path | None = None, *,
             public_key: Ed25519PublicKey, comparison: Path | None = None,
             comparison_display: Path | None = None, exact: bool = True) -> str:
    """The whole section, markers included (``exact=False`` leaves out the exact-real
    counts, which take seconds per bundle; the README always has them)."""
    paths = sorted(p for p in bundles_dir.glob("*") if p.is_dir() and (p / RECEIPT).is_file())
    if not paths:
        raise SectionInputError(f"no bundle (a folder with {RECEIPT}) under {bundles_dir}")
    bundles = [load_bundle(p, public_key) for p in paths]
    shown = display if display is not None else bundles_dir
    lines = [BEGIN, "## Results", "",
             "Generated by `scripts/results_section.py` from the committed bundles' signed "
             "receipts and results; not typed by hand. `topp-gate verify` checks each "
             "bundle's signature and reruns its oracle and gate.", ""]
    for bundle in bundles:
        lines += bundle_section(bundle, shown, exact_records(bundle) if exact else None)
    cuda = [b for b in bundles if not summarize(b.inputs)["interpreter"]]
    interp = [b for b in bundles if summarize(b.inputs)["interpreter"]]
    for c in cuda:
        for i in interp:
            lines += compare_section(c, i)
    if not (cuda and interp):
        lines += ["No CUDA and interpreter bundle pair is committed, so the bundles share "
                  "no rows to compare across backends.", ""]
    if comparison is not None:
        lines += comparison_file_section(comparison, comparison_display or comparison)
    return "\n".join(lines).rstrip("\n") + "\n" + END + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundles", type=Path, default=None,
                        help="folder of bundles (default: evidence/bundles in the repository)")
    parser.add_argument("--pubkey", type=Path, default=None,
                        help="the bundles' signer's public key (default: "
                        "evidence/keys/topp-gate-evidence.pub in the repository)")
    parser.add_argument("--comparison", type=Path, default=None,
                        help="CUDA-versus-interpreter comparison file, used when it exists "
                        "(default: benchmarks/cuda_vs_interpreter.json in the repository)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", type=Path, metavar="FILE",
                      help="exit 1 when FILE's results section differs from the generated one")
    mode.add_argument("--write", type=Path, metavar="FILE",
                      help="replace FILE's results section with the generated one")
    args = parser.parse_args(argv)
    bundles = args.bundles if args.bundles is not None else ROOT / DEFAULT_BUNDLES
    display = DEFAULT_BUNDLES if args.bundles is None else args.bundles
    comparison = args.comparison if args.comparison is not None else ROOT / DEFAULT_COMPARISON
    comparison_display = DEFAULT_COMPARISON if args.comparison is None else args.comparison
    try:
        public_key = load_public_key(args.pubkey if args.pubkey is not None
                                     else ROOT / DEFAULT_PUBKEY)
        section = generate(bundles, display, public_key=public_key, comparison=comparison,
                           comparison_display=comparison_display)
        return sections.run_mode(sections.RESULTS, section, check_path=args.check,
                                 write_path=args.write)
    except (HarnessError, OSError) as err:
        print(f"results_section: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
