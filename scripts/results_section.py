#!/usr/bin/env python3
"""Generate README.md's "Results" section from the committed evidence bundles.

    .venv/bin/python scripts/results_section.py                  # print the section
    .venv/bin/python scripts/results_section.py --check README.md  # exit 1 if README differs
    .venv/bin/python scripts/results_section.py --write README.md  # replace it in place

Reads every bundle under ``evidence/bundles/*/`` (``--bundles DIR`` to change): its
``receipt.json`` (subjects and predicate), ``results/rows.json``, ``cases.json``,
``manifest.json`` and each side's ``outputs/<side>/evidence.json``; each file's sha256 is
checked against the receipt's subject before it is used. It does not check signatures:
``topp-gate verify`` does that, and CI runs it on every committed bundle.

The README holds the section between ``<!-- results:begin -->`` and
``<!-- results:end -->``; nothing between the markers is typed by hand.

Exit codes: 0 ok (or README up to date), 1 README section differs (``--check``),
2 bad input (no bundle, missing markers, unreadable or inconsistent bundle).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.bundle import (  # noqa: E402
    CASES,
    CODEC_MASK,
    CODEC_NONE,
    CODEC_XZ,
    MANIFEST,
    RECEIPT,
    ROWS,
    SIDES,
    BundleDir,
    evidence_name,
    mask_decode,
    output_name,
    xz_decompress,
)
from harness.errors import HarnessError  # noqa: E402
from harness.report import ReportInputs, device_name, summarize  # noqa: E402

BEGIN = "<!-- results:begin -->"
END = "<!-- results:end -->"
DEFAULT_BUNDLES = Path("evidence/bundles")


class ResultsError(Exception):
    """Bad input for the generator: one line, exit 2."""


class Artifacts:
    """A bundle's artifacts as its ``receipt.json`` names them; each checked on read."""

    def __init__(self, path: Path) -> None:
        self.name = path.name
        self.root = BundleDir(path)
        try:
            statement = json.loads(self.root.read(RECEIPT))
            self.subjects = {s["name"]: s for s in statement["subject"]}
            self.predicate: dict[str, Any] = statement["predicate"]
        except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as err:
            raise ResultsError(f"bundle {self.name}: unreadable {RECEIPT} ({err})") from None

    def raw(self, name: str) -> bytes:
        """Raw bytes of an artifact, decoded by its codec, checked against its digest."""
        subject = self.subjects.get(name)
        if subject is None:
            raise ResultsError(f"bundle {self.name}: receipt has no artifact {name}")
        ann = subject["annotations"]
        data = self.root.read(ann["stored"], exact_size=int(ann["stored_size"]))
        size = int(ann["size"])
        if ann["codec"] == CODEC_NONE:
            raw = data
        elif ann["codec"] == CODEC_XZ:
            raw = xz_decompress(data, size)
        elif ann["codec"] == CODEC_MASK:
            raw = mask_decode(xz_decompress(data, 12 + size // 4 + size), self.raw(ann["base"]))
        else:
            raise ResultsError(f"bundle {self.name}: {name} has unknown codec {ann['codec']}")
        if hashlib.sha256(raw).hexdigest() != subject["digest"]["sha256"]:
            raise ResultsError(f"bundle {self.name}: {name} does not match its receipt digest")
        return raw

    def json(self, name: str) -> Any:
        try:
            return json.loads(self.raw(name))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ResultsError(f"bundle {self.name}: {name} is not JSON ({err})") from None


@dataclass(frozen=True)
class Bundle:
    name: str  # directory name under the bundles folder
    artifacts: Artifacts
    inputs: ReportInputs
    cases: list[dict[str, Any]]


def load_bundle(path: Path) -> Bundle:
    art = Artifacts(path)
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
    where = f" on {', '.join(devices)}" if devices else ""
    if summary["interpreter"]:
        return f"Triton's interpreter on the CPU (not GPU evidence){where}"
    return f"{bundle.inputs.backend}{where}"


def _forced_line(summary: Mapping[str, Any]) -> str:
    groups = summary["forced"]
    if not groups:
        return "- Forced rows: none in this matrix."
    by_value: dict[str, list[int]] = {}
    for g in groups:
        lost_held = by_value.setdefault(g["value"], [0, 0, 0])
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
    for kind in ("ordinary", "forced"):
        for side in SIDES:
            d = summary["diagnostics"][kind][side]
            parts.append(f"{kind} {side} exact {d['exact']}/{d['judged']}, minimal "
                         f"{d['minimal_yes']} (not minimal {d['minimal_no']}, undefined "
                         f"{d['minimal_undefined']})")
    oracle = summary["oracle"]
    ambiguous = oracle["forced"]["ambiguous"] + oracle["ordinary"]["ambiguous"]
    return ("- Diagnostics (never a stop): " + "; ".join(parts)
            + f". Oracle boundary ambiguous on {ambiguous} row(s).")


def bundle_section(bundle: Bundle, bundles_dir: Path) -> list[str]:
    s = summarize(bundle.inputs)
    reasons = ", ".join(f"`{r}`" for r in s["reasons"]) or "none"
    return [
        f"### {s['manifest']} (`{bundles_dir.as_posix()}/{bundle.name}/`)", "",
        f"- Verdict: **{s['verdict']}** over {s['rows']} rows ({s['rows_stopped']} stopped); "
        f"stop reasons: {reasons}.",
        f"- Backend: {_backend(bundle, s)}.",
        _forced_line(s), *_envelope_lines(s), _diagnostic_line(s), "",
    ]


def _row_inputs(bundle: Bundle, ids: set[str]) -> dict[tuple[str, str], tuple[int, str]]:
    """(case id, label) -> (row index, sha256 of that row's logits and p bytes)."""
    out: dict[tuple[str, str], tuple[int, str]] = {}
    for case in bundle.cases:
        if case["id"] not in ids:
            continue
        vocab = int(case["vocab"])
        logits, p = bundle.artifacts.raw(case["logits"]), bundle.artifacts.raw(case["p"])
        for i, row in enumerate(case["rows"]):
            digest = hashlib.sha256(logits[4 * vocab * i : 4 * vocab * (i + 1)]
                                    + p[4 * i : 4 * i + 4]).hexdigest()
            out[(case["id"], str(row["label"]))] = (i, digest)
    return out


def _kept(bundle: Bundle, side: str, case_id: str, row: int, vocab: int) -> frozenset[int] | None:
    name = output_name(side, case_id)
    if name not in bundle.artifacts.subjects:
        return None
    data = bundle.artifacts.raw(name)[4 * vocab * row : 4 * vocab * (row + 1)]
    neg_inf = b"\x00\x00\x80\xff"
    return frozenset(i for i in range(vocab) if data[4 * i : 4 * i + 4] != neg_inf)


def compare_section(cuda: Bundle, interp: Bundle) -> list[str]:
    """How CUDA and interpreter outputs compare on rows with identical captured bytes."""
    ids = {c["id"] for c in cuda.cases} & {c["id"] for c in interp.cases}
    a, b = _row_inputs(cuda, ids), _row_inputs(interp, ids)
    vocab = {c["id"]: int(c["vocab"]) for c in cuda.cases}
    shared = sorted(k for k in a.keys() & b.keys() if a[k][1] == b[k][1])
    title = f"### CUDA (`{cuda.name}`) against the interpreter (`{interp.name}`)"
    if not shared:
        return [title, "", "- No rows with identical captured bytes (same case id, label, "
                "logits and p) in both bundles.", ""]
    lines = [title, "",
             f"- {len(shared)} row(s) share case id, label and identical captured logits and "
             f"p bytes ({', '.join(sorted({k[0] for k in shared}))})."]
    for side in SIDES:
        same_count = same_set = compared = 0
        for key in shared:
            ka = _kept(cuda, side, key[0], a[key][0], vocab[key[0]])
            kb = _kept(interp, side, key[0], b[key][0], vocab[key[0]])
            if ka is None or kb is None:
                continue
            compared += 1
            same_count += len(ka) == len(kb)
            same_set += ka == kb
        lines.append(f"- {side}: same kept count on {same_count} of {compared}, identical kept "
                     f"set on {same_set} of {compared}.")
    return lines + [""]


def generate(bundles_dir: Path, display: Path | None = None) -> str:
    """The whole section, markers included."""
    paths = sorted(p for p in bundles_dir.glob("*") if p.is_dir() and (p / RECEIPT).is_file())
    if not paths:
        raise ResultsError(f"no bundle (a folder with {RECEIPT}) under {bundles_dir}")
    bundles = [load_bundle(p) for p in paths]
    shown = display if display is not None else bundles_dir
    lines = [BEGIN, "## Results", "",
             "Generated by `scripts/results_section.py` from the committed bundles' receipts "
             "and results; not typed by hand. `topp-gate verify` checks each bundle's "
             "signature and reruns its oracle and gate.", ""]
    for bundle in bundles:
        lines += bundle_section(bundle, shown)
    cuda = [b for b in bundles if not summarize(b.inputs)["interpreter"]]
    interp = [b for b in bundles if summarize(b.inputs)["interpreter"]]
    for c in cuda:
        for i in interp:
            lines += compare_section(c, i)
    if not (cuda and interp):
        lines += ["No CUDA and interpreter bundle pair is committed yet, so no cross-backend "
                  "comparison.", ""]
    return "\n".join(lines).rstrip("\n") + "\n" + END + "\n"


def split_readme(text: str) -> tuple[str, str, str]:
    """(before, section with markers, after); refuses missing or repeated markers."""
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise ResultsError(f"README must hold exactly one {BEGIN} ... {END} pair")
    start, stop = text.index(BEGIN), text.index(END) + len(END)
    after = text[stop:]
    if after.startswith("\n"):
        stop, after = stop + 1, after[1:]
    return text[:start], text[start:stop], after


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundles", type=Path, default=None,
                        help="folder of bundles (default: evidence/bundles in the repository)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", type=Path, metavar="README",
                      help="exit 1 when README's results section differs from the generated one")
    mode.add_argument("--write", type=Path, metavar="README",
                      help="replace README's results section with the generated one")
    args = parser.parse_args(argv)
    bundles = args.bundles if args.bundles is not None else ROOT / DEFAULT_BUNDLES
    display = DEFAULT_BUNDLES if args.bundles is None else args.bundles
    try:
        section = generate(bundles, display)
        if args.check is None and args.write is None:
            sys.stdout.write(section)
            return 0
        readme = args.check or args.write
        text = readme.read_text("utf-8")
        before, current, after = split_readme(text)
        if args.check is not None:
            if current != section:
                print(f"results_section: {readme} results section is out of date; run "
                      f"scripts/results_section.py --write {readme}", file=sys.stderr)
                return 1
            return 0
        readme.write_text(before + section + after, "utf-8")
        return 0
    except (ResultsError, HarnessError, OSError) as err:
        print(f"results_section: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
