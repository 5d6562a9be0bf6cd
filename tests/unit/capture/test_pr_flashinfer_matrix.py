"""FlashInfer's pull-request matrix ``pr-flashinfer-v1`` (issue 39): frozen before any
mutant ran on it, judged by ``regression-support/v1``, both sides FlashInfer 0.7.2.post1 on
CUDA; every path of the family a server calls is taken by some case (the samplers as vLLM
0.33.0 picks them per batch, the renorm and mask paths SGLang calls, declared per case), at
the sizes that choose between FlashInfer's single- and multi-CTA radix top-k and between
top-p renorm's ternary search and its AIR radix select; small enough for one run."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

from harness.core.digest import sha256_hex
from harness.core.limits import check_work
from harness.core.manifest import case_batch, load_manifest, traffic_sampling
from harness.core.names import SIDES
from harness.families import flashinfer

ROOT = Path(__file__).resolve().parents[3]
NAME = "pr-flashinfer-v1"
FROZEN = ROOT / "evidence/manifests/pr" / f"{NAME}.json"
MATRIX = ROOT / "harness/data/matrices" / f"{NAME}.json"
RADIX_CTA_FLOATS = 57592  # one CTA's shared memory on sm90 (227 KiB opt-in), topk.cuh
H200_SMS = 132


def _paths(manifest) -> dict[str, str]:
    """case id -> the path both sides take (each side's own where the case declares none)."""
    out = {}
    for case in manifest.cases:
        paths = {side: case.get("paths", {}).get(side,
                                                 manifest.sources["sides"][side]["dispatch"])
                 for side in SIDES}
        assert paths["stock"] == paths["patched"], case["id"]
        out[case["id"]] = paths["stock"]
    return out


def test_the_frozen_manifest_hashes_to_its_sha256_and_is_the_committed_matrix():
    raw = FROZEN.read_bytes()
    assert (FROZEN.parent / f"{NAME}.json.sha256").read_text() == \
        f"{sha256_hex(raw)}  {NAME}.json\n"
    manifest = load_manifest(FROZEN)
    matrix = json.loads(MATRIX.read_text())
    assert manifest.rules == matrix["rules"] == "regression-support/v1"
    assert manifest.backend["required"] == "cuda"
    assert manifest.limits == matrix["limits"]
    strip = [{k: v for k, v in c.items() if k != "paths"} for c in manifest.cases]
    assert strip == [{k: v for k, v in c.items() if k != "paths"} for c in matrix["cases"]]
    for side in SIDES:
        declared = manifest.sources["sides"][side]
        assert declared["family"] == "flashinfer" and declared["version"] == "0.7.2.post1"
        assert declared["pin"] == "evidence/pins/flashinfer-0.7.2.post1.json"
        assert declared["dispatch"] == flashinfer.TOP_P_SAMPLING


def test_every_path_a_server_calls_is_taken_and_samplers_are_as_vllm_picks_them():
    manifest = load_manifest(FROZEN)
    paths = _paths(manifest)
    assert set(paths.values()) == set(flashinfer.ENTRIES)  # all six
    for case in manifest.cases:
        if case["kind"] != "traffic" or paths[case["id"]] not in flashinfer.SAMPLING:
            continue
        sampling = traffic_sampling(case)
        ks = [k for _, k in sampling]
        ps = [float(p) for p, _ in sampling]
        assert paths[case["id"]] == flashinfer.sampler_for(int(case["vocab"]), ks, ps)


def test_the_sizes_that_choose_between_flashinfers_kernels():
    manifest = load_manifest(FROZEN)
    paths = _paths(manifest)
    radix = [(int(c["vocab"]), case_batch(c), c) for c in manifest.cases
             if paths[c["id"]] in (flashinfer.TOP_K_MASK, flashinfer.TOP_K_RENORM,
                                   flashinfer.TOP_K_TOP_P_SAMPLING)]
    vocabs = {v for v, _, _ in radix}
    assert RADIX_CTA_FLOATS in vocabs and RADIX_CTA_FLOATS + 4 in vocabs  # 1 CTA, then 2
    assert any(v > 2 * RADIX_CTA_FLOATS for v in vocabs)
    # a multi-CTA row group that takes a second row after a skipped k = V row (PR #2325):
    # group 0 takes rows 0, groups, 2 * groups, ... (topk.cuh's persistent loop)
    after_skip = []
    for vocab, batch, case in radix:
        ctas = -(-vocab // RADIX_CTA_FLOATS)
        groups = H200_SMS // ctas
        if ctas > 1 and batch > groups:
            ks = [k for _, k in traffic_sampling(case)]
            after_skip.append(ks[0] >= vocab and ks[groups] < vocab)
    assert any(after_skip)
    renorm = {int(c["vocab"]) for c in manifest.cases if paths[c["id"]] == "top-p-renorm"}
    assert min(renorm) < 2048 <= max(renorm) and 2048 in renorm  # ternary, then AIR radix
    sampled = {math.gcd(4, int(c["vocab"])) for c in manifest.cases if paths[c["id"]]
               in flashinfer.SAMPLING}
    assert sampled == {1, 2, 4}  # floats per 16-byte vectorised load: gcd(16 / 4, vocab)


def test_ties_indices_dtypes_forced_and_grammar_rows():
    manifest = load_manifest(FROZEN)
    paths = _paths(manifest)
    calls = {c["id"]: c.get("call", {}) for c in manifest.cases}
    indexed = {paths[i]: call for i, call in calls.items() if "indices" in call}
    assert indexed[flashinfer.TOP_P_SAMPLING]["indices_dtype"] == "int64"
    assert flashinfer.TOP_K_TOP_P_SAMPLING in indexed
    for call in indexed.values():  # every row drawn from, some twice, out of order
        assert sorted(set(call["indices"])) == list(range(max(call["indices"]) + 1))
        assert Counter(call["indices"]).most_common(1)[0][1] > 1
        assert call["indices"] != sorted(call["indices"])
    assert {paths[i] for i, call in calls.items() if call.get("k_dtype") == "int64"} >= {
        flashinfer.TOP_K_SAMPLING, flashinfer.TOP_K_MASK}
    kinds = Counter(c["kind"] for c in manifest.cases)
    assert kinds["boundary"] >= 1 and kinds["forced"] >= 1
    ties = [r for c in manifest.cases if c["kind"] == "boundary" for r in c["rows"]
            if r["construction"]["type"] == "ties"]
    assert {r["construction"]["placement"] for r in ties} == {"contiguous", "permuted"}
    assert sum(1 for c in manifest.cases if "forced_id" in c) >= 2
    grammar = [c for c in manifest.cases if c["kind"] == "traffic"
               and c.get("rows", {}).get("mask_fraction")]
    assert {paths[c["id"]] for c in grammar} >= {flashinfer.TOP_K_TOP_P_SAMPLING,
                                                  flashinfer.TOP_K_MASK,
                                                  flashinfer.TOP_P_RENORM}


def test_small_enough_for_one_run_on_one_h200():
    manifest = load_manifest(FROZEN)
    cases = [(c["id"], case_batch(c), int(c["vocab"])) for c in manifest.cases]
    check_work(cases, max_batch=manifest.limits["max_batch"])
    assert sum(b for _, b, _ in cases) < 300
    assert sum(b * v for _, b, v in cases) < 12_000_000  # about 7 MiB of inputs, compressed
    assert manifest.limits["max_bundle_bytes"] <= 16 << 20
    assert manifest.limits["child_timeout_s"] >= 300  # FlashInfer's JIT build, first child


def test_air_top_p_rows_keep_p_away_from_float32_summation_noise():
    """top_p_renorm_probs as SGLang calls it (is_deterministic false) adds probabilities in
    float32 atomics in no fixed order on its AIR path (vocabulary >= 2048): every such row
    keeps float32(p) at least 1e-4 of the row's binary64 mass from each canonical prefix
    sum, so an unchanged kernel cannot move its boundary between two runs."""
    import numpy as np

    from harness.capture.cases import build_case
    from harness.core.f32 import to_float32

    manifest = load_manifest(FROZEN)
    checked = 0
    for case in manifest.cases:
        if _paths(manifest)[case["id"]] != flashinfer.TOP_P_RENORM or int(case["vocab"]) < 2048:
            continue
        rows = np.frombuffer(build_case(case).logits, dtype="<f4").reshape(
            -1, int(case["vocab"])).astype(np.float64)
        for row, (p, _) in zip(rows, traffic_sampling(case), strict=True):
            finite = row[np.isfinite(row)]
            weights = np.sort(np.exp(finite - finite.max()))[::-1]
            prefix = np.cumsum(weights) / weights.sum()
            target = to_float32(float(p))
            if target < 1.0 and weights[0] / weights.sum() < 1.0:
                assert np.min(np.abs(prefix - target)) >= 1e-4, (case["id"], p)
            checked += 1
    assert checked >= 14


def _frozen(name: str):
    """The committed frozen manifest NAME, its bytes held to its .sha256 sibling."""
    frozen = ROOT / "evidence/manifests/pr" / f"{name}.json"
    assert (frozen.parent / f"{name}.json.sha256").read_text() == \
        f"{sha256_hex(frozen.read_bytes())}  {name}.json\n"
    return load_manifest(frozen)


def test_version_2_is_version_1_judged_by_regression_support_v2():
    # pr-flashinfer-v2: the same frozen cases, sides, limits and backend; only the rule set
    # (and the name and description) differ, so v1's design and its tests hold for it
    name = "pr-flashinfer-v2"
    v1, v2 = load_manifest(FROZEN), _frozen(name)
    assert v2.rules == "regression-support/v2" and v1.rules == "regression-support/v1"
    assert v2.cases == v1.cases and v2.limits == v1.limits and v2.backend == v1.backend
    assert v2.sources == v1.sources
    matrix = json.loads((ROOT / "harness/data/matrices" / f"{name}.json").read_text())
    assert matrix["cases"] == json.loads(MATRIX.read_text())["cases"]


def test_version_3_is_version_2_with_its_draws_declared():
    # pr-flashinfer-v3: v2's frozen cases, sides, limits, backend and rule set, plus the
    # declared draws (issue 39), equal to the constants v1 and v2 drew with: the same draws,
    # now passed to the child by the parent and checked by verify
    name = "pr-flashinfer-v3"
    v2, v3 = _frozen("pr-flashinfer-v2"), _frozen(name)
    assert v3.rules == v2.rules == "regression-support/v2"
    assert v3.cases == v2.cases and v3.limits == v2.limits and v3.backend == v2.backend
    assert v3.sources == v2.sources and v2.sampling is None
    assert v3.sampling == {"draws_per_row": flashinfer.DRAWS, "seed": flashinfer.SEED,
                           "offset": 0} == {"draws_per_row": 64, "seed": 20261201, "offset": 0}
    matrix = json.loads((ROOT / "harness/data/matrices" / f"{name}.json").read_text())
    assert matrix["cases"] == json.loads(MATRIX.read_text())["cases"]
    assert matrix["sampling"] == v3.sampling and matrix["rules"] == v3.rules
