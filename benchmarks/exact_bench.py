"""The exact-real diagnostics for every row of a committed bundle, against the binary64
oracle on the same rows, in the same run, with the same number of worker processes.

Rows are read once through ``harness.core.verify.open_bundle`` (digest-checked bytes). Then:
the binary64 oracle on every row (the baseline: what ``verify`` reruns, numpy path), the
exact-real counts of every row (``harness.diagnostics.exact.exact_rows``, started from the oracle's
counts as ``topp-gate exact`` does), and the whole ``topp-gate exact BUNDLE --json``
process (verification included). Goal: all 405 rows of the H200 bundle in at most 2
minutes on 2 cores.

    python benchmarks/exact_bench.py [--bundle DIR] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.core.f32 import decode  # noqa: E402
from harness.core.keys import load_public_key  # noqa: E402
from harness.core.oracle import numpy_available, reference  # noqa: E402
from harness.core.verify import open_bundle  # noqa: E402
from harness.diagnostics.exact import ExactCount, RowTask, exact_rows  # noqa: E402
from harness.diagnostics.exact_bundle import row_tasks  # noqa: E402

DEFAULT_BUNDLE = ROOT / "evidence" / "bundles" / "h200-forced-logit-gate-cuda-20261129"
PUB = ROOT / "evidence" / "keys" / "topp-gate-evidence.pub"


def oracle_count(task: RowTask) -> int:
    logits, p32, _start = task
    outcome = reference(decode(logits), p32, fast=numpy_available())
    return int(getattr(outcome, "count", getattr(outcome, "scan_count", 0)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bundle", type=Path, default=DEFAULT_BUNDLE)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    load = os.getloadavg()
    print(f"# {datetime.now(UTC).isoformat(timespec='seconds')} {platform.node()} "
          f"{platform.processor() or platform.machine()} python {platform.python_version()} "
          f"cpus {os.cpu_count()} workers {args.workers} load average before "
          f"{' '.join(f'{x:.2f}' for x in load)}")
    clock = time.perf_counter
    start = clock()
    tasks, _results = row_tasks(open_bundle(args.bundle, load_public_key(PUB)))
    read = clock() - start

    start = clock()
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        counts = list(pool.map(oracle_count, tasks, chunksize=1))
    binary64 = clock() - start

    start = clock()
    outcomes = exact_rows([(t[0], t[1], c) for t, c in zip(tasks, counts, strict=True)],
                          workers=args.workers)
    exact = clock() - start

    start = clock()
    done = subprocess.run([sys.executable, "-m", "harness", "exact", str(args.bundle),
                           "--pubkey", str(PUB), "--json", "--workers", str(args.workers)],
                          capture_output=True, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                          check=False)
    whole = clock() - start
    if done.returncode != 0:
        sys.exit(f"topp-gate exact exited {done.returncode}: {done.stderr.decode()[-400:]}")
    summary = json.loads(done.stdout.splitlines()[-1])["summary"]

    methods = Counter(f"{o.method}:{o.bits}" if isinstance(o, ExactCount) and o.bits
                      else getattr(o, "method", "undecided") for o in outcomes)
    differ = sum(isinstance(o, ExactCount) and o.count != c
                 for o, c in zip(outcomes, counts, strict=True))
    print("bundle,rows,read_s,binary64_oracle_s,exact_s,exact_over_binary64,"
          "topp_gate_exact_process_s,rows_binary64_differs,methods")
    print(f"{args.bundle.name},{len(tasks)},{read:.2f},{binary64:.2f},{exact:.2f},"
          f"{exact / binary64:.2f},{whole:.2f},{differ},"
          + " ".join(f"{k}={v}" for k, v in sorted(methods.items())))
    print(f"# topp-gate exact summary: {json.dumps(summary, sort_keys=True)}")


if __name__ == "__main__":
    main()
