"""Which path each case takes: the vllm-triton family's guess from the kernel source (the V2
sampler's arguments), per-case paths in version 3 manifests, and the frozen deployment
manifests (every path covered, each release's own paths, sized under the bundle limit)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from harness.core.errors import ManifestError
from harness.core.manifest import SCHEMA_V3, load_manifest, parse_manifest, traffic_sampling
from harness.core.names import DISPATCH_PATHS, MIXED, SIDES, SINGLE, SINGLE_TOPK, SPLIT
from harness.families import vllm_triton

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "evidence/manifests/deploy"
SWEEP = ROOT / "evidence/manifests/sweep"

SPLIT_SRC = b"def _apply_topp_split(\n"
NEW = SPLIT_SRC + (b"def apply_top_k_top_p_triton(\n    logits,\n"
                   b"    has_topp_only_rows: bool = True,\n")
OLD = SPLIT_SRC + b"def apply_top_k_top_p_triton(logits, k, p, mask_value):\n"
MONO = b"def apply_top_k_top_p_triton(logits, k, p):\n"
V = 1000


def guess(kernel: bytes, batch: int, ks: list[int], ps: list[float]) -> str | None:
    return vllm_triton.expected_path(kernel, batch, V, ks, ps)


def test_the_family_names_every_path_once():
    assert vllm_triton.FAMILY.dispatch_paths == DISPATCH_PATHS
    assert DISPATCH_PATHS == (SPLIT, SINGLE, SINGLE_TOPK, MIXED)


@pytest.mark.parametrize(("kernel", "batch", "ks", "ps", "path"), [
    (NEW, 64, [V, V], [0.9, 1.0], SPLIT),              # p only, small batch
    (NEW, 65, [V, V], [0.9, 0.9], SINGLE),             # p only, batch > 64
    (MONO, 8, [V, V], [0.9, 0.9], SINGLE),             # before the split pipeline
    (NEW, 8, [5, 20], [1.0, 1.0], SINGLE_TOPK),        # k only: p is None
    (NEW, 8, [5, 20], [0.9, 0.95], SINGLE_TOPK),       # k and p, no p-only row (0.33.0)
    (OLD, 8, [5, 20], [0.9, 0.95], MIXED),             # 0.30.0-0.32.0: the split follows
    (NEW, 8, [5, V], [1.0, 0.9], MIXED),               # a p-only row beside a top-k row
    (NEW, 8, [5, V], [0.9, 1.0], SINGLE_TOPK),         # k >= vocab but p = 1: not p-only
    (NEW, 128, [5, V], [1.0, 0.9], SINGLE_TOPK),       # batch > 64: never the split
    (NEW, 8, [V, V], [1.0, 1.0], None),                # neither: no kernel runs
])
def test_the_path_follows_the_v2_sampler_and_the_release(kernel, batch, ks, ps, path):
    assert guess(kernel, batch, ks, ps) == path


def _v3_manifest() -> dict:
    raw = json.loads((DEPLOY / "deploy-vllm-0.33.0.json").read_bytes())
    return copy.deepcopy(raw)


def test_a_case_names_its_own_path_and_versions_1_2_keep_the_sides():
    manifest = parse_manifest((DEPLOY / "deploy-vllm-0.30.0.json").read_bytes())
    by_case = manifest.case_dispatch("stock")
    assert by_case["split-bf16-t0.7-v32000-b16"] == SPLIT  # the side's own path
    assert by_case["topk-topp-bf16-dominant-t0.7-v151936-b4"] == MIXED
    assert manifest.dispatch("patched", "topk-topp-bf16-dominant-t0.7-v151936-b4") \
        == SINGLE_TOPK
    assert manifest.dispatch("stock") == SPLIT
    sweep = load_manifest(SWEEP / "sweep-vllm-0.30.0.json")
    assert set(sweep.case_dispatch("stock").values()) == {sweep.dispatch("stock")}


def test_paths_is_a_version_3_traffic_case_field_only():
    raw = _v3_manifest()
    raw["cases"][0]["paths"] = {"stock": "Not A Path"}
    with pytest.raises(ManifestError, match="schema violation"):
        parse_manifest(json.dumps(raw).encode())
    sweep = json.loads((SWEEP / "sweep-vllm-0.30.0.json").read_bytes())
    sweep["cases"][0]["paths"] = {"stock": "split"}
    with pytest.raises(ManifestError, match="schema violation"):
        parse_manifest(json.dumps(sweep).encode())


def test_the_deployment_manifests_are_frozen_and_cover_every_path():
    seen: dict[str, set[str]] = {}
    for release in ("0.30.0", "0.31.0", "0.32.0", "0.33.0"):
        manifest = load_manifest(DEPLOY / f"deploy-vllm-{release}.json")
        assert manifest.data["schema"] == SCHEMA_V3 and manifest.rules == "serve/v1"
        assert manifest.sources["sides"]["stock"]["version"] == release
        assert manifest.sources["sides"]["patched"]["version"] == "0.33.0"
        # one matrix: the same cases (the same captured inputs) in every release's manifest
        assert [{k: v for k, v in c.items() if k != "paths"} for c in manifest.cases] \
            == json.loads((ROOT / "harness/data/matrices/deploy.json").read_bytes())["cases"]
        for side in SIDES:
            seen.setdefault(release if side == "stock" else "0.33.0", set()).update(
                manifest.case_dispatch(side).values())
        vocabs = {int(c["vocab"]) for c in manifest.cases}
        assert vocabs == {32000, 128256, 151936, 262144}
        for case in manifest.cases:
            ks = [k for _, k in traffic_sampling(case)]
            # every release takes its own path for the k-and-p-on-every-row workload
            if case["id"].startswith("topk-topp"):
                assert all(k < int(case["vocab"]) for k in ks)
                want = SINGLE_TOPK if release == "0.33.0" else MIXED
                assert manifest.dispatch("stock", case["id"]) == want
    assert all(paths == set(DISPATCH_PATHS) for paths in seen.values()), seen
