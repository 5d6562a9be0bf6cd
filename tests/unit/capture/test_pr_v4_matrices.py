"""The version 4 pull-request matrices (issue 26 item 3): every path of vLLM 0.33.0's Triton
sampler. Their frozen manifests load, hash to their ``.sha256``, keep the previous version's
split cases byte for byte, and freeze per-case paths that cover split, single, single-topk and
mixed on both sides; the row families are what their descriptions say (exact grammar counts,
k at a tie group, the dispatch edge at batch 64 and 65, the split count at real
vocabularies)."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import pytest

from harness.core.digest import sha256_hex
from harness.core.manifest import load_manifest, traffic_sampling
from harness.core.names import DISPATCH_PATHS, SIDES, SPLIT

ROOT = Path(__file__).resolve().parents[3]
PR = ROOT / "evidence/manifests/pr"
MATRICES = ROOT / "harness/data/matrices"
# (version 4, the version whose cases it keeps unchanged). pr-interpreter-v4-small replaces
# pr-interpreter-v4 for interpreter runs (v4 was measured too slow before any mutant ran).
PAIRS = [("pr-cuda-v4", "pr-cuda-v3"), ("pr-interpreter-v4", "pr-interpreter-v2"),
         ("pr-interpreter-v4-small", "pr-interpreter-v2")]
NAMES = [new for new, _ in PAIRS]


def _frozen(name: str):
    path = PR / f"{name}.json"
    if not path.is_file():
        pytest.skip(f"{name} is not frozen in this checkout")
    return load_manifest(path)


def _case(manifest, case_id: str) -> dict:
    return next(c for c in manifest.cases if c["id"] == case_id)


def _path(manifest, case: dict, side: str) -> str:
    return str(case.get("paths", {}).get(side, manifest.sides[side].dispatch))


@pytest.mark.parametrize("name", NAMES)
def test_frozen_manifest_loads_and_hashes_to_its_sha256(name):
    manifest = _frozen(name)
    raw = (PR / f"{name}.json").read_bytes()
    line = (PR / f"{name}.json.sha256").read_text()
    assert line == f"{sha256_hex(raw)}  {name}.json\n"
    assert manifest.sha256 == sha256_hex(raw)
    assert manifest.rules == "regression/v2"


@pytest.mark.parametrize("name", NAMES)
def test_per_case_paths_cover_every_dispatch_path_on_both_sides(name):
    manifest = _frozen(name)
    for side in SIDES:
        assert manifest.sides[side].dispatch == SPLIT
        used = {_path(manifest, case, side) for case in manifest.cases}
        assert used == set(DISPATCH_PATHS), (side, used)
    # the two sides are the same release: each case takes one path on both
    for case in manifest.cases:
        assert _path(manifest, case, "stock") == _path(manifest, case, "patched")


@pytest.mark.parametrize(("name", "previous"), PAIRS)
def test_the_previous_versions_split_cases_are_kept_unchanged(name, previous):
    manifest = _frozen(name)
    old = load_manifest(PR / f"{previous}.json")
    assert manifest.cases[:len(old.cases)] == old.cases
    assert all(_path(manifest, c, side) == SPLIT for c in old.cases for side in SIDES)


@pytest.mark.parametrize("name", NAMES)
def test_the_frozen_cases_are_the_committed_matrix(name):
    manifest = _frozen(name)
    matrix = json.loads((MATRICES / f"{name}.json").read_text())
    assert manifest.rules == matrix["rules"]
    assert manifest.limits == matrix["limits"]
    stripped = [{k: v for k, v in c.items() if k != "paths"} for c in manifest.cases]
    assert stripped == matrix["cases"]


@pytest.mark.parametrize("name", ["pr-cuda-v4", "pr-interpreter-v4"])
def test_the_dispatch_edge_holds_the_same_rows_at_batch_64_and_65(name):
    manifest = _frozen(name)
    edges = {c["id"]: c for c in manifest.cases if c["id"].startswith("edge-")}
    paths = {cid: _path(manifest, c, "stock") for cid, c in edges.items()}
    by_kind: dict[str, dict[int, str]] = {}
    for cid, case in edges.items():
        by_kind.setdefault(cid.split("-b")[0], {})[int(case["batch"])] = paths[cid]
        twin = next(c for c in edges.values()
                    if c["id"].split("-b")[0] == cid.split("-b")[0] and c is not case)
        assert {k: v for k, v in case.items() if k not in ("id", "batch", "paths")} \
            == {k: v for k, v in twin.items() if k not in ("id", "batch", "paths")}
    assert by_kind == {"edge-ponly": {64: "split", 65: "single"},
                       "edge-topk": {64: "mixed", 65: "single-topk"}}


@pytest.mark.parametrize("name", NAMES)
def test_exact_grammar_masks_leave_exactly_n_tokens_and_k_straddles_n(name):
    manifest = _frozen(name)
    cases = [c for c in manifest.cases if "-exact" in c["id"] and "grammar" in c["id"]]
    assert cases
    for case in cases:
        n = int(case["id"].split("-exact")[1].split("-")[0])
        vocab = int(case["vocab"])
        fraction = Fraction(case["rows"]["mask_fraction"])
        assert vocab - math.floor(fraction * vocab) == n
        ks = {k for _, k in traffic_sampling(case) if k < vocab}
        assert {n - 1, n, n + 1} <= ks


def test_cuda_split_counts_at_real_vocabularies():
    """vLLM 0.33.0's _topp_split_count at batch 34 on an H200 (132 SMs): the SM rule alone
    gives 2 slices, the 7168-entry slice rule decides."""
    manifest = _frozen("pr-cuda-v4")

    def splits(batch: int, vocab: int, num_sm: int = 132) -> int:
        count = 1
        while count < 32 and (count * 2 * batch <= num_sm or count * 2 * 7168 <= vocab):
            count *= 2
        return count

    found = {int(c["vocab"]): (splits(int(c["batch"]), int(c["vocab"])),
                               -(-int(c["vocab"]) // splits(int(c["batch"]), int(c["vocab"]))))
             for c in manifest.cases if c["id"].startswith("split-slices-")}
    assert found == {32000: (4, 8000), 128256: (16, 8016), 151936: (16, 9496),
                     262144: (32, 8192)}
    assert splits(34, 1) == 2
    assert {int(c["batch"]) for c in manifest.cases if c["id"].startswith("split-slices-")} \
        == {34}


@pytest.mark.parametrize("name", NAMES)
def test_k_at_and_around_a_bf16_tie_group(name):
    """Rows 0-5 of the tie case put k at a tie group of >= 3 equal logits: excluding it,
    keeping 1, about half, all but 1, all of it, and all of it plus the next token."""
    torch = pytest.importorskip("torch")
    from harness.capture.row_builders import build_batch

    manifest = _frozen(name)
    case = next(c for c in manifest.cases if c["id"].startswith("topk-bf16-ties-kth"))
    rows = build_batch(case["rows"], int(case["vocab"]), int(case["batch"]), int(case["seed"]))
    ks = [k for _, k in traffic_sampling(case)]
    for index in range(6):
        values = torch.sort(rows[index], descending=True).values.tolist()
        k = ks[index]
        # the group's value: just after the k-th (row 0), just before it (row 5), else at it
        at = values[k] if index == 0 else values[k - 2] if index == 5 else values[k - 1]
        first = values.index(at)
        last = len(values) - 1 - values[::-1].index(at)
        size = last - first + 1
        assert size >= 3
        want = [first, first + 1, None, last, last + 1, last + 2][index]
        if want is None:
            assert first + 1 < k < last + 1
        elif index == 5:
            assert k == last + 2 and values[k - 1] < at
        else:
            assert k == want
