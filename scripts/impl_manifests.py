#!/usr/bin/env python3
"""Write the frozen H200 manifests of issue 21: every implementation a server runs, judged on
the same captured inputs.

    .venv/bin/python scripts/impl_manifests.py [--out-dir evidence/manifests/impls]
        [--cases FILE] [--pr-matrix harness/data/matrices/pr-cuda.json]

One manifest per FlashInfer 0.7.2.post1 path (``evidence/pins/flashinfer-0.7.2.post1.json``
on both sides: the release judged against the oracle; a pull request's wheel pinned as the
patched side gates the change the same way) and one for vLLM 0.33.0's PyTorch sort path on
CUDA. The deterministic paths are judged by ``serve/v1``, the samplers by ``support/v1``.
Each workload below is predeclared here, before any run; ``--cases FILE`` (a JSON object
``{"top-p": [...], "top-k": [...], "top-k-top-p": [...]}`` of version 3 cases, e.g. the
deployment matrix of issue 20) replaces them. Every manifest is written with its ``.sha256``
(``topp-gate manifest new``; never overwritten) and needs the pins' trees in the cache
(``topp-gate sources pin`` put them there).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.capture.manifest_new import SideSpec, new_manifest  # noqa: E402

PINS = ROOT / "evidence" / "pins"
FLASHINFER = PINS / "flashinfer-0.7.2.post1.json"
PYTORCH = PINS / "vllm-pytorch-0.33.0.json"

# Workloads (predeclared 2026-12-01): bf16-rounded rows at Llama 3's vocabulary, and forced
# rows at vLLM's thinking-budget value 1e9.
FORCED = {"round": "bf16", "force": {"ids": [7], "value": "1e9"}}
CASES: dict[str, list[dict[str, object]]] = {
    "top-p": [
        {"id": "traffic-bf16-topp-v128256", "kind": "traffic", "vocab": 128256, "batch": 16,
         "seed": 31, "rows": {"round": "bf16"},
         "sampling": [{"p": "0.9"}, {"p": "0.95"}, {"p": "0.5"}, {"p": "0.99"}]},
        {"id": "traffic-forced-topp-v32000", "kind": "traffic", "vocab": 32000, "batch": 4,
         "seed": 32, "rows": FORCED, "forced_id": 7,
         "sampling": [{"p": "0.9"}, {"p": "0.5"}]},
    ],
    "top-k": [
        {"id": "traffic-bf16-topk-v128256", "kind": "traffic", "vocab": 128256, "batch": 16,
         "seed": 33, "rows": {"round": "bf16"},
         "sampling": [{"k": 1}, {"k": 20}, {"k": 50}, {"k": 1000}]},
        {"id": "traffic-forced-topk-v32000", "kind": "traffic", "vocab": 32000, "batch": 4,
         "seed": 34, "rows": FORCED, "forced_id": 7, "sampling": [{"k": 20}, {"k": 50}]},
    ],
    "top-k-top-p": [
        {"id": "traffic-bf16-topkp-v128256", "kind": "traffic", "vocab": 128256, "batch": 16,
         "seed": 35, "rows": {"round": "bf16"},
         "sampling": [{"k": 50, "p": "0.9"}, {"k": 20, "p": "0.8"}, {"k": 1000, "p": "0.95"},
                      {"k": 5, "p": "0.5"}]},
        {"id": "traffic-forced-topkp-v32000", "kind": "traffic", "vocab": 32000, "batch": 4,
         "seed": 36, "rows": FORCED, "forced_id": 7,
         "sampling": [{"k": 20, "p": "0.9"}, {"k": 50, "p": "0.5"}]},
    ],
}
# (name, pin, dispatch path, workload, rule set)
RUNS = [
    ("h200-flashinfer-0.7.2.post1-top-p-renorm", FLASHINFER, "top-p-renorm", "top-p",
     "serve/v1"),
    ("h200-flashinfer-0.7.2.post1-top-k-renorm", FLASHINFER, "top-k-renorm", "top-k",
     "serve/v1"),
    ("h200-flashinfer-0.7.2.post1-top-k-mask", FLASHINFER, "top-k-mask", "top-k", "serve/v1"),
    ("h200-flashinfer-0.7.2.post1-top-p-sampling", FLASHINFER, "top-p-sampling", "top-p",
     "support/v1"),
    ("h200-flashinfer-0.7.2.post1-top-k-top-p-sampling", FLASHINFER, "top-k-top-p-sampling",
     "top-k-top-p", "support/v1"),
    ("h200-vllm-pytorch-0.33.0-sort", PYTORCH, "sort", "all", "serve/v1"),
]
LIMITS = {"max_vocab": 128256, "max_batch": 16, "child_timeout_s": 540, "run_timeout_s": 580,
          "max_bundle_bytes": 16 << 20}


def matrix(workload: str, rules: str, cases: dict[str, list[dict[str, object]]]) -> dict:
    chosen = [c for w in ("top-p", "top-k", "top-k-top-p") for c in cases[w]] \
        if workload == "all" else cases[workload]
    return {"schema": "topp-gate/matrix/v1", "rules": rules,
            "description": f"Issue 21 on the H200: workload {workload}, judged by {rules}; "
                           "bf16-rounded traffic rows at vocabulary 128256 and forced rows at "
                           "1e9 (vocabulary 32000).",
            "backend": {"required": "cuda", "interpreter_sm_count": 132},
            "limits": LIMITS, "cases": chosen}


# The top-p-only paths on the Triton pull-request matrix (issue 20's pr-cuda): the same
# captured inputs as the Triton bundles of that matrix, so the table sets them side by side.
PR_RUNS = [
    ("h200-pr-cuda-flashinfer-0.7.2.post1-top-p-renorm", FLASHINFER, "top-p-renorm",
     "serve/v1"),
    ("h200-pr-cuda-flashinfer-0.7.2.post1-top-p-sampling", FLASHINFER, "top-p-sampling",
     "support/v1"),
    ("h200-pr-cuda-vllm-pytorch-0.33.0-sort", PYTORCH, "sort", "serve/v1"),
]


def pr_matrix(source: dict, rules: str) -> dict:
    return {**source, "rules": rules,
            "description": f"Issue 21 on the H200: the cases of the pr-cuda matrix (issue 20), "
                           f"judged by {rules}. {source['description']}"}


# Every implementation a server runs on the deployment matrix (issue 19's, the same captured
# inputs as the Triton bundles of evidence/deploy/): FlashInfer's samplers, each case on the
# one vLLM 0.33.0's flashinfer_sample calls for its batch (the family's per-case guess:
# path None), and vLLM 0.33.0's PyTorch sort path.
# The first FlashInfer manifest kept the deployment matrix's 16,000,000-byte bundle cap and
# its H200 run was refused before writing (the bundle would hold 16,901,460 bytes; no verdict
# was shown); the second is the same matrix with a 24 MiB cap (BUNDLE_CAPS), frozen anew.
DEPLOY_RUNS = [
    ("h200-deploy-flashinfer-0.7.2.post1-sampling", FLASHINFER, None, "support/v1"),
    ("h200-deploy-vllm-pytorch-0.33.0-sort", PYTORCH, "sort", "serve/v1"),
    ("h200-deploy-flashinfer-0.7.2.post1-sampling-24mib", FLASHINFER, None, "support/v1"),
]
BUNDLE_CAPS = {"h200-deploy-flashinfer-0.7.2.post1-sampling-24mib": 24 << 20}


def deploy_matrix(source: dict, rules: str, cap: int | None = None) -> dict:
    if cap is not None:
        source = {**source, "limits": {**source["limits"], "max_bundle_bytes": cap}}
    return {**source, "rules": rules,
            "description": f"Issue 21 on the H200: the cases of the deployment matrix (issue "
                           f"19), judged by {rules}. {source['description']}"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", type=Path, default=ROOT / "evidence/manifests/impls")
    parser.add_argument("--cases", type=Path, default=None)
    parser.add_argument("--pr-matrix", type=Path, default=None,
                        help="write the top-p paths on this matrix instead (pr-cuda.json)")
    parser.add_argument("--deploy-matrix", type=Path, default=None,
                        help="write FlashInfer's samplers and vLLM's PyTorch path on this "
                             "matrix instead (harness/data/matrices/deploy.json)")
    args = parser.parse_args(argv)
    cases = CASES if args.cases is None else json.loads(args.cases.read_text("utf-8"))
    args.out_dir.mkdir(parents=True, exist_ok=True)
    runs: list[tuple[str, Path, str | None, dict]] = [
        (name, pin, path, matrix(workload, rules, cases))
            for name, pin, path, workload, rules in RUNS]
    if args.pr_matrix is not None:
        source = json.loads(args.pr_matrix.read_text("utf-8"))
        runs = [(name, pin, path, pr_matrix(source, rules))
                for name, pin, path, rules in PR_RUNS]
    if args.deploy_matrix is not None:
        source = json.loads(args.deploy_matrix.read_text("utf-8"))
        runs = [(name, pin, path, deploy_matrix(source, rules, BUNDLE_CAPS.get(name)))
                for name, pin, path, rules in DEPLOY_RUNS
                if not (args.out_dir / f"{name}.json").exists()]  # frozen ones stay
    with tempfile.TemporaryDirectory() as tmp:
        for name, pin, path, document in runs:
            spec = Path(tmp) / f"{name}.matrix.json"
            spec.write_text(json.dumps(document), encoding="utf-8")
            side = SideSpec(pin, path)
            out = new_manifest({"stock": side, "patched": side}, str(spec),
                               args.out_dir / f"{name}.json")
            print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
