#!/usr/bin/env python3
"""Regenerate harness/data/pins.json's file lists from the verified vLLM wheels.

For each side it fetches (or reuses) the pinned wheel, checks its sha256, and computes the
kernel module's import closure by static analysis (``ast``) of the wheel's Python files
(``harness.pins.closure``, shared with ``topp-gate sources pin``):

* roots: the kernel module; ``vllm.platforms.cuda`` and ``vllm.platforms.cpu`` (vLLM picks
  its platform class from a qualified-name string, which static analysis cannot follow);
  ``vllm.third_party.pynvml`` (imported inside ``cuda_platform_plugin`` while vLLM detects
  CUDA);
* every import at module level of a module in the closure, including those under ``try``
  and ``if``, but not those under ``if TYPE_CHECKING:`` and not those inside function
  bodies (vLLM imports its whole config and model stack lazily in functions that the split
  top-p path never calls; following them would pull in 5 MB and dozens of packages). A
  module the closure misses cannot be imported from the tree, so a miss fails closed;
* every parent package's ``__init__.py`` and the wheel's ``.dist-info/METADATA`` (vLLM reads
  its own version to detect the platform).

Compiled extensions (``.so`` files) are never extracted. Those imported at module level by
the closure are listed per side as ``placeholders``: the kernel child installs an empty
module for exactly those names, and records that it did.

It also prints the third-party packages the closure imports at module level, and records
``patch_sha256``: sha256 of ``harness.pins.sources.kernel_diff(stock kernel, patched kernel)``.

Usage: python scripts/pin_sources.py [--cache DIR] [--check]
  --check: exit 1 if the committed pins.json differs from what would be written.
"""

from __future__ import annotations

import argparse
import json
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.core.digest import sha256_hex  # noqa: E402
from harness.core.names import SIDES  # noqa: E402
from harness.pins import sources  # noqa: E402
from harness.pins.closure import closure as kernel_closure  # noqa: E402

PINS = REPO / "harness" / "data" / "pins.json"


def closure(archive: zipfile.ZipFile) -> tuple[set[str], set[str], dict[str, set[str]]]:
    """(python files, compiled modules imported, third-party top-level imports -> importers)."""
    found = kernel_closure(archive.namelist(), archive.read)
    return (set(found.files), set(found.placeholders),
            {top: set(mods) for top, mods in found.third_party.items()})


def pin_side(side: sources.Side, cache: Path) -> tuple[dict[str, object], dict[str, set[str]]]:
    wheel = sources.fetch_wheel(side, cache)
    with zipfile.ZipFile(wheel) as archive:
        files, placeholders, third = closure(archive)
        metadata = f"vllm-{side.version}.dist-info/METADATA"
        files.add(metadata)
        hashes = {path: sha256_hex(archive.read(path)) for path in sorted(files)}
    if hashes.get(side.kernel_path) != side.kernel_sha256:
        raise SystemExit(f"{side.name}: kernel sha256 in the wheel differs from pins.json")
    entry: dict[str, object] = {
        "version": side.version,
        "wheel": side.wheel,
        "wheel_sha256": side.wheel_sha256,
        "kernel_sha256": side.kernel_sha256,
        "tree_sha256": sources.tree_digest(hashes),
        "placeholders": sorted(placeholders),
        "files": hashes,
    }
    return entry, third


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=None)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    cache = sources.cache_root(args.cache)
    old_text = PINS.read_text()
    raw = json.loads(old_text)
    pins = sources.parse_pins(raw)
    new = dict(raw)
    kernels = {}
    for name in SIDES:
        side = pins.side(name)
        entry, third = pin_side(side, cache)
        new["sides"][name] = entry
        with zipfile.ZipFile(sources.fetch_wheel(side, cache)) as archive:
            kernels[name] = archive.read(side.kernel_path)
        print(f"{name}: vLLM {side.version}: {len(entry['files'])} files "  # type: ignore[arg-type]
              f"tree {entry['tree_sha256']}", file=sys.stderr)
        print(f"  placeholders: {', '.join(entry['placeholders'])}", file=sys.stderr)  # type: ignore[arg-type]
        for top, importers in sorted(third.items()):
            print(f"  third-party {top}: imported by {', '.join(sorted(importers)[:3])}",
                  file=sys.stderr)
    diff = sources.kernel_diff(kernels["stock"], kernels["patched"], pins.kernel_path)
    new["patch_sha256"] = sha256_hex(diff)
    new["patch_format"] = (
        "sha256 of harness.sources.kernel_diff(stock, patched): difflib.unified_diff, "
        "labels a/<kernel_path> b/<kernel_path>, no dates, 3 context lines, UTF-8"
    )
    text = json.dumps(new, indent=2) + "\n"
    sources.parse_pins(json.loads(text))  # the result must load
    if args.check:
        if text != old_text:
            print("pins.json is out of date; run scripts/pin_sources.py", file=sys.stderr)
            return 1
        return 0
    PINS.write_text(text)
    print(f"wrote {PINS.relative_to(REPO)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
