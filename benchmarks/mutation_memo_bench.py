#!/usr/bin/env python3
"""Check one multi-bundle mutation run twice in one process: every row judged afresh, then
with a fresh row memo (harness/mutation/row_memo.py), and print the ratio of the times.

    PYTHONPATH=. python3 benchmarks/mutation_memo_bench.py [RUN] [--pubkey PUB] [--workers N]

RUN is a ``topp-gate mutate`` folder or a ``.tar.xz`` of one (default: the committed
H200 pr-cuda-v4 part 2 archive, seven bundles of one run, key 5). Both passes run the same
check (:func:`harness.mutation.mutation_check.check_summary`) on the same extracted folder,
the uncached pass first (a disk cache it warms may favour the cached pass by the time it
takes to read the files, well under a second); the two summaries must be equal.
``--workers``: oracle-rerun processes per bundle (default 1: the ratio is then not blurred
by how busy the other core is).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "evidence" / "mutation" / "pr-cuda-v4-h200-20261203-part2.tar.xz"
PUBKEY = ROOT / "evidence" / "keys" / "topp-gate-evidence-5.pub"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", nargs="?", type=Path, default=RUN)
    parser.add_argument("--pubkey", type=Path, default=PUBKEY)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args(argv)

    sys.path.insert(0, str(ROOT))
    from harness.core.keys import load_public_key
    from harness.mutation.mutate import mutation_folder
    from harness.mutation.mutation_check import check_summary
    from harness.mutation.row_memo import RowMemo

    key = load_public_key(args.pubkey)
    print(f"machine: {platform.machine()}, {len(os.sched_getaffinity(0))} CPUs usable, "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"run: {args.run.relative_to(ROOT) if args.run.is_relative_to(ROOT) else args.run}"
          f", workers per bundle: {args.workers}")
    with mutation_folder(args.run) as folder:
        times, summaries = [], []
        memo = RowMemo()
        for label, row_memo in (("uncached (row_memo=None)", None),
                                ("cached (a fresh RowMemo)", memo)):
            start = time.perf_counter()
            summaries.append(check_summary(folder, key, roots=(ROOT,), workers=args.workers,
                                           row_memo=row_memo))
            times.append(time.perf_counter() - start)
            bundles = 1 + len(summaries[-1]["mutants"])
            print(f"{label}: {times[-1]:.1f} s for {bundles} bundles")
    if summaries[0] != summaries[1]:
        print("the two passes checked different summaries", file=sys.stderr)
        return 1
    print(f"rows judged afresh with the memo: {memo.misses}, recalled: {memo.hits}")
    print(f"ratio cached / uncached: {times[1] / times[0]:.2f} "
          f"({times[0] / times[1]:.2f}x faster)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
