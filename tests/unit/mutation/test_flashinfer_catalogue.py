"""Catalogue ``topp-gate/mutants/flashinfer-v1`` (issue 39) against FlashInfer 0.7.2.post1's
real pinned tree from the cache: every entry's line occurs exactly once in the pinned file it
names, its diff round-trips through the strict applier and names that one file, and
``mutate``'s preparation (each mutant's diff and frozen manifest, on the frozen
``pr-flashinfer-v1``) works on a CPU machine up to where a kernel would run. Compiling the
mutants needs nvcc: ``scripts/device_fi_mutants_build.sh`` on the device machine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.core.digest import sha256_file, sha256_hex
from harness.core.errors import UsageError
from harness.core.manifest import load_manifest
from harness.mutation import mutate as mutate_module
from harness.mutation.mutant_catalogue import (
    CATALOGUES,
    FI_SAMPLING_CUH,
    FI_TOPK_CUH,
    FLASHINFER_PATH,
    FLASHINFER_V1,
    FLASHINFER_V1_ID,
    KERNEL_PATHS,
    KINDS,
    mutation_path,
)
from harness.pins import sources
from harness.pins.pinfile import load_pin_file
from harness.pins.pinned_sides import prepare_pinned_sides

REPO = Path(__file__).resolve().parents[3]
PIN = REPO / "evidence/pins/flashinfer-0.7.2.post1.json"
FROZEN = REPO / "evidence/manifests/pr/pr-flashinfer-v1.json"

pytestmark = [pytest.mark.sources]


@pytest.fixture(scope="module")
def pinned():
    side = load_pin_file(PIN).side("stock")
    tree = sources.cache_root() / "trees" / side.digest
    if not tree.is_dir():
        pytest.skip("FlashInfer 0.7.2.post1's tree is not in the cache (sources pin it)")
    return side, sources.verify_tree(side, tree)


def test_the_catalogue_is_registered_with_its_files():
    assert CATALOGUES[FLASHINFER_V1_ID] is FLASHINFER_V1
    assert KERNEL_PATHS[FLASHINFER_V1_ID] == FLASHINFER_PATH
    assert 18 <= len(FLASHINFER_V1) <= 24
    assert len({m.id for m in FLASHINFER_V1}) == len(FLASHINFER_V1)
    assert len({(m.path, m.old, m.new) for m in FLASHINFER_V1}) == len(FLASHINFER_V1)
    for m in FLASHINFER_V1:
        assert m.kind in KINDS and m.target and m.principle and m.occurrence == 1
        assert m.path in (FI_SAMPLING_CUH, FI_TOPK_CUH) and mutation_path(FLASHINFER_V1_ID,
                                                                           m) == m.path
        assert "\n" not in m.old + m.new and m.old != m.new
    assert {m.path for m in FLASHINFER_V1} == {FI_SAMPLING_CUH, FI_TOPK_CUH}
    assert {m.kind for m in FLASHINFER_V1} == set(KINDS)


def test_every_entry_applies_exactly_once_and_round_trips(pinned):
    side, tree = pinned
    for m in FLASHINFER_V1:
        text = (tree / m.path).read_bytes()
        assert text.count(m.old.encode()) == 1, m.id
        assert sum(1 for line in text.splitlines() if m.old.encode() in line) == 1, m.id
        diff = mutate_module.mutant_diff(text, text, m, m.path)
        assert sources.patch_target(diff, side.files, kernel_path=side.kernel_path) == m.path
        mutated = sources.apply_patch(text, diff, m.path)
        assert mutated == text.replace(m.old.encode(), m.new.encode(), 1), m.id
        changed = [line for line in diff.splitlines()
                   if line[:1] in (b"+", b"-") and not line.startswith((b"+++", b"---"))]
        assert len(changed) == 2, m.id  # one line out, one line in


def test_list_prints_the_catalogue_and_its_files(capsys):
    assert main(["mutate", "--list", "--catalogue", FLASHINFER_V1_ID]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (f"# {FLASHINFER_V1_ID}: {len(FLASHINFER_V1)} mutants of "
                        f"{FI_SAMPLING_CUH}, {FI_TOPK_CUH}")
    rows = {line.split("\t")[0]: line.split("\t") for line in lines[1:]}
    m = FLASHINFER_V1[0]
    assert rows[m.id] == [m.id, m.kind, m.what, m.target, m.principle]
    assert len(rows) == len(FLASHINFER_V1)


def test_mutate_prepares_every_mutant_up_to_the_kernel_run(pinned, tmp_path):
    """What ``run_mutation`` does before any gate run: each mutant's diff of one header and
    its manifest (the frozen PR manifest with the mutant's patch on the patched side), whose
    patched side then builds exactly as ``run --patch`` builds it."""
    if not FROZEN.is_file():
        pytest.skip("evidence/manifests/pr/ is checked out sparsely just now")
    side, _ = pinned
    options = mutate_module.Options(manifest=FROZEN, out=tmp_path / "out", key=tmp_path / "k",
                                    backend="cuda", catalogue=FLASHINFER_V1_ID)
    files, manifest = mutate_module._kernel_bytes(options)
    (tmp_path / "mutants").mkdir()
    (tmp_path / "manifests").mkdir()
    frozen_core = json.loads(FROZEN.read_text("utf-8"))
    seen_trees = {side.digest}
    for m in FLASHINFER_V1:
        pinned_file, base = files(m.path)
        assert pinned_file == base and sha256_hex(pinned_file) == side.files[m.path]
        diff = mutate_module.mutant_diff(pinned_file, base, m, m.path)
        diff_path = tmp_path / "mutants" / f"{m.id}.diff"
        diff_path.write_bytes(diff)
        out = mutate_module._mutant_manifest(manifest, diff_path,
                                             tmp_path / "manifests" / f"{m.id}.json", options)
        mutant = load_manifest(out)
        patch = mutant.side_patch("patched")
        assert patch["sha256"] == sha256_hex(diff) and patch["path"] == m.path
        assert patch["kernel_sha256"] == side.kernel_sha256  # flashinfer/sampling.py as pinned
        assert mutant.cases == manifest.cases and mutant.rules == manifest.rules
        assert mutant.case_dispatch("patched") == manifest.case_dispatch("patched")
        assert json.loads(out.read_text())["sources"]["sides"]["stock"] == \
            frozen_core["sources"]["sides"]["stock"] | {
                "pin": mutant.data["sources"]["sides"]["stock"]["pin"]}
        sides = prepare_pinned_sides(mutant, cache=sources.cache_root(), sources=None,
                                     patch=diff_path, say=lambda _m: None)
        changed, tree = sides["patched"]
        assert changed.digest == patch["tree_sha256"] not in seen_trees  # its own JIT build
        seen_trees.add(changed.digest)
        assert sha256_file(tree / m.path) == patch["file_sha256"]
        assert (tree / m.path).read_bytes().count(m.new.encode()) >= 1


def test_the_flashinfer_catalogue_refuses_a_vllm_manifest(tmp_path):
    frozen = REPO / "evidence/manifests/pr/pr-cuda-v4.json"
    if not frozen.is_file():
        pytest.skip("evidence/manifests/pr/ is checked out sparsely just now")
    side = load_pin_file(REPO / "evidence/pins/vllm-0.33.0.json").side("stock")
    if not (sources.cache_root() / "trees" / side.digest).is_dir():
        pytest.skip("vLLM 0.33.0's tree is not in the cache")
    options = mutate_module.Options(manifest=frozen, out=tmp_path / "o", key=tmp_path / "k",
                                    catalogue=FLASHINFER_V1_ID)
    with pytest.raises(UsageError, match="mutates flashinfer/sampling.py, not "):
        mutate_module._kernel_bytes(options)
