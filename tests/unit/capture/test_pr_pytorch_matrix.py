"""The PyTorch path's pull-request matrix ``pr-pytorch-v1`` (issue 39): frozen before any
mutant ran on it, judged by ``regression/v2``, both sides vLLM 0.33.0's
``apply_top_k_top_p_pytorch`` (family ``vllm-pytorch``, dispatch ``sort``) on the CPU; its
rows hold the function's branches and constants as its description says (k 1, V - 1 and V at
the gather index, ties at the k-th value, p near 0 and 1, the top-p comparison at equality,
p = 1 with k, forced 1e9 tokens, mixed k and p)."""

from __future__ import annotations

import json
from pathlib import Path

from harness.core.digest import sha256_hex
from harness.core.manifest import load_manifest, traffic_sampling
from harness.core.names import SIDES

ROOT = Path(__file__).resolve().parents[3]
NAME = "pr-pytorch-v1"
FROZEN = ROOT / "evidence/manifests/pr" / f"{NAME}.json"
MATRIX = ROOT / "harness/data/matrices" / f"{NAME}.json"


def test_the_frozen_manifest_hashes_to_its_sha256_and_is_the_committed_matrix():
    raw = FROZEN.read_bytes()
    assert (FROZEN.parent / f"{NAME}.json.sha256").read_text() == \
        f"{sha256_hex(raw)}  {NAME}.json\n"
    manifest = load_manifest(FROZEN)
    matrix = json.loads(MATRIX.read_text())
    assert manifest.rules == matrix["rules"] == "regression/v2"
    assert manifest.backend["required"] == "interpreter"
    assert manifest.limits == matrix["limits"]
    assert [{k: v for k, v in c.items() if k != "paths"} for c in manifest.cases] \
        == matrix["cases"]
    for side in SIDES:
        declared = manifest.sources["sides"][side]
        assert declared["family"] == "vllm-pytorch" and declared["dispatch"] == "sort"
        assert declared["pin"] == "evidence/pins/vllm-pytorch-0.33.0.json"


def _sampling(matrix: dict) -> list[tuple[str, int, int]]:
    """(p, k, vocab) of every traffic row."""
    return [(p, k, int(c["vocab"])) for c in matrix["cases"] if c["kind"] == "traffic"
            for p, k in traffic_sampling(c)]


def test_its_rows_hold_the_functions_branches_and_constants():
    matrix = json.loads(MATRIX.read_text())
    rows = _sampling(matrix)
    topk_only = [(k, v) for p, k, v in rows if p == "1.0" and k < v]
    assert {1, 511, 512} <= {k for c in matrix["cases"] if c["id"] == "topk-bf16-t0.7-v512-b8"
                             for _, k in traffic_sampling(c)}  # gather index V - k at both ends
    assert topk_only and any(k == 1 for k, _ in topk_only)
    assert any(p == "1" and k < v for p, k, v in rows)  # p = 1 with k: top-p given, off here
    assert any(p not in ("1", "1.0") and k < v for p, k, v in rows)  # top-k then top-p
    boundary = [r for c in matrix["cases"] if c["kind"] == "boundary" for r in c["rows"]]
    assert {"1e-9", "1e-30"} <= {r["p"] for r in boundary}  # 1 - p rounds to 1
    assert any(p == "0.99999994" for p, _, _ in rows)  # 1 - 2^-24
    dyadic = [r for r in boundary if r["label"].startswith("dyadic")]
    assert len(dyadic) >= 3  # the cumulative sum meets 1 - p exactly
    assert any(c.get("rows", {}).get("dominant", {}).get("count") == 16
               and c["rows"].get("scale") == "0" for c in matrix["cases"]
               if c["kind"] == "traffic")  # an exact tie group at the k-th value
    forced = [c for c in matrix["cases"] if "force" in c.get("rows", {}) or c["kind"] == "forced"]
    assert len(forced) >= 3
    assert any(c.get("rows", {}).get("mask_fraction") for c in forced)  # forced under grammar
    # small enough for a CPU: every vocabulary at most 32000, about a hundred rows
    assert max(int(c["vocab"]) for c in matrix["cases"]) <= 32000
