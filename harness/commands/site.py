"""``topp-gate site EVIDENCE_DIR --out DIR``: a static HTML site of the verified evidence."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from ..core.errors import EXIT_OK, EXIT_VERIFY, UsageError
from ..core.terminal import printable
from . import flags


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "site",
        help="build a static HTML site from the evidence, each bundle verified first",
        description="Verify every bundle and mutation run under EVIDENCE_DIR (the committed "
        "layout: bundles/, sweep/bundles/, deploy/bundles/, impls/bundles/, pr/, mutation/) "
        "and write a static site to DIR. Trusted keys: the built-in project keys (the "
        "repository's evidence/keys/) and each --pubkey PUB; nothing in EVIDENCE_DIR adds "
        "one. A bundle verifies with the trusted key whose key id is that of the key file "
        "EVIDENCE_DIR/verdicts.tsv names for it (a record only: a file there that is not a "
        "trusted key leaves the bundle refused), else with any trusted key. The site: "
        "index.html with the findings and a release x path x "
        "implementation grid coloured by verdict, one page per bundle and one per mutation "
        "run. A bundle that does not verify is shown as refused with its reason, never its "
        "claims. No script, no network: open DIR/index.html. One progress line per bundle "
        "on stderr.",
    )
    parser.add_argument("evidence", type=Path, metavar="EVIDENCE_DIR")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR",
                        help="folder to write the site into (created; must be empty if it "
                        "exists)")
    parser.add_argument("--pubkey", type=Path, action="append", default=[], metavar="PUB",
                        help="also trust this public key (repeatable); besides the built-in "
                        "project keys, only the keys given here are trusted")
    parser.add_argument("--no-mutation", action="store_true",
                        help="leave the mutation runs out (they re-verify every mutant's "
                        "bundle, the longest part of a build)")
    parser.add_argument("--check", action="store_true",
                        help="exit 4 (pages still written) unless every piece verified and the "
                        "bundle folders are exactly those EVIDENCE_DIR/verdicts.tsv names, "
                        "each verified with the trusted key its line names and with its "
                        "recorded verdict (CI runs this on the committed evidence)")
    flags.workers(parser, "verifying bundles in parallel (one bundle per process)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..present.build import build, discover
    from ..present.site import write_site

    out: Path = args.out
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"{printable(out)} exists and is not an empty folder: give a new "
                         "or empty one")
    if args.workers is not None and args.workers < 1:
        raise UsageError("--workers must be at least 1")
    extra = [_pem(p) for p in args.pubkey]
    if not args.evidence.is_dir():
        raise UsageError(f"no evidence folder at {printable(args.evidence)}")
    record = None
    if args.check:  # the record is read first: a bad one costs no verification
        from ..present.record import RECORD, read_record

        record = read_record(args.evidence / RECORD)
    start = time.monotonic()
    tasks = discover(args.evidence, mutations=not args.no_mutation, record=record)
    if not tasks:
        raise UsageError(f"no bundle or mutation run under {printable(args.evidence)}")
    print(f"site: verifying {len(tasks)} pieces of evidence", file=sys.stderr, flush=True)
    evidence = build(tasks, workers=args.workers, extra_keys=extra,
                     progress=lambda line: print(f"site: {line}", file=sys.stderr,
                                                 flush=True))
    from ..present.replays import replay_runs, replays_without_runs

    evidence.replays = replay_runs(args.evidence, [_key(pem) for pem in extra])
    evidence.replays_waiting = replays_without_runs(args.evidence)
    out.mkdir(parents=True, exist_ok=True)
    pages = write_site(evidence, out)
    refused = sum(1 for b in evidence.bundles if not hasattr(b, "verdict")) + sum(
        1 for m in evidence.mutations if not hasattr(m, "mutants"))
    print(f"site: wrote {len(pages)} pages to {printable(out)} in "
          f"{time.monotonic() - start:.0f} s ({refused} refused); open "
          f"{printable(out / 'index.html')}", file=sys.stderr)
    if record is not None:
        from ..present.record import RECORD, folders_without_receipt, problems

        found = folders_without_receipt(args.evidence) + problems(evidence, record)
        for line in found:
            print(f"site: --check: {line}", file=sys.stderr)
        if found:
            print(f"site: --check: {len(found)} problems against {RECORD}", file=sys.stderr)
            return EXIT_VERIFY
        print(f"site: --check: every piece verified; {len(record)} bundles, each with the "
              f"verdict {RECORD} records", file=sys.stderr)
    return EXIT_OK


def _key(pem: bytes) -> Any:
    from cryptography.hazmat.primitives import serialization

    return serialization.load_pem_public_key(pem)


def _pem(path: Path) -> bytes:
    from cryptography.hazmat.primitives import serialization

    from ..core.keys import load_public_key

    key = load_public_key(path)
    return key.public_bytes(serialization.Encoding.PEM,
                            serialization.PublicFormat.SubjectPublicKeyInfo)
