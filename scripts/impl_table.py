#!/usr/bin/env python3
"""Generate docs/implementations.md's implementation x workload table from the committed receipts.

    .venv/bin/python scripts/impl_table.py                    # print the table
    .venv/bin/python scripts/impl_table.py --check docs/implementations.md  # exit 1 if it differs
    .venv/bin/python scripts/impl_table.py --write docs/implementations.md  # replace it in place

Reads every bundle folder under ``evidence/impls/bundles/`` (``--bundles DIR``), plus vLLM
0.33.0's Triton bundle of the deployment matrix (:data:`BESIDE`: the same captured inputs as
the deployment-matrix implementation bundles, so the Triton paths sit beside them), whose line in
``evidence/verdicts.tsv`` names the key that signed it, through
the evidence model of each (:func:`harness.present.model.verified_model`): each bundle
verified in this process first (the trusted core's verification, oracle and gate rerun
included); a bundle that does not verify stops the script (exit 2). One row per bundle side
that is judged (patched),
with the stock side named: implementation (family, version, dispatch path), workload (the
manifest's cases), the rule set, the verdict, rows stopped per reason, and the worst mass
diagnostics (``patched_mass_outside``/``_mass_dropped``: the largest binary64 probability
mass of kept tokens outside the oracle's set, and of oracle tokens dropped). With no bundle
yet, the table says so.

docs/implementations.md holds it between ``<!-- impls:begin -->`` and ``<!-- impls:end -->``.
Exit codes: 0 ok (or the file up to date), 1 the file differs (``--check``), 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.core.errors import HarnessError  # noqa: E402
from harness.core.keys import load_public_key  # noqa: E402
from harness.core.terminal import markdown_cell, markdown_code, printable  # noqa: E402
from harness.present import sections  # noqa: E402
from harness.present.model import BundleModel, Row, verified_model  # noqa: E402

BEGIN = sections.IMPLS.begin
END = sections.IMPLS.end
BUNDLES = ROOT / "evidence/impls/bundles"
BESIDE = (ROOT / "evidence/deploy/bundles/deploy-vllm-0.33.0-cuda",)
TABLE = ROOT / "evidence/verdicts.tsv"
HEADER = ("| implementation (patched) | against (stock) | workload | rules | verdict | "
          "rows stopped (by reason) | worst mass outside | worst mass dropped |")


def _cell(text: object) -> str:
    """A cell composed here of evidence strings each escaped by the one escaper
    (:func:`harness.core.terminal.markdown_cell` / ``markdown_code``) and of this script's
    own Markdown; nothing left to escape (a second escape would double the backslashes)."""
    return str(text)


def _keys(table: Path) -> dict[str, str]:
    keys = {}
    for line in table.read_text("utf-8").splitlines():
        if line and not line.startswith("#"):
            path, pub, _ = line.split("\t")
            keys[path] = pub
    return keys


def _side(bundle: BundleModel, side: str) -> str:
    """Family, version and path; every path the side's cases take when they differ (a
    version 3 manifest's per-case ``paths``, e.g. FlashInfer's sampler of each batch)."""
    entry = bundle.sides[side]
    shown = " / ".join(markdown_code(path) for path in entry.declared or (entry.dispatch,))
    return f"{markdown_cell(entry.family)} {markdown_cell(entry.version)} {shown}"


def _workload(bundle: BundleModel) -> str:
    cases = bundle.workload
    vocabs = sorted({c.vocab for c in cases})
    kinds = sorted({markdown_cell(c.kind) for c in cases})
    return f"{len(cases)} cases ({', '.join(kinds)}; vocab {', '.join(map(str, vocabs))})"


def _worst(rows: Sequence[Row], masses: str) -> str:
    values = [(value, f"{markdown_cell(r.case)}[{markdown_cell(r.row)}]") for r in rows
              if (value := getattr(r, masses)["patched"]) is not None]
    if not values:
        return "n/a"
    value, where = max(values)
    return "0" if value == 0 else f"{value:.3g} at {where}"


def row_of(path: Path, pub: Path) -> tuple[str, str]:
    """The bundle's workload cell (to group rows by) and its table line, from its evidence
    model (:func:`harness.present.model.verified_model`: verified in this process first)."""
    b = verified_model(path, load_public_key(pub), "impls")
    reasons: Counter[str] = Counter()
    for row in b.rows:
        reasons.update(row.stops)
    stopped = sum(1 for row in b.rows if row.stops)
    detail = ", ".join(f"{markdown_cell(r)} {n}" for r, n in sorted(reasons.items())) or "none"
    workload = _workload(b)
    cells = [_side(b, "patched"), _side(b, "stock"), workload,
             markdown_code(b.rules), f"**{markdown_cell(b.verdict)}**",
             f"{stopped}/{len(b.rows)}: {detail}",
             _worst(b.rows, "mass_outside"), _worst(b.rows, "mass_dropped")]
    return workload, "| " + " | ".join(_cell(c) for c in cells) + " |" + f" <!-- {path.name} -->"


def generate(bundles: Path = BUNDLES, table: Path = TABLE,
             beside: Sequence[Path] = BESIDE) -> str:
    keys = _keys(table)
    lines = [BEGIN, HEADER, "|" + "---|" * 8]
    paths = sorted(p for p in bundles.glob("*") if p.is_dir()) if bundles.is_dir() else []
    paths += [p for p in beside if p.is_dir()]
    rows: list[tuple[str, str, str]] = []  # workload, bundle name, line
    for path in paths:
        rel = path.resolve().relative_to(ROOT).as_posix() if path.resolve().is_relative_to(
            ROOT) else str(path)
        if rel not in keys:
            raise SystemExit(f"impl_table: {rel} has no line in {table.name}")
        workload, line = row_of(path, ROOT / keys[rel])
        rows.append((workload, path.name, line))
    lines.extend(line for _, _, line in sorted(rows))  # one workload's rows side by side
    if not paths:
        lines.append("| (no implementation bundle committed yet) | | | | | | | |")
    lines.append(END)
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundles", type=Path, default=BUNDLES)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", type=Path, metavar="FILE")
    mode.add_argument("--write", type=Path, metavar="FILE")
    args = parser.parse_args(argv)
    try:
        section = generate(args.bundles)
        return sections.run_mode(sections.IMPLS, section, check_path=args.check,
                                 write_path=args.write)
    except (HarnessError, OSError, ValueError, KeyError) as err:
        print(f"impl_table: {printable(str(err))}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
