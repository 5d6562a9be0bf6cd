"""Per-row oracle time against an uncertified numpy float64 baseline, same rows, same process.

The baseline is what a quick reference would do: sort, softmax, cumsum, searchsorted, in
numpy float64, with no certification. The oracle is timed on its pure-Python path and on
its numpy fast path (bit-identical by test). Prints one line per vocabulary with the
ratios; the issue's target is fast-path / baseline <= 2 at 262144 on one core.

    python benchmarks/oracle_bench.py [--rows N] [--repeat R]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from datetime import UTC, datetime

import numpy as np

from harness.core.oracle import Certified, reference


def baseline(values: np.ndarray, p: float) -> int:
    order = np.argsort(-values, kind="stable")
    x = values[order].astype(np.float64)
    w = np.exp(x - x[0])
    probs = w / w.sum()
    return int(np.searchsorted(np.cumsum(probs), p)) + 1


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    print(f"# {datetime.now(UTC).isoformat(timespec='seconds')} {platform.node()} "
          f"{platform.processor() or platform.machine()} python {platform.python_version()} "
          f"numpy {np.__version__} cpus {os.cpu_count()} (single-threaded timings)")
    print("vocab,rows,baseline_ms,oracle_pure_ms,oracle_fast_ms,pure_over_baseline,"
          "fast_over_baseline,mean_count")
    rng = np.random.default_rng(20261129)
    for vocab in (32000, 128256, 262144):
        totals = {"base": 0.0, "pure": 0.0, "fast": 0.0}
        counts = []
        for _ in range(args.rows):
            row32 = rng.standard_normal(vocab, dtype=np.float32)
            p32 = float(np.float32(rng.uniform(0.1, 1.0)))
            values = row32.astype(np.float64)
            as_list = values.tolist()
            out = reference(as_list, p32)
            assert isinstance(out, Certified)
            counts.append(out.count)
            totals["base"] += best_of(lambda: baseline(values, p32), args.repeat)
            totals["pure"] += best_of(lambda: reference(as_list, p32), args.repeat)
            totals["fast"] += best_of(lambda: reference(as_list, p32, fast=True), args.repeat)
        ms = {k: 1000 * v / args.rows for k, v in totals.items()}
        print(f"{vocab},{args.rows},{ms['base']:.2f},{ms['pure']:.2f},{ms['fast']:.2f},"
              f"{ms['pure'] / ms['base']:.2f},{ms['fast'] / ms['base']:.2f},"
              f"{sum(counts) / len(counts):.0f}")


if __name__ == "__main__":
    main()
