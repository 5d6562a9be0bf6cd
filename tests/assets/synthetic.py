"""SYNTHETIC TEST FIXTURES -- never evidence.

Builds small bundles with the real bundle writer, from captured cases whose "kernel
outputs" are made by applying the oracle's kept set to the inputs (no kernel ever ran).
The stock side of forced rows is fully masked, as the real defect does. Every bundle made
here carries ``"synthetic": true`` in its kernel-path evidence and environment.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
from pathlib import Path
from typing import Any

from harness.capture.bundle_writer import BundleContent, WrittenBundle, write_bundle
from harness.capture.signing import load_private_key
from harness.core.bundle import sha256
from harness.core.cases_index import render_cases_index
from harness.core.f32 import encode, runtime_p, to_float32
from harness.core.gate import verdict
from harness.core.judge import CaseBytes, RowSpec, judge_cases
from harness.core.manifest import expected_layout, parse_manifest
from harness.core.oracle import reference
from harness.core.report import ReportInputs, render_markdown

ASSETS = Path(__file__).resolve().parent
SIGNING_KEY = ASSETS / "keys" / "test-only-signing.key"
SIGNING_PUB = ASSETS / "keys" / "test-only-signing.pub"
OTHER_KEY = ASSETS / "keys" / "test-only-other.key"
OTHER_PUB = ASSETS / "keys" / "test-only-other.pub"
NEG = -math.inf

MANIFEST: dict[str, Any] = {
    "schema": "topp-gate/manifest/v1",
    "name": "synthetic-test-fixture",
    "description": "SYNTHETIC TEST FIXTURE: tiny matrix for bundle and verifier tests; "
                   "outputs are the oracle's kept set, never a kernel's.",
    "sources": {
        "sides": {
            "stock": {"version": "0.30.0",
                      "wheel": "vllm-0.30.0-cp38-abi3-manylinux_2_28_x86_64.whl",
                      "wheel_sha256": ("ef52ee58c410ead0b8afb190838fa4cb"
                                  "cb52075596f67862a03859d984966ac4"),
                      "kernel_sha256": ("0b5fc337058e22bc28a8530ccec904d6"
                                  "ccd89b9548b02955c657ac429b1669d2")},
            "patched": {"version": "0.33.0",
                        "wheel": "vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl",
                        "wheel_sha256": ("4b6bdec4ab269990bf70d45a3c1e94c3"
                                  "760a27064513760193b26d6f0da883aa"),
                        "kernel_sha256": ("6264a524884274824b65c3a3a91d4d34"
                                  "418561cde566c31879cb394acd85f2ef")},
        },
        "patch_sha256": "a578020428c5456e9d140cde3b141049d00789b941b004b3940e1af209d70736",
    },
    "backend": {"required": "interpreter", "split_path_required": True,
                "interpreter_sm_count": 132},
    "limits": {"max_vocab": 4096, "max_batch": 64, "child_timeout_s": 60,
               "run_timeout_s": 600, "max_bundle_bytes": 4_000_000},
    "cases": [
        {"id": "forced-v64", "kind": "forced", "vocab": 64, "background_seed": 0,
         "grid": {"value": ["1e30"], "p": ["0.5", "0.9"], "forced_id": [0, 17]}},
        {"id": "ordinary-s1-b3-v100", "kind": "ordinary", "seed": 1, "batch": 3, "vocab": 100},
    ],
}


def manifest_bytes() -> bytes:
    return (json.dumps(MANIFEST, indent=2) + "\n").encode()


def _rows_for(case: Any, rnd: random.Random) -> tuple[list[list[float]], list[float]]:
    spec = next(c for c in MANIFEST["cases"] if c["id"] == case.id)
    rows, ps = [], []
    if spec["kind"] == "forced":
        background = [to_float32(rnd.gauss(0, 1)) for _ in range(case.vocab)]
        for value in spec["grid"]["value"]:
            for p in spec["grid"]["p"]:
                for fid in spec["grid"]["forced_id"]:
                    row = list(background)
                    row[fid] = to_float32(float(value))
                    rows.append(row)
                    ps.append(runtime_p(p))
    else:
        for _ in range(case.batch):
            rows.append([to_float32(rnd.gauss(0, 1)) for _ in range(case.vocab)])
            ps.append(to_float32(rnd.uniform(0.1, 0.95)))
    return rows, ps


def content(seed: int = 0, *, damage: bool = False,
            stock_failure: str | None = None) -> BundleContent:
    """A complete synthetic BundleContent: patched keeps the oracle set, stock fails forced.

    ``damage`` drops the top token of the last ordinary row on the patched side (a STOP);
    ``stock_failure`` replaces the stock output of the ordinary case by a runner status.
    """
    manifest_raw = manifest_bytes()
    layout = expected_layout(parse_manifest(manifest_raw))
    rnd = random.Random(seed)
    inputs: dict[str, bytes] = {}
    outputs: dict[str, dict[str, bytes | str]] = {"stock": {}, "patched": {}}
    cases = []
    for case in layout:
        rows, ps = _rows_for(case, rnd)
        stock: list[float] = []
        patched: list[float] = []
        for row, p, spec in zip(rows, ps, case.rows, strict=True):
            kept = set(reference(row, p).kept)
            masked = [v if i in kept else NEG for i, v in enumerate(row)]
            patched += masked
            stock += [NEG] * len(row) if spec.judge == "forced" else masked
        logits = encode([v for row in rows for v in row])
        inputs[case.logits_path] = logits
        inputs[case.p_path] = encode(ps)
        if damage and case.kind == "ordinary":
            last = len(patched) - case.vocab
            top = max(range(case.vocab), key=lambda i: rows[-1][i])
            patched[last + top] = NEG
        outputs["stock"][case.id] = encode(stock)
        outputs["patched"][case.id] = encode(patched)
        if stock_failure and case.kind == "ordinary":
            outputs["stock"][case.id] = stock_failure
        cases.append(CaseBytes(case.id, case.vocab,
                               tuple(RowSpec(r.judge, r.forced_id, r.label) for r in case.rows),
                               logits, encode(ps), outputs["stock"][case.id],
                               outputs["patched"][case.id], split_path=True))
    rows_result = judge_cases(cases)
    # Shaped like a kernel child's evidence (backend, per-case split-path proof and the
    # hashes of the bytes read and written), because the verifier binds the receipt's
    # split-path flags and the artifacts to it; no kernel ran.
    evidence = {side: (json.dumps({"synthetic": True, "side": side, "backend": "interpreter",
                                   "note": "SYNTHETIC TEST FIXTURE: no kernel ran",
                                   "cases": [_record(c, inputs, outputs[side][c.id])
                                             for c in layout]},
                                  indent=2) + "\n").encode() for side in ("stock", "patched")}
    verdict_result = verdict(rows_result, [])
    return rereport(BundleContent(
        manifest=manifest_raw,
        cases=render_cases_index(layout),
        case_ids=[c.id for c in layout],
        inputs=inputs,
        outputs=outputs,
        evidence=evidence,
        split_path={c.id: True for c in layout},
        rows=rows_result,
        run_stops=[],
        verdict=verdict_result,
        sources={side: dict(MANIFEST["sources"]["sides"][side]) for side in ("stock", "patched")},
        patch_sha256=MANIFEST["sources"]["patch_sha256"],
        environment={"synthetic": True},
        timings={"total_s": 0.0},
        limits=dict(MANIFEST["limits"]),
    ))


def rereport(bundle: BundleContent) -> BundleContent:
    """``bundle`` with ``report.md`` made by the real report generator from its own rows,
    verdict and evidence (as ``topp-gate run`` does; the verifier regenerates it)."""
    report = render_markdown(ReportInputs(
        manifest_name=MANIFEST["name"], backend=MANIFEST["backend"]["required"],
        rows=bundle.rows, verdict=bundle.verdict,
        evidence={side: json.loads(data) for side, data in bundle.evidence.items()},
        cases=json.loads(bundle.cases)))
    return dataclasses.replace(bundle, reports={"report.md": report.encode("utf-8")})


def _record(case: Any, inputs: dict[str, bytes], output: bytes | str) -> dict[str, Any]:
    """One case of a synthetic kernel evidence record (what a kernel child writes)."""
    record: dict[str, Any] = {"id": case.id, "split": {"proven": True},
                              "logits_sha256": sha256(inputs[case.logits_path]),
                              "p_sha256": sha256(inputs[case.p_path])}
    if isinstance(output, bytes):
        record["output_sha256"] = sha256(output)
    return record


def write(dest: Path, *, seed: int = 0, key: Path = SIGNING_KEY, **variant: Any) -> WrittenBundle:
    return write_bundle(dest, content(seed, **variant), load_private_key(key),
                        max_bytes=MANIFEST["limits"]["max_bundle_bytes"])
