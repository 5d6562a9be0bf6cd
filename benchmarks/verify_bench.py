#!/usr/bin/env python3
"""Verify a bundle of the default (H200) matrix size on CPU: rows per second, phase shares.

    .venv/bin/python benchmarks/verify_bench.py [--workers 2] [--keep DIR]

The bundle is SYNTHETIC (never evidence): the real h200 manifest's case layout, inputs
drawn with numpy (same shapes; forced rows share one background row, as the real builder
does), "outputs" made by applying the oracle's kept set (the stock side of forced rows
fully masked), written and signed by the real bundle writer with the test-only key, then
verified by the real verifier. Needs numpy to build; verification uses what is installed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "assets"))

import numpy as np  # noqa: E402
import synthetic  # noqa: E402

from harness.core.bundle import BundleContent, write_bundle  # noqa: E402
from harness.core.cases_index import render_cases_index  # noqa: E402
from harness.core.f32 import runtime_p  # noqa: E402
from harness.core.gate import verdict  # noqa: E402
from harness.core.judge import CaseBytes, RowSpec, judge_cases  # noqa: E402
from harness.core.keys import load_private_key, load_public_key  # noqa: E402
from harness.core.manifest import expected_layout, parse_manifest  # noqa: E402
from harness.core.oracle import reference  # noqa: E402
from harness.core.verify import verify_bundle  # noqa: E402

MANIFEST = ROOT / "evidence" / "manifests" / "h200-forced-logit-gate.json"


def _case_arrays(case, spec, rng):
    if spec["kind"] == "forced":
        background = rng.standard_normal(case.vocab, dtype=np.float32)
        rows, ps = [], []
        for value in spec["grid"]["value"]:
            for p in spec["grid"]["p"]:
                for fid in spec["grid"]["forced_id"]:
                    row = background.copy()
                    row[fid] = np.float32(float(value))
                    rows.append(row)
                    ps.append(runtime_p(p))
        return np.stack(rows), np.asarray(ps, dtype=np.float32)
    logits = rng.standard_normal((case.batch, case.vocab), dtype=np.float32)
    ps = (rng.random(case.batch, dtype=np.float32) * 0.9 + 0.1).astype(np.float32)
    return logits, ps


def build(dest: Path) -> BundleContent:
    raw = MANIFEST.read_bytes()
    manifest = parse_manifest(raw)
    layout = expected_layout(manifest)
    specs = {c["id"]: c for c in manifest.cases}
    rng = np.random.default_rng(0)
    inputs, outputs, cases = {}, {"stock": {}, "patched": {}}, []
    for case in layout:
        logits, ps = _case_arrays(case, specs[case.id], rng)
        patched = np.full_like(logits, -np.inf)
        stock = np.full_like(logits, -np.inf)
        for i, spec in enumerate(case.rows):
            kept = list(reference(logits[i].tolist(), float(ps[i]), fast=True).kept)
            patched[i, kept] = logits[i, kept]
            if spec.judge != "forced":
                stock[i, kept] = logits[i, kept]
        lb, pb = logits.astype("<f4").tobytes(), ps.astype("<f4").tobytes()
        inputs[case.logits_path], inputs[case.p_path] = lb, pb
        outputs["stock"][case.id] = stock.astype("<f4").tobytes()
        outputs["patched"][case.id] = patched.astype("<f4").tobytes()
        cases.append(CaseBytes(case.id, case.vocab,
                               tuple(RowSpec(r.judge, r.forced_id, r.label) for r in case.rows),
                               lb, pb, outputs["stock"][case.id], outputs["patched"][case.id],
                               True))
    rows = judge_cases(cases, workers=os.cpu_count() or 1, fast=True)
    evidence = {s: b'{"synthetic": true, "note": "SYNTHETIC BENCHMARK: no kernel ran"}\n'
                for s in ("stock", "patched")}
    return BundleContent(
        manifest=raw, cases=render_cases_index(layout), case_ids=[c.id for c in layout],
        inputs=inputs, outputs=outputs, evidence=evidence,
        split_path={c.id: True for c in layout}, rows=rows, run_stops=[],
        verdict=verdict(rows, []),
        sources={side: dict(manifest.sources["sides"][side]) for side in ("stock", "patched")},
        patch_sha256=manifest.sources.get("patch_sha256", "0" * 64),
        environment={"synthetic": True}, limits=dict(manifest.limits))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--keep", type=Path, help="write the bundle here and keep it")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp())
    dest = args.keep or tmp / "bundle"
    try:
        t0 = time.perf_counter()
        content = build(dest)
        t1 = time.perf_counter()
        written = write_bundle(dest, content, load_private_key(synthetic.SIGNING_KEY),
                               max_bytes=int(content.limits["max_bundle_bytes"]))
        t2 = time.perf_counter()
        raw_bytes = sum(len(b) for b in content.inputs.values()) + sum(
            len(b) for side in content.outputs.values() for b in side.values()
            if isinstance(b, bytes))
        start = time.perf_counter()
        result = verify_bundle(dest, load_public_key(synthetic.SIGNING_PUB),
                               workers=args.workers)
        total = time.perf_counter() - start
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rerun = result.seconds["rerun"]
    print("SYNTHETIC bundle of the h200-forced-logit-gate matrix (never evidence)")
    print(f"cpus available: {len(os.sched_getaffinity(0))}, verify workers: {args.workers}")
    print(f"rows: {result.rows} in {result.cases} cases; raw inputs+outputs {raw_bytes} bytes; "
          f"bundle on disk {written.stored_bytes} bytes (cap "
          f"{content.limits['max_bundle_bytes']})")
    print(f"build {t1 - t0:.1f} s, write+sign {t2 - t1:.1f} s")
    print(f"verify total {total:.1f} s: read+digest {result.seconds['read_and_digest']:.1f} s, "
          f"checks {result.seconds['checks']:.1f} s, oracle+gate rerun {rerun:.1f} s "
          f"({100 * rerun / total:.0f}% of total)")
    print(f"rows verified per second: {result.rows / total:.1f}")
    print(f"verdict: {result.verdict['verdict']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
