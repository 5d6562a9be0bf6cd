#!/usr/bin/env python3
"""Verify a committed bundle, whole process against whole process: `topp-gate verify` over
`sha256sum` of the same bundle's files, in the same run.

    python3 benchmarks/verify_bench.py [--python .venv-verify/bin/python] [--repeats 3]
                                       [--bundle DIR --pubkey PUB --frozen-manifest M]

`--python` names the interpreter whose installation verifies (default: this one); use the
base install that VERIFYING.md names (`pip install .`). Each command runs `--repeats` times,
alternating, and the medians are compared. The goal for the committed H200 bundle is at
most 10 s on two cores; the ratio says how far verification is from merely reading and
hashing every byte once.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUNDLE = ROOT / "evidence" / "bundles" / "h200-forced-logit-gate-cuda-20261129"
PUBKEY = ROOT / "evidence" / "keys" / "topp-gate-evidence.pub"
MANIFEST = ROOT / "evidence" / "manifests" / "h200-forced-logit-gate.json"
GOAL_S = 10.0


def _files(bundle: Path) -> list[str]:
    return sorted(str(p) for p in bundle.rglob("*") if p.is_file() and not p.is_symlink())


def _timed(command: list[str]) -> tuple[float, int]:
    start = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          cwd=ROOT, check=False)
    return time.perf_counter() - start, done.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--bundle", type=Path, default=BUNDLE)
    parser.add_argument("--pubkey", type=Path, default=PUBKEY)
    parser.add_argument("--frozen-manifest", type=Path, default=MANIFEST)
    parser.add_argument("--goal", type=float, default=GOAL_S,
                        help="seconds the verification should take at most (default 10, the "
                        "H200 bundle's goal; issue 19 sets 30 for the largest deployment bundle)")
    args = parser.parse_args(argv)

    files = _files(args.bundle)
    size = sum(os.path.getsize(f) for f in files)
    hashing = ["sha256sum", *files]
    args.bundle = args.bundle.resolve()
    verify = [args.python, "-m", "harness", "verify", str(args.bundle), "--pubkey",
              str(args.pubkey), "--frozen-manifest", str(args.frozen_manifest)]
    has_numpy = subprocess.run([args.python, "-c", "import numpy"], capture_output=True,
                               check=False).returncode == 0
    base, checked = [], []
    codes = set()
    for _ in range(args.repeats):
        base.append(_timed(hashing)[0])
        seconds, code = _timed(verify)
        checked.append(seconds)
        codes.add(code)
    b, v = statistics.median(base), statistics.median(checked)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"# python3 benchmarks/verify_bench.py --python {args.python} "
          f"--repeats {args.repeats}")
    print(f"machine: {platform.machine()}, {cpus} CPUs usable, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"bundle: {args.bundle} ({len(files)} files, {size} bytes on disk)")
    print(f"verifier install: {args.python} (numpy {'present' if has_numpy else 'ABSENT'})")
    print(f"sha256sum of the bundle's files: median {b:.2f} s of {args.repeats}")
    print(f"topp-gate verify (exit codes {sorted(codes)}): median {v:.2f} s of {args.repeats} "
          f"({', '.join(f'{x:.2f}' for x in checked)})")
    print(f"ratio verify / sha256sum: {v / b:.1f}x")
    print(f"goal: at most {args.goal:.0f} s: {'met' if v <= args.goal else 'MISSED'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
