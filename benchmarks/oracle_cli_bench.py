"""``topp-gate oracle`` (default path) against an uncertified numpy float64 nucleus, whole
process against whole process, on the same file of 24 rows of vocab 262144.

Both are fresh Python processes reading the same raw float32 file and writing the same
JSON lines (``{"row": i, "count": n, "kept": [...]}``) to a pipe this script drains. The
baseline is what a quick reference would do, with no certification: stable argsort, softmax,
cumsum and searchsorted in numpy float64. Each side runs ``--repeat`` times, alternating,
and the best time of each is compared (goal: oracle / baseline <= 1.5); ``--pure`` is timed
too, and must print the same bytes as the default path. The two outputs' counts are
compared too, and the rows where they differ are reported (an uncertified
float64 nucleus is not the seed's oracle).

    python benchmarks/oracle_cli_bench.py [--rows 24] [--vocab 262144] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

BASELINE = '''
import json, sys
import numpy as np
path, p, vocab = sys.argv[1], float(np.float32(float(sys.argv[2]))), int(sys.argv[3])
values = np.fromfile(path, dtype="<f4").astype(np.float64).reshape(-1, vocab)
out = sys.stdout
for i, row in enumerate(values):
    order = np.argsort(-row, kind="stable")
    w = np.exp(row[order] - row[order[0]])
    count = int(np.searchsorted(np.cumsum(w / w.sum()), p)) + 1
    out.write(json.dumps({"row": i, "count": count, "kept": order[:count].tolist()},
                         separators=(",", ":")) + "\\n")
'''


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, bytes]:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, env=env, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{argv[:3]} exited {done.returncode}: {done.stderr.decode()[-500:]}")
    return seconds, done.stdout


def counts(output: bytes) -> list[int]:
    return [json.loads(line)["count"] for line in output.splitlines()]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=24)
    parser.add_argument("--vocab", type=int, default=262144)
    parser.add_argument("--p", default="0.9")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    print(f"# {datetime.now(UTC).isoformat(timespec='seconds')} {platform.node()} "
          f"{platform.processor() or platform.machine()} python {platform.python_version()} "
          f"numpy {np.__version__} cpus {os.cpu_count()}")
    load = os.getloadavg()
    rng = np.random.default_rng(20261130)
    with tempfile.TemporaryDirectory() as tmp:
        logits = Path(tmp) / "logits.f32"
        rng.standard_normal((args.rows, args.vocab), dtype=np.float32).tofile(logits)
        script = Path(tmp) / "baseline.py"
        script.write_text(BASELINE, "utf-8")
        oracle = [sys.executable, "-m", "harness", "oracle", str(logits), "--p", args.p,
                  "--vocab", str(args.vocab), "--json"]
        base = [sys.executable, str(script), str(logits), args.p, str(args.vocab)]
        runs = (("baseline", base), ("oracle", oracle), ("pure", [*oracle, "--pure"]))
        best = {name: float("inf") for name, _ in runs}
        outputs: dict[str, bytes] = {}
        for _ in range(args.repeat):
            for name, argv in runs:
                seconds, outputs[name] = timed(argv, env)
                best[name] = min(best[name], seconds)
    if outputs["pure"] != outputs["oracle"]:
        sys.exit("the pure and default paths printed different output")
    ours, theirs = counts(outputs["oracle"]), counts(outputs["baseline"])
    differ = [i for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b]
    print(f"# load average before: {' '.join(f'{x:.2f}' for x in load)}")
    print("rows,vocab,repeat,baseline_s,oracle_default_s,oracle_pure_s,default_over_baseline,"
          "pure_over_baseline,rows_with_other_counts")
    print(f"{args.rows},{args.vocab},{args.repeat},{best['baseline']:.3f},"
          f"{best['oracle']:.3f},{best['pure']:.3f},{best['oracle'] / best['baseline']:.2f},"
          f"{best['pure'] / best['baseline']:.2f},{len(differ)}")


if __name__ == "__main__":
    main()
