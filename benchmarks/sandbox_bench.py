#!/usr/bin/env python3
"""What the kernel children's sandbox costs: ``topp-gate pr`` on the newest interpreter PR
matrix, run alternately with the sandbox (the default) and with ``--unsandboxed``, in one
process, and the ratio of the medians.

    PYTHONPATH=. python3 benchmarks/sandbox_bench.py [--rounds N] [--backend B]

Each run is a whole ``pr`` as a contributor runs it (vLLM 0.33.0 as the base, a harmless
one-comment diff as the change, both sides run: ``--no-reuse``, one judging worker), with a
key made for the benchmark. The runs alternate (sandboxed first) so that a change in the
machine's load falls on both. Needs the ``gpu`` extra, bubblewrap and the pinned wheel
(``topp-gate sources fetch``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASE = ROOT / "evidence" / "pins" / "vllm-0.33.0.json"


def _diff(work: Path) -> Path:
    from harness.pins.pinfile import load_pin_file
    from harness.pins.sources import cache_root, kernel_diff, resolve_tree

    side = load_pin_file(BASE).side("stock")
    kernel = (resolve_tree(side, cache=cache_root()) / side.kernel_path).read_bytes()
    path = work / "comment.diff"
    path.write_bytes(kernel_diff(kernel, kernel + b"\n# a comment\n", side.kernel_path))
    return path


def _one(work: Path, key: Path, patch: Path, backend: str, sandboxed: bool, n: int) -> float:
    from harness.cli import main as cli

    args = ["pr", str(BASE), "--patch", str(patch), "--backend", backend, "--key", str(key),
            "--out", str(work / f"run-{n}"), "--no-reuse", "--workers", "1"]
    if not sandboxed:
        args.append("--unsandboxed")
    start = time.monotonic()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = cli(args)
    took = time.monotonic() - start
    if code != 0:
        raise SystemExit(f"run {n} ({'sandboxed' if sandboxed else 'unsandboxed'}) exited "
                         f"{code}; expected PASS")
    return took


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--backend", default="interpreter", choices=("interpreter", "cuda"))
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from harness.capture.signing import write_keypair
    from harness.kernels import sandbox

    print(f"machine: {platform.machine()}, {len(os.sched_getaffinity(0))} CPUs usable, "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"sandbox: {sandbox.probe().record()}")
    times: dict[bool, list[float]] = {True: [], False: []}
    with tempfile.TemporaryDirectory(prefix="sandbox-bench-") as tmp:
        work = Path(tmp)
        key, _, _ = write_keypair(work / "bench")
        patch = _diff(work)
        n = 0
        for _ in range(args.rounds):
            for sandboxed in (True, False):
                n += 1
                took = _one(work, key, patch, args.backend, sandboxed, n)
                times[sandboxed].append(took)
                print(f"run {n}: {'sandboxed  ' if sandboxed else 'unsandboxed'} {took:6.1f} s")
    inside, outside = (statistics.median(times[s]) for s in (True, False))
    print(f"median sandboxed {inside:.1f} s, unsandboxed {outside:.1f} s; "
          f"ratio sandboxed / unsandboxed: {inside / outside:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
