#!/usr/bin/env python3
"""The kernel suite for one run on an NVIDIA GPU with no network (issue 3, "On the GPU").

Needs only: Python 3.11+, torch, triton, numpy, this repository, the exported pinned trees
(``topp-gate sources export DIR``, passed as ``--sources DIR``) and the third-party
packages vLLM's import closure needs (packaging, psutil, pyzmq, regex, urllib3; put them on
PYTHONPATH if the machine lacks them). No jsonschema, cryptography or rfc8785.

It builds a few small cases itself from seeded CPU torch generators (forced rows at vocab
32000 and 128256, a forced-value sweep, ordinary randn rows), runs stock and patched with
the ``cuda`` backend, and runs a subset with the ``interpreter`` backend (Triton's
interpreter on CPU, SM count 132, in parallel with the CUDA runs) on the very same bytes.
It prints and writes ``suite.json``: versions, split counts, kept counts, timings, the
binary64 oracle's count for ordinary rows, and a CUDA-vs-interpreter side-by-side.

Usage:
  python scripts/gpu_kernel_suite.py --sources DIR --out DIR [--repeats 20]
      [--interpreter-sm 132] [--no-interpreter] [--no-cuda] [--keep-bytes]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import importlib.util
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.core.digest import sha256_file  # noqa: E402
from harness.core.errors import HarnessError  # noqa: E402
from harness.core.names import FORCED, ORDINARY  # noqa: E402
from harness.kernels.runner import run_side  # noqa: E402
from harness.pins import sources  # noqa: E402

CLOSURE_PACKAGES = {"packaging": "packaging", "psutil": "psutil", "zmq": "pyzmq",
                    "regex": "regex", "urllib3": "urllib3", "numpy": "numpy"}
FORCED_GRID = [(1e30, p, i) for p in (0.5, 0.9, 0.999) for i in ("first", "last")]
SWEEP = [(v, 0.9, "first") for v in (1e4, 1e6, 1e10, 1e20, 1e30)]


def _f32(torch: Any, rows: Any) -> bytes:
    return rows.contiguous().numpy().astype("<f4").tobytes()


def build_cases(root: Path) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """Cases (index entries) and, per case, row descriptions. Deterministic CPU generators."""
    import torch

    inputs = root / "inputs"
    inputs.mkdir(parents=True)
    cases: list[dict[str, Any]] = []
    rows_info: dict[str, list[dict[str, Any]]] = {}

    def add(case_id: str, kind: str, logits: Any, p: Any, rows: list[dict[str, Any]]) -> None:
        batch, vocab = logits.shape
        (inputs / f"{case_id}.logits.f32").write_bytes(_f32(torch, logits))
        (inputs / f"{case_id}.p.f32").write_bytes(_f32(torch, p.to(torch.float32)))
        cases.append({"id": case_id, "kind": kind, "batch": batch, "vocab": vocab,
                      "logits": f"inputs/{case_id}.logits.f32",
                      "p": f"inputs/{case_id}.p.f32", "rows": rows})
        rows_info[case_id] = rows

    def forced(case_id: str, vocab: int, seed: int,
               grid: list[tuple[float, float, str]]) -> None:
        background = torch.randn(vocab, generator=torch.Generator().manual_seed(seed))
        logits = background.repeat(len(grid), 1)
        rows = []
        for r, (value, p, where) in enumerate(grid):
            token = 0 if where == "first" else vocab - 1
            logits[r, token] = value
            rows.append({"judge": FORCED, "forced_id": token,
                         "label": f"value={value:g} p={p} id={token}"})
        p_tensor = torch.tensor([g[1] for g in grid], dtype=torch.float32)
        add(case_id, FORCED, logits, p_tensor, rows)

    def ordinary(case_id: str, batch: int, vocab: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        logits = torch.randn(batch, vocab, generator=g)
        p = torch.rand(batch, generator=g) * 0.9 + 0.1
        add(case_id, ORDINARY, logits, p,
            [{"judge": ORDINARY, "label": f"randn seed={seed} row={r}"} for r in range(batch)])

    forced("forced-v32000", 32000, 1, FORCED_GRID)
    forced("forced-v128256", 128256, 2, FORCED_GRID)
    forced("sweep-v32000", 32000, 1, SWEEP)
    ordinary("ordinary-v32000-b8", 8, 32000, 3)
    ordinary("ordinary-v128256-b4", 4, 128256, 4)
    ordinary("ordinary-v32000-b64", 64, 32000, 5)
    forced("interp-forced-v32000", 32000, 6, [(1e30, 0.9, "first"), (1e30, 0.5, "last")])
    ordinary("interp-ordinary-v32000", 2, 32000, 7)
    return cases, rows_info


def write_index(path: Path, cases: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"schema": "topp-gate/cases/v1", "cases": cases}, indent=2))
    return path


def oracle_counts(root: Path, case: dict[str, Any]) -> list[int | None]:
    """The binary64 reference count for each ordinary row (None for forced rows)."""
    from harness.core.f32 import rows as f32_rows
    from harness.core.oracle import Certified, reference

    data = (root / case["logits"]).read_bytes()
    p_values = list(f32_rows((root / case["p"]).read_bytes(), None))[0]
    counts: list[int | None] = []
    for r, row in enumerate(f32_rows(data, case["vocab"])):
        if case["rows"][r]["judge"] != ORDINARY:
            counts.append(None)
            continue
        outcome = reference(row, p_values[r], row=r, fast=True)
        counts.append(outcome.count if isinstance(outcome, Certified) else None)
    return counts


def kept_sets(path: Path, batch: int, vocab: int) -> list[bytes]:
    import numpy as np

    out = np.frombuffer(path.read_bytes(), dtype="<f4").reshape(batch, vocab)
    return [np.packbits(out[r] != -np.inf).tobytes() for r in range(batch)]


def summarize(result: Any) -> dict[str, Any]:
    ev = result.evidence or {}
    summary = {
        "status": result.status, "reason": result.reason,
        "returncode": result.returncode,
        "stderr_tail": result.stderr_tail[-1500:] if result.status != "ok" else "",
    }
    for key in ("backend", "interpreter", "device", "python", "torch", "triton", "vllm_version",
                "kernel_sha256", "placeholders_installed", "third_party_loaded", "import_s"):
        summary[key] = ev.get(key)
    summary["cases"] = [
        {"id": c["id"], "kept_counts": c["kept_counts"], "slices": c["split"]["slices"],
         "num_sm": c["split"]["num_sm"], "split_proven": c["split"]["proven"],
         "observed_by": c["split"]["observed_by"], "timings": c["timings"],
         "logits_sha256": c["logits_sha256"], "output_sha256": c["output_sha256"]}
        for c in ev.get("cases", [])
    ]
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sources", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--interpreter-sm", type=int, default=132)
    parser.add_argument("--no-interpreter", action="store_true")
    parser.add_argument("--no-cuda", action="store_true", help="dry run on a CPU machine")
    parser.add_argument("--keep-bytes", action="store_true",
                        help="keep input and output .f32 files (default: JSON only)")
    parser.add_argument("--timeout", type=float, default=420)
    args = parser.parse_args(argv)
    started = time.time()

    missing = [pkg for mod, pkg in CLOSURE_PACKAGES.items()
               if importlib.util.find_spec(mod) is None]
    if missing:
        print(f"missing packages for vLLM's import closure: {', '.join(missing)}",
              file=sys.stderr)
        return 2
    pins = sources.load_pins()
    sides = [pins.side("stock"), pins.side("patched")]
    try:
        trees = {s.name: sources.resolve_tree(s, cache=args.out, sources=args.sources)
                 for s in sides}
    except HarnessError as err:
        print(f"gpu_kernel_suite: {err}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.out / "work"
    if work.exists():
        shutil.rmtree(work)
    cases, _ = build_cases(work)
    interp_ids = [c["id"] for c in cases if c["id"].startswith("interp-")]
    all_index = write_index(work / "cases.json", cases)
    interp_index = write_index(work / "cases-interpreter.json",
                               [c for c in cases if c["id"] in interp_ids])

    results: dict[str, Any] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        interp_futures = {}
        if not args.no_interpreter:
            for side in sides:
                interp_futures[side.name] = pool.submit(
                    run_side, side, trees[side.name], "interpreter", args.interpreter_sm,
                    interp_index, work / f"out-interpreter-{side.name}", args.timeout)
        # CUDA runs one after the other, beside the interpreter children
        for side in [] if args.no_cuda else sides:
            results[f"cuda/{side.name}"] = run_side(
                side, trees[side.name], "cuda", args.interpreter_sm, all_index,
                work / f"out-cuda-{side.name}", args.timeout, repeats=args.repeats)
        for name, future in interp_futures.items():
            results[f"interpreter/{name}"] = future.result()

    report: dict[str, Any] = {
        "command": "python scripts/gpu_kernel_suite.py "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "pins": {s.name: s.describe() for s in sides},
        "patch_sha256": pins.patch_sha256,
        "runs": {key: summarize(r) for key, r in results.items()},
        "inputs": {c["id"]: {"batch": c["batch"], "vocab": c["vocab"],
                             "rows": [r["label"] for r in c["rows"]],
                             "logits_sha256": sha256_file(work / c["logits"])}
                   for c in cases},
    }
    report["oracle_counts"] = {c["id"]: oracle_counts(work, c) for c in cases
                               if c["kind"] == ORDINARY}
    comparison = []
    for side in sides:
        cuda_r = results.get(f"cuda/{side.name}")
        interp_r = results.get(f"interpreter/{side.name}")
        if not (cuda_r and interp_r and cuda_r.ok and interp_r.ok):
            continue
        for case in cases:
            if case["id"] not in interp_ids:
                continue
            a = cuda_r.out_dir / f"{case['id']}.out.f32"
            b = interp_r.out_dir / f"{case['id']}.out.f32"
            sa = kept_sets(a, case["batch"], case["vocab"])
            sb = kept_sets(b, case["batch"], case["vocab"])
            comparison.append({
                "side": side.name, "case": case["id"],
                "bytes_equal": a.read_bytes() == b.read_bytes(),
                "kept_sets_equal_per_row": [x == y for x, y in zip(sa, sb, strict=True)],
            })
    report["cuda_vs_interpreter"] = comparison
    report["elapsed_s"] = round(time.time() - started, 1)
    text = json.dumps(report, indent=2)
    (args.out / "suite.json").write_text(text + "\n")
    print(text)
    if not args.keep_bytes:
        shutil.rmtree(work / "inputs", ignore_errors=True)
        for f32 in work.glob("out-*/*.f32"):
            f32.unlink()
    return 0 if all(r.ok for r in results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
