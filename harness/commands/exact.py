"""``topp-gate exact BUNDLE [--json] [--pubkey PUB]``: exact-real counts beside a verified
bundle's binary64 and kernel counts. Derived, not attested; never changes a verdict."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import EXIT_OK, UsageError
from ..core.names import FORCED, SIDES
from ..core.terminal import printable
from . import flags
from .row_progress import RowProgress
from .signer import add_pubkey_argument, signer_key

if TYPE_CHECKING:
    from ..core.verify import Verified


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "exact",
        help="exact-real nucleus counts of a verified bundle's rows (a diagnostic)",
        description="Verify bundle DIR as 'topp-gate verify' does, then compute every row's "
        "exact-real nucleus count (exact rational coefficients and ball arithmetic) beside "
        "its binary64 oracle count and both kernels' kept counts, and flag the rows where "
        "binary64 and exact-real differ or a kernel under- or over-keeps in exact "
        "arithmetic. Derived, not attested: nothing is written into the bundle and no "
        "verdict changes. Exit 0 when it ran (whatever it found), 2 on usage or without "
        "the exact extra, 4 when the bundle does not verify.",
    )
    parser.add_argument("bundle", type=Path, metavar="DIR")
    add_pubkey_argument(parser)
    flags.json_output(parser, "one JSON object per row, then one summary object")
    flags.workers(parser, "the verification rerun and the exact counts")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..core.errors import VerificationError
    from ..core.limits import workers as worker_count
    from ..core.verify import open_bundle, verify_bundle
    from ..diagnostics.exact import require_exact
    from ..diagnostics.exact_bundle import bundle_exact, summary

    require_exact()
    if args.workers is not None and args.workers < 1:
        raise UsageError("--workers must be at least 1")
    workers = worker_count(args.workers)
    public_key = signer_key(args.pubkey, args.bundle, say=not args.json)
    verified = verify_bundle(args.bundle, public_key, workers=workers,
                             progress=RowProgress("verifying: oracle and gate rerun").advance)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    view = open_bundle(args.bundle, public_key)
    if view.payload_sha256 != verified.payload_sha256:  # the same signed statement, so
        # every artifact the view reads must have the digest the verified run checked
        raise VerificationError("the bundle changed between verification and this read")
    progress = RowProgress("exact-real counts")
    rows = bundle_exact(view, workers=workers, progress=progress.advance,
                        on_rows=progress.start)
    records = [r.to_json() for r in rows]
    if args.json:
        for record in records:
            print(json.dumps(record, separators=(",", ":")))
        print(json.dumps({"summary": summary(rows)}, separators=(",", ":")))
        return EXIT_OK
    _print_text(verified, records)
    return EXIT_OK


def _unstopped_flagged(record: dict[str, Any]) -> bool:
    """A row that did not stop but that binary64 or (ordinary rows) a kernel gets wrong in
    exact arithmetic; forced rows' kernel keeps are the reproduced defect, summarized."""
    if record.get("stops"):
        return False
    if record.get("binary64_vs_exact") != "agree":
        return True
    return record.get("kind") != FORCED and any(
        record.get(f"{side}_vs_exact") in ("under_keep", "over_keep") for side in SIDES)


def _print_text(verified: Verified, records: list[dict[str, Any]]) -> None:
    from ..diagnostics.exact_report import exact_cell, exact_flags, exact_lines

    v = verified.verdict
    print(f"verified bundle {printable(verified.path)}: verdict {v['verdict']} "
          f"({v['rows_stopped']} of {v['rows']} rows stopped)")
    print()
    for line in exact_lines(records):
        print(line)
    others = [r for r in records if _unstopped_flagged(r)]
    if others:
        print()
        print(f"Rows that did not stop but differ from the exact-real count ({len(others)}):")
        for r in others:
            print(f"- {r.get('case')}[{r.get('row')}]: binary64 {r.get('binary64_count')}, "
                  f"exact-real {exact_cell(r)}, stock {r.get('stock_kept')}, patched "
                  f"{r.get('patched_kept')}: {exact_flags(r)}")
