"""``topp-gate manifest new``: a frozen manifest from two pin files and a predeclared matrix."""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import families
from ..core.errors import EXIT_OK, UsageError
from ..core.names import SIDES
from ..core.terminal import printable
from . import flags


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "manifest",
        help="write a frozen manifest from two pin files and a matrix",
        description="Frozen manifests (version 3): each side named by its pin file and "
        "sha256 with its kernel family, an optional patch on one side, the dispatch path "
        "each side (and each traffic case) must take, the rule set that judges the rows.",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    from ..capture.manifest_new import matrix_rules

    predeclared = matrix_rules()
    listed = ", ".join(f"{name} ({rules})" for name, rules in predeclared.items())
    new = actions.add_parser(
        "new", help="write M.json and M.json.sha256 (never overwritten)",
        description="Write a version 3 manifest from --stock and --patched pin files "
        "('topp-gate sources pin') and a matrix: a predeclared one, each with the rule set "
        f"it freezes ({listed}), or a matrix FILE. Each side's dispatch path, "
        "and each traffic case's where it differs, is the side's kernel family's guess "
        "from its kernel source (vllm-triton: split when the kernel defines the split "
        "pipeline, else single; single-topk or mixed for top-k rows; single above batch "
        "64), read from the cached tree, unless given (a given path holds for every case "
        "of that side). --patch DIFF --on SIDE freezes a unified diff of one file of that "
        "side's pinned set (the kernel file, or another such as a FlashInfer CUDA header) "
        "on that side. The rule set is the one the matrix predeclares (the pr-* matrices: "
        "a regression rule set), else serve/v1 when the matrix has traffic cases, else "
        "seed/v2, unless --rules. The manifest is frozen at once (M.json.sha256).")
    new.add_argument("--stock", type=Path, required=True, metavar="PIN")
    new.add_argument("--patched", type=Path, required=True, metavar="PIN")
    flags.patch(new, "unified diff of one pinned file (the kernel file or another), "
                "applied exactly on --on's side")
    new.add_argument("--on", choices=SIDES, default=None,
                     help="the side --patch applies to (required with --patch)")
    new.add_argument("--matrix", required=True, metavar="NAME|FILE")
    paths = ", ".join(families.get().dispatch_paths)
    new.add_argument("--stock-path", default=None, metavar="PATH",
                     help="the stock side's dispatch path, one its pin's family declares "
                     f"(vllm-triton: {paths}; default: from its kernel)")
    new.add_argument("--patched-path", default=None, metavar="PATH",
                     help="the patched side's dispatch path (default: from its kernel)")
    new.add_argument("--rules", default=None, metavar="ID",
                     help="the rule set judging every row (default: the one the matrix "
                     "predeclares, listed above; else serve/v1 with traffic cases, else "
                     "seed/v2); a matrix's predeclared rule set cannot be overridden")
    flags.cache(new)
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
    out = new_manifest(sides, args.matrix, args.out, cache=args.cache, rules=args.rules)
    print(printable(out))
    print(printable(out.with_name(out.name + ".sha256")))
    return EXIT_OK
