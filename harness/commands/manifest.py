"""``topp-gate manifest new``: a frozen manifest from two pin files and a predeclared matrix."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..core.errors import EXIT_OK, UsageError
from ..core.names import SIDES
from ..core.terminal import printable


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "manifest",
        help="write a frozen manifest from two pin files and a matrix",
        description="Frozen manifests (version 2): each side named by its pin file and "
        "sha256, an optional patch on one side, the dispatch path each side must take.",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    new = actions.add_parser(
        "new", help="write M.json and M.json.sha256 (never overwritten)",
        description="Write a version 2 manifest from --stock and --patched pin files "
        "('topp-gate sources pin') and a matrix: a predeclared one (forced-logit, smoke, "
        "sweep, forced-interpreter) or a matrix FILE. Each side's dispatch path is split "
        "when its kernel defines the split pipeline, else single (read from the cached "
        "tree), unless given. --patch DIFF --on SIDE freezes a unified diff of the kernel "
        "file on that side. The manifest is frozen at once (M.json.sha256).")
    new.add_argument("--stock", type=Path, required=True, metavar="PIN")
    new.add_argument("--patched", type=Path, required=True, metavar="PIN")
    new.add_argument("--patch", type=Path, metavar="DIFF",
                     help="unified diff of the kernel file, applied exactly on --on's side")
    new.add_argument("--on", choices=SIDES, default=None,
                     help="the side --patch applies to (required with --patch)")
    new.add_argument("--matrix", required=True, metavar="NAME|FILE")
    new.add_argument("--stock-path", default=None, metavar="PATH",
                     help="the stock side's dispatch path, one of its family's (default: "
                     "from its kernel, or the family's default)")
    new.add_argument("--patched-path", default=None, metavar="PATH",
                     help="the patched side's dispatch path (default: from its kernel)")
    new.add_argument("--cache", type=Path, default=None, metavar="DIR",
                     help="wheel and tree cache (default: $TOPP_GATE_CACHE or "
                     "~/.cache/topp-gate)")
    new.add_argument("--out", type=Path, required=True, metavar="M.json")
    new.set_defaults(handler=run)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..capture.manifest_new import SideSpec, new_manifest

    if (args.patch is None) != (args.on is None):
        raise UsageError("--patch DIFF and --on SIDE go together")
    sides = {
        "stock": SideSpec(args.stock, args.stock_path,
                          args.patch if args.on == "stock" else None),
        "patched": SideSpec(args.patched, args.patched_path,
                            args.patch if args.on == "patched" else None),
    }
    out = new_manifest(sides, args.matrix, args.out, cache=args.cache)
    print(printable(out))
    print(printable(out.with_name(out.name + ".sha256")))
    return EXIT_OK
