"""``topp-gate sources fetch|export|show``: the pinned vLLM sources (wheels and trees)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..core.errors import EXIT_OK, UsageError
from ..core.names import SIDES
from ..core.terminal import printable
from . import flags


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "sources",
        help="fetch, export or show the pinned vLLM sources",
        description="The pinned vLLM wheels (stock and patched) and the kernel's import "
        "closure extracted from them into content-addressed trees. Every hash is checked "
        "against harness/data/pins.json; any mismatch is evidence_drift (exit 2).",
    )
    flags.cache(parser)
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    fetch = actions.add_parser("fetch", help="download the pinned wheels (pip, no "
                               "dependencies), verify them, extract the pinned trees")
    fetch.add_argument("--side", choices=(*SIDES, "all"), default="all")
    fetch.add_argument("--find-links", metavar="DIR",
                       help="also look for the wheels in DIR (passed to pip)")
    export = actions.add_parser("export", help="copy the verified trees to DIR, for "
                                "--sources DIR on a machine with no network")
    export.add_argument("dir", type=Path, metavar="DIR")
    flags.patch(export, "export stock plus this patch instead of the pinned patched side")
    export.add_argument("--pin", type=Path, action="append", metavar="PINFILE",
                        help="export this pin file's tree instead of the default pins "
                        "(repeatable; a missing wheel is fetched and verified)")
    pin = actions.add_parser(
        "pin", help="write a pin file for vllm==X.Y.Z (or flashinfer-python==X), a local "
        "wheel or a source tree",
        description="Resolve SPEC (vllm==X.Y.Z with pip, no dependencies; a local .whl; or "
        "a local vLLM source tree, whose git commit and clean flag are recorded), find the "
        "kernel's import closure and the compiled extensions it imports, hash every file, "
        "cache the tree, and write a schema-validated pin file to --out (never "
        "overwritten). A SPEC without the kernel file exits 2.")
    pin.add_argument("spec", metavar="SPEC")
    pin.add_argument("--out", type=Path, required=True, metavar="PINFILE")
    pin.add_argument("--family", metavar="ID",
                     help="the kernel family to pin (vllm-triton, vllm-pytorch, flashinfer; "
                     "default: the family of the release's distribution, else vllm-triton)")
    pin.set_defaults(handler=run_pin)
    show = actions.add_parser("show", help="the pins and whether each tree is present "
                              "and verified")
    flags.sources(show, "check an exported directory instead of the cache")
    flags.patch(show, "show stock plus this patch as the candidate side")
    flags.json_output(show)
    for action in (fetch, export, show):
        action.set_defaults(handler=run)
    for action in (fetch, export, pin, show):
        flags.cache(action, nested=True)  # 'sources fetch --cache DIR' as for other verbs
    parser.set_defaults(handler=run)


def run_pin(args: argparse.Namespace) -> int:
    from ..pins.pinning import pin

    result = pin(args.spec, args.out, cache=args.cache, family=args.family)
    what = "vLLM" if result.family == "vllm-triton" else result.family
    print(f"{what} {printable(result.version)}: {result.files} files, placeholders "
          f"{', '.join(result.placeholders) or 'none'}; tree cached at {printable(result.tree)}",
          file=sys.stderr)
    print(f"third-party packages imported: {printable(', '.join(result.third_party))}",
          file=sys.stderr)
    print(printable(result.path))
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    from ..core.errors import EvidenceDriftError, HarnessError
    from ..pins import sources

    pins = sources.load_pins()
    cache = sources.cache_root(args.cache)
    if args.action == "fetch":
        names = SIDES if args.side == "all" else (args.side,)
        for name in names:
            side = pins.side(name)
            print(f"{name}: vLLM {printable(side.version)}: fetching {printable(side.wheel)} "
                  "(pip shows progress)",
                  file=sys.stderr, flush=True)
            wheel = sources.fetch_wheel(side, cache, find_links=args.find_links)
            tree = sources.extract_tree(side, wheel, cache / "trees")
            print(f"{name}: vLLM {printable(side.version)}: wheel verified, "
                  f"{len(side.files)} files verified in {printable(tree)}")
        return EXIT_OK
    if args.action == "export" and args.pin:
        return _export_pins(args.pin, cache, args.dir)
    if args.action == "export":
        stock = pins.side("stock")
        trees = {"stock": sources.resolve_tree(stock, cache=cache)}
        if args.patch is not None:
            patched, trees["patched"] = sources.user_candidate(pins, args.patch, cache=cache)
        else:
            patched = pins.side("patched")
            trees["patched"] = sources.resolve_tree(patched, cache=cache)
        written = sources.export_trees((stock, patched), trees, args.dir)
        for side, tree in zip((stock, patched), written, strict=True):
            print(f"{side.name}: vLLM {printable(side.version)}: {len(side.files)} files "
                  f"verified in {printable(tree)}")
        return EXIT_OK
    if args.action == "show":
        report, drift = [], None
        sides = [pins.side("stock"), pins.side("patched")]
        if args.patch is not None:
            sides[1], _ = sources.user_candidate(pins, args.patch, cache=cache,
                                                 sources=args.sources)
        for side in sides:
            entry = side.describe()
            try:
                entry["tree"] = str(sources.resolve_tree(side, cache=cache,
                                                         sources=args.sources))
                entry["tree_status"] = "verified"
            except HarnessError as err:
                drift = drift or (err if isinstance(err, EvidenceDriftError) else None)
                entry["tree"] = None
                entry["tree_status"] = err.code
                entry["tree_error"] = err.detail
            report.append(entry)
        document = {"kernel_path": pins.kernel_path, "patch_sha256": pins.patch_sha256,
                    "sides": report}
        if args.json:
            print(json.dumps(document, indent=2))
        else:
            print(f"kernel {pins.kernel_path}; pinned patch sha256 {pins.patch_sha256}")
            for entry in report:
                status = entry["tree_status"]
                if status == "verified":
                    status = f"verified at {entry['tree']}"
                print(f"{entry['side']}: vLLM {printable(entry['version'])} kernel "
                      f"{entry['kernel_sha256'][:16]}… tree {entry['tree_sha256'][:16]}… "
                      f"{status}")
        if drift is not None:
            raise drift
        return EXIT_OK
    raise UsageError(f"unknown sources action {args.action!r}")


def _export_pins(pin_paths: list[Path], cache: Path, dest: Path) -> int:
    """Copy each pin file's verified tree to ``dest/<tree digest>`` (``--sources DIR``)."""
    from ..pins import sources
    from ..pins.pinfile import WHEEL, load_pin_file

    for path in pin_paths:
        side = load_pin_file(path).side("stock")
        if not (cache / "trees" / side.digest).exists() and side.origin is not None \
                and side.origin.get("kind") == WHEEL \
                and sources.verified_wheel(side, cache) is None:
            sources.fetch_wheel(side, cache)
        tree = sources.resolve_tree(side, cache=cache)
        (written,) = sources.export_trees((side,), {side.name: tree}, dest)
        what = "vLLM" if side.family == "vllm-triton" else side.family
        print(f"{printable(path)}: {what} {printable(side.version)}: {len(side.files)} files "
              f"verified in {printable(written)}")
    return EXIT_OK
