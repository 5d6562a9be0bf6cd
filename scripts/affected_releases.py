#!/usr/bin/env python3
"""Generate README.md's "Affected releases" section from the committed sweep bundles.

    .venv/bin/python scripts/affected_releases.py                  # print the section
    .venv/bin/python scripts/affected_releases.py --check README.md  # exit 1 if README differs
    .venv/bin/python scripts/affected_releases.py --write README.md  # replace it in place

Reads every bundle under ``evidence/sweep/bundles/*/`` (``--bundles DIR`` to change)
each verified in this process first with the signer's public key (``--pubkey``, default
``evidence/keys/topp-gate-evidence-2.pub``, the key that signed the sweep) through
:func:`harness.present.verified.verified_view` (the trusted core's verification, oracle and
gate rerun included); the rows file is then checked against both receipt digests before it
is read. A bundle that does not verify stops the script (exit 2).

One table row per bundle, in release order: the stock release, the dispatch path its
manifest required and whether the kernel evidence proved it, the forced rows on which
stock lost the forced token (and the same for the patched side), the gate's verdict and
reasons, and for a side whose kernel did not run (``kernel_crash``, ``timeout``) the
runner's one-line reason.

The README holds the section between ``<!-- affected:begin -->`` and
``<!-- affected:end -->``; nothing between the markers is typed by hand.

Exit codes: 0 ok (or README up to date), 1 README section differs (``--check``),
2 bad input (missing markers, unreadable or inconsistent bundle).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.core.bundle import MANIFEST, RECEIPT, ROWS  # noqa: E402
from harness.core.errors import HarnessError, SectionInputError  # noqa: E402
from harness.core.keys import load_public_key  # noqa: E402
from harness.core.names import FORCED, SPLIT  # noqa: E402
from harness.core.terminal import markdown_cell  # noqa: E402
from harness.core.verify import case_paths  # noqa: E402
from harness.present import sections  # noqa: E402
from harness.present.verified import verified_view  # noqa: E402

BEGIN = sections.AFFECTED.begin
END = sections.AFFECTED.end
LOST = ("forced_token_dropped",)


@dataclass(frozen=True)
class ReleaseRow:
    bundle: str
    stock: str
    patched: str
    dispatch: str
    proven: str
    forced_rows: int
    stock_lost: int
    patched_lost: int
    verdict: str
    reasons: tuple[str, ...]
    errors: tuple[str, ...]


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))


def _lost(row: Mapping[str, Any], side: str) -> bool:
    failures = row.get("diagnostics", {}).get(f"{side}_forced_failures", [])
    return any(name in failures for name in LOST)


def _proven(cases: Sequence[Mapping[str, Any]], dispatch: str) -> str:
    proven = [case_paths(dict(case))["stock"] == dispatch for case in cases]
    if all(proven):
        return "proven"
    return f"not proven on {proven.count(False)} of {len(proven)} cases"


def release_row(path: Path, public_key: Any) -> ReleaseRow:
    try:
        view = verified_view(path, public_key)
        manifest = json.loads(view.raw(MANIFEST))
        rows = json.loads(view.raw(ROWS))
    except (HarnessError, ValueError) as err:
        raise SectionInputError(f"bundle {path.name}: {err}") from None
    predicate = view.statement["predicate"]
    sides = predicate["hashes"]["sources"]
    declared = manifest["sources"]["sides"]["stock"].get("dispatch", SPLIT)
    forced = [row for row in rows if row.get("kind") == FORCED]
    results = predicate.get("environment", {}).get("side_results", {})
    errors = tuple(f"{side}: {result.get('status')}: {result.get('reason')}"
                   for side, result in sorted(results.items())
                   if result.get("status") != "ok")
    verdict = predicate["verdict"]
    return ReleaseRow(
        bundle=path.name, stock=str(sides["stock"]["version"]),
        patched=str(sides["patched"]["version"]), dispatch=str(declared),
        proven=_proven(predicate["cases"], str(declared)), forced_rows=len(forced),
        stock_lost=sum(_lost(row, "stock") for row in forced),
        patched_lost=sum(_lost(row, "patched") for row in forced),
        verdict=str(verdict["verdict"]), reasons=tuple(verdict.get("reasons", [])),
        errors=errors)


def _cell(texts: Sequence[str], joiner: str) -> str:
    """Evidence strings in one Markdown table cell, each escaped by the one escaper
    (:func:`harness.core.terminal.markdown_cell`: no control character, no cell break, no
    Markdown or HTML of the evidence's own)."""
    return joiner.join(markdown_cell(text) for text in texts) or "none"


def _lost_cell(lost: int, total: int, ran: bool) -> str:
    return f"{lost} of {total}" if ran else "did not run"


def generate(bundles_dir: Path, display: Path, *, public_key: Any) -> str:
    """The whole section, markers included."""
    paths = sorted(p for p in bundles_dir.glob("*") if p.is_dir() and (p / RECEIPT).is_file())
    lines = [BEGIN, "## Affected releases", "",
             f"Generated by `scripts/affected_releases.py` from the signed receipts of the "
             f"sweep bundles under `{display.as_posix()}/`; not typed by hand. Each row is "
             "one frozen manifest of `evidence/manifests/sweep/`: the release as stock, on "
             "the CUDA path it takes for batch <= 64, against the fixed release as patched. "
             "`topp-gate verify` checks each bundle's signature and reruns its oracle and "
             "gate.", ""]
    if not paths:
        lines += ["No sweep bundle is committed yet: the sweep manifests are frozen "
                  "(`evidence/manifests/sweep/`) and run on the H200 with "
                  "`scripts/device_sweep.sh`.", ""]
        return "\n".join(lines).rstrip("\n") + "\n" + END + "\n"
    rows = sorted((release_row(p, public_key) for p in paths),
                  key=lambda r: (_version_key(r.stock), r.bundle))
    lines += ["| stock release | path (stock) | forced token lost: stock | "
              "forced token lost: patched | verdict | reasons | kernel errors |",
              "|---|---|---|---|---|---|---|"]
    for row in rows:
        stock_ran = not any(e.startswith("stock:") for e in row.errors)
        patched_ran = not any(e.startswith("patched:") for e in row.errors)
        lines.append(
            f"| {markdown_cell(row.stock)} (vs {markdown_cell(row.patched)}) | "
            f"{markdown_cell(row.dispatch)}, {row.proven} | "
            f"{_lost_cell(row.stock_lost, row.forced_rows, stock_ran)} | "
            f"{_lost_cell(row.patched_lost, row.forced_rows, patched_ran)} | "
            f"{markdown_cell(row.verdict)} | {_cell(row.reasons, ', ')} | "
            f"{_cell(row.errors, '; ')} |")
    lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n" + END + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--bundles", type=Path, default=ROOT / "evidence" / "sweep" / "bundles")
    parser.add_argument("--pubkey", type=Path,
                        default=ROOT / "evidence" / "keys" / "topp-gate-evidence-2.pub")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--check", type=Path, metavar="README")
    action.add_argument("--write", type=Path, metavar="README")
    args = parser.parse_args(argv)
    try:
        public_key = load_public_key(args.pubkey)
        try:
            display = args.bundles.resolve().relative_to(ROOT)
        except ValueError:
            display = args.bundles
        section = generate(args.bundles, display, public_key=public_key)
        return sections.run_mode(sections.AFFECTED, section, check_path=args.check,
                                 write_path=args.write)
    except (HarnessError, OSError) as err:
        print(f"affected_releases: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
