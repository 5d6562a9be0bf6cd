#!/usr/bin/env python3
"""Generate docs/results.md's deployment table (issue 19) from the signed deployment bundles.

    .venv/bin/python scripts/deploy_table.py                  # print the section
    .venv/bin/python scripts/deploy_table.py --check docs/results.md  # exit 1 if it differs
    .venv/bin/python scripts/deploy_table.py --write docs/results.md  # replace it in place

Reads every bundle under ``evidence/deploy/bundles/*/`` (``--bundles DIR``) made from a
manifest under ``evidence/manifests/deploy/``, as the evidence model
(:func:`harness.present.model.verified_model`) of each: verified in this process first with
the signer's public key (``--pubkey``, default ``evidence/keys/topp-gate-evidence-3.pub``),
oracle and gate rerun included. A bundle that does not verify stops the script (exit 2).

One table row per release x workload (a manifest case): the release (the stock side; the
patched side is 0.33.0 in every deployment manifest), the workload, the path each side
proved (stock -> patched, from the receipt's ``paths``), the rows, the rows stopped and by
which reason, and the worst mass diagnostics of the release's side over the case's rows
(``stock_mass_outside``: probability mass, binary64, of kept tokens outside the oracle's
set; ``stock_mass_dropped``: of oracle tokens it dropped). The bundle's verdict heads each
release.

With no deployment bundle yet the section says so and ``--check`` checks only that the
file holds that same section (the markers ``<!-- deploy:begin -->`` and
``<!-- deploy:end -->``; nothing between them is typed by hand). A file without the
markers is bad input for ``--check`` and ``--write`` (exit 2), unless there are no bundles:
then there is nothing to check and the script says so (exit 0).

Exit codes: 0 ok, 1 the file's section differs (``--check``), 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.core.errors import HarnessError, SectionInputError  # noqa: E402
from harness.core.keys import load_public_key  # noqa: E402
from harness.core.terminal import markdown_cell, markdown_code, printable  # noqa: E402
from harness.present import sections  # noqa: E402
from harness.present.model import verified_model  # noqa: E402

BEGIN = sections.DEPLOY.begin
END = sections.DEPLOY.end
DEFAULT_BUNDLES = Path("evidence/deploy/bundles")
DEFAULT_PUBKEY = Path("evidence/keys/topp-gate-evidence-3.pub")
DEPLOY_PREFIX = "deploy-vllm-"
NO_BUNDLES = "No deployment bundle is committed yet: nothing to tabulate."


def _cell(text: Any) -> str:
    """Evidence text in a Markdown table cell, by the one escaper
    (:func:`harness.core.terminal.markdown_cell`): no control character, no pipe, no
    Markdown or HTML of the evidence's own."""
    return markdown_cell(text)


def _worst(values: Sequence[float | None]) -> str:
    found = [v for v in values if v is not None]
    return "-" if not found else f"{max(found):.3g}"


def bundle_rows(path: Path, public_key: Any) -> tuple[str, str, list[str]]:
    """(release, verdict, table lines) of one deployment bundle, from its evidence model
    (:func:`harness.present.model.verified_model`: verified in this process first)."""
    b = verified_model(path, public_key, "deploy")
    if not b.name.startswith(DEPLOY_PREFIX):
        raise SectionInputError(f"bundle {path.name}: not made from a deployment manifest")
    release = f"{_cell(b.sides['stock'].version)} vs {_cell(b.sides['patched'].version)}"
    verdict = (f"**{_cell(b.verdict)}** ({_cell(b.rows_stopped)} of "
               f"{_cell(b.rows_total)} rows stopped: "
               f"{', '.join(_cell(r) for r in b.reasons) or 'none'})")
    lines = []
    for case in b.cases:
        case_rows = [r for r in b.rows if r.case == case.id]
        shown = (f"{_cell(case.paths.get('stock') or 'unproven')} -> "
                 f"{_cell(case.paths.get('patched') or 'unproven')}")
        reasons = Counter(stop for r in case_rows for stop in r.stops)
        stopped = sum(1 for r in case_rows if r.stops)
        reason_text = ", ".join(f"{_cell(name)} {count}"
                                for name, count in sorted(reasons.items()))
        lines.append(
            f"| {release} | {_cell(case.id)} | {shown} | {len(case_rows)} "
            f"| {stopped} | {reason_text or '-'} "
            f"| {_worst([r.mass_outside['stock'] for r in case_rows])} "
            f"| {_worst([r.mass_dropped['stock'] for r in case_rows])} |")
    return release, verdict, lines


def generate(bundles: Path, public_key: Any | None) -> str:
    found = sorted(p for p in bundles.glob(f"{DEPLOY_PREFIX}*") if p.is_dir()) \
        if bundles.is_dir() else []
    lines = [BEGIN, "### Deployment matrix (issue 19)", ""]
    if not found:
        lines += [NO_BUNDLES, ""]
        return "\n".join(lines) + END + "\n"
    assert public_key is not None
    lines += ["Generated by `scripts/deploy_table.py` from the signed receipts (verified in "
              "CI first). Per release (stock) against vLLM 0.33.0 (patched) and workload: "
              "the path each side proved, rows stopped by reason, and the worst mass of the "
              "release's kept tokens outside the oracle's set and of oracle tokens it "
              "dropped (binary64).", ""]
    table = ["| release | workload | path (stock -> patched) | rows | stopped | reasons "
             "| worst mass outside | worst mass dropped |",
             "| --- | --- | --- | ---: | ---: | --- | ---: | ---: |"]
    verdicts = []
    for path in found:
        release, verdict, rows = bundle_rows(path, public_key)
        verdicts.append(f"- {release}: {verdict} ({markdown_code(path.name)})")
        table += rows
    lines += verdicts + [""] + table + [""]
    return "\n".join(lines) + END + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--bundles", type=Path, default=None,
                        help="folder of deployment bundles (default: evidence/deploy/bundles)")
    parser.add_argument("--pubkey", type=Path, default=None,
                        help="the bundles' signer's public key (default: "
                        "evidence/keys/topp-gate-evidence-3.pub)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", type=Path, metavar="FILE")
    mode.add_argument("--write", type=Path, metavar="FILE")
    args = parser.parse_args(argv)
    bundles = args.bundles if args.bundles is not None else ROOT / DEFAULT_BUNDLES
    try:
        has_bundles = bundles.is_dir() and any(
            p.is_dir() for p in bundles.glob(f"{DEPLOY_PREFIX}*"))
        public_key = load_public_key(args.pubkey if args.pubkey is not None
                                     else ROOT / DEFAULT_PUBKEY) if has_bundles else None
        section = generate(bundles, public_key)
        if args.check is None and args.write is None:
            sys.stdout.write(section)
            return 0
        readme = args.check or args.write
        text = readme.read_text("utf-8")
        if not has_bundles and not sections.holds(sections.DEPLOY, text):
            print(f"deploy_table: {NO_BUNDLES} ({readme} has no deployment section; nothing "
                  "checked)")
            return 0
        return sections.run_mode(sections.DEPLOY, section, check_path=args.check,
                                 write_path=args.write)
    except (HarnessError, OSError, KeyError, TypeError) as err:
        print(f"deploy_table: {printable(str(err))}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
