"""``topp-gate verify DIR [--pubkey PUB] [--strict] [--frozen-manifest PATH]``: offline check."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..core.errors import EXIT_OK, EXIT_STOP
from ..core.limits import WORKERS_HELP
from ..core.terminal import printable
from .row_progress import RowProgress
from .signer import add_pubkey_argument, signer_key


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "verify",
        help="verify a bundle offline: signature, schema, digests, oracle and gate rerun",
        description="Verify bundle DIR on this machine, with no GPU and no network: the "
        "Ed25519 DSSE signature with PUB, the payload type, the receipt schema, every "
        "artifact's sha256, the manifest and case matrix, then rerun the binary64 oracle "
        "and the gate from the captured bytes and require identical per-row results and "
        "verdict. Exit 0 only for a verified PASS, 1 for a verified STOP (so 'verify && "
        "ship' never ships a STOP), 4 when verification fails, 2 on bad usage (including "
        "an unreadable --pubkey or --frozen-manifest).",
    )
    parser.add_argument("bundle", type=Path, metavar="DIR")
    add_pubkey_argument(parser)
    parser.add_argument("--strict", action="store_true",
                        help="also fail when the trusted core that judged the bundle (the "
                        "harness digest its receipt records) differs from this verifier's "
                        "harness/core/ (VERIFYING.md: check out the commit the bundle names)")
    parser.add_argument("--frozen-manifest", type=Path, metavar="PATH",
                        help="the committed manifest (frozen by its .sha256 sibling) or the "
                        ".sha256 file itself; the bundle's manifest must hash to it")
    parser.add_argument("--workers", type=int, metavar="N",
                        help="processes for the oracle rerun " + WORKERS_HELP)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..core.errors import UsageError
    from ..core.verify import describe_source, verify_bundle

    if args.workers is not None and args.workers < 1:
        raise UsageError("--workers must be at least 1")
    public_key = signer_key(args.pubkey, args.bundle)
    progress = RowProgress("verifying: oracle and gate rerun")
    result = verify_bundle(args.bundle, public_key, strict=args.strict,
                           frozen_manifest=args.frozen_manifest, workers=args.workers,
                           progress=progress.advance)
    progress.finish()
    v = result.verdict
    reasons = ", ".join(v["reasons"]) if v["reasons"] else "none"
    print(f"verified bundle {printable(result.path)}")
    print(f"  signature: Ed25519 DSSE, key id {result.keyid}")
    print(f"  artifacts: {result.artifacts}, every sha256 matches the signed receipt")
    frozen = ("matches the frozen hash given" if result.frozen_manifest else
              "matches the receipt (no --frozen-manifest given)")
    print(f"  manifest: sha256 {result.manifest_sha256}, {frozen}")
    if result.harness_matches:
        print(f"  harness code: {result.harness_algorithm} sha256 {result.harness_local}, "
              "same as this verifier")
    else:
        print(f"  harness code: DIFFERS ({result.harness_algorithm}): bundle "
              f"{result.harness_recorded}, this verifier {result.harness_local} "
              "(--strict makes this fatal)")
    print(f"  made from: {printable(describe_source(result.harness_source))}")
    processes = "1 process" if result.workers == 1 else f"{result.workers} processes"
    print(f"  rerun: {result.rows} rows of {result.cases} cases judged again on CPU "
          f"({processes}), identical to the receipt")
    print(f"  verdict: {v['verdict']} ({v['rows_stopped']} of {v['rows']} rows stopped; "
          f"reasons: {reasons})")
    return EXIT_OK if v["verdict"] == "PASS" else EXIT_STOP
