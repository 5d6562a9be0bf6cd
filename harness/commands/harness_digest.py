"""``topp-gate harness-digest [DIR]``: the trusted-core digest a receipt records."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..core.errors import EXIT_OK
from ..core.provenance import ALGORITHMS, CORE_TREE
from . import flags


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "harness-digest",
        help="print the trusted-core digest of a checkout or of this installation",
        description="Print the digest that receipts record as predicate.harness: sha256 over "
        "'<path> NUL <sha256 of file> LF' lines of harness/core/ (algorithm "
        f"{CORE_TREE}). DIR is the root of a topp-gate checkout (it holds harness/); "
        "without DIR, the installed package. Compare with a receipt to find the code "
        "that judged a bundle; --algorithm topp-gate/harness-tree/v1 recomputes the "
        "whole-package digest that receipts written before the core existed record.",
    )
    parser.add_argument("dir", nargs="?", type=Path, metavar="DIR",
                        help="root of a topp-gate checkout (default: the installed package)")
    parser.add_argument("--algorithm", choices=ALGORITHMS, default=CORE_TREE)
    flags.json_output(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..core.provenance import checkout_digest, installed_digest

    if args.dir is None:
        result = installed_digest(args.algorithm)
    else:
        result = checkout_digest(args.dir, args.algorithm)
    if args.json:
        print(json.dumps(result, sort_keys=True))
    else:
        print(f"{result['sha256']}  {result['algorithm']} ({result['files']} files)")
    return EXIT_OK
