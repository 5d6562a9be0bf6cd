#!/usr/bin/env python3
"""Make a mutation run's captured inputs two ways in one process, alternating: built from
the frozen manifest (``write_cases``, what every run did) and taken from the base run's
signed bundle (``copy_inputs``, what a mutant's run does now); print the times and the ratio.

    PYTHONPATH=. python3 benchmarks/reused_inputs_bench.py [RUN] [--pubkey PUB] [--rounds N]

RUN is a ``topp-gate mutate`` folder or a ``.tar.xz`` of one (default: the committed H200
pr-cuda-v4 part 3 archive, key 5; its base bundle holds pr-cuda-v4's 903 rows, 147 MB of
captured inputs). Each round builds, then copies, into fresh folders, and checks the two
sets of files are byte for byte equal; the minimum of each is printed.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "evidence" / "mutation" / "pr-cuda-v4-h200-20261203-part3.tar.xz"
PUBKEY = ROOT / "evidence" / "keys" / "topp-gate-evidence-5.pub"
MANIFEST = ROOT / "evidence" / "manifests" / "pr" / "pr-cuda-v4.json"


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*")
            if p.is_file()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("run", nargs="?", type=Path, default=RUN)
    parser.add_argument("--pubkey", type=Path, default=PUBKEY)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)

    sys.path.insert(0, str(ROOT))
    from harness.capture.cases import write_cases
    from harness.capture.reused_inputs import copy_inputs
    from harness.core.keys import load_public_key
    from harness.core.manifest import load_manifest
    from harness.mutation.mutate import mutation_folder

    manifest = load_manifest(MANIFEST)
    public = load_public_key(args.pubkey)
    built: list[float] = []
    copied: list[float] = []
    with mutation_folder(args.run) as run, tempfile.TemporaryDirectory() as scratch:
        base = run / "bundles" / "base"
        for n in range(args.rounds):
            b, c = Path(scratch) / f"built-{n}", Path(scratch) / f"copied-{n}"
            t = time.perf_counter()
            write_cases(manifest, b)
            built.append(time.perf_counter() - t)
            t = time.perf_counter()
            copy_inputs(base, public, manifest, c)
            copied.append(time.perf_counter() - t)
            if _files(b) != _files(c):
                print("the copied inputs differ from the built ones", file=sys.stderr)
                return 1
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}; {MANIFEST.name}, {len(manifest.cases)} cases")
    print(f"built   min {min(built):.2f} s  ({', '.join(f'{x:.2f}' for x in built)})")
    print(f"copied  min {min(copied):.2f} s  ({', '.join(f'{x:.2f}' for x in copied)})")
    print(f"ratio built / copied: {min(built) / min(copied):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
