"""The PyTorch path's mutant catalogue ``topp-gate/mutants/pytorch-v1`` (issue 39): one-line
mutations of vLLM 0.33.0's ``apply_top_k_top_p_pytorch`` and ``apply_top_k_only``, each
naming target and principle, each applying to exactly one line of the pinned
``topk_topp_sampler.py`` (and the mutated functions still load alone, as the family's child
loads them); ``topp-gate mutate`` mutates the file the catalogue names and refuses a
manifest of another family's file, naming the catalogue that fits."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from harness.core.digest import sha256_hex
from harness.core.errors import HarnessError, UsageError
from harness.families.vllm_pytorch import FUNCTIONS, load_functions
from harness.mutation import mutate as mutate_module
from harness.mutation.mutant_catalogue import (
    CATALOGUES,
    FLASHINFER_V1_ID,
    KERNEL_PATHS,
    KINDS,
    PYTORCH_V1,
    PYTORCH_V1_ID,
    SAMPLER_PATH,
    TRITON_PATH,
    V1_ID,
    V2_ID,
)
from harness.mutation.mutate import Options, _kernel_bytes, catalogue, mutant_diff
from harness.mutation.mutate import mutate as apply_mutation
from harness.pins import sources
from harness.pins.pinfile import load_pin_file

ROOT = Path(__file__).resolve().parents[3]
PIN = ROOT / "evidence/pins/vllm-pytorch-0.33.0.json"
FROZEN = ROOT / "evidence/manifests/pr/pr-pytorch-v1.json"
SAMPLER_SHA256 = "a8234f8dc8180c7b7d2417d4d04ca4af25bd2761dc93332f7bd2993a19c2120f"


def test_the_catalogue_is_known_and_names_its_file():
    assert CATALOGUES[PYTORCH_V1_ID] == PYTORCH_V1
    assert catalogue(None, PYTORCH_V1_ID) == list(PYTORCH_V1)
    assert {k: v for k, v in KERNEL_PATHS.items() if k != FLASHINFER_V1_ID} == {
        V1_ID: TRITON_PATH, V2_ID: TRITON_PATH, PYTORCH_V1_ID: SAMPLER_PATH}
    assert load_pin_file(PIN).data["kernel_path"] == SAMPLER_PATH


def test_every_entry_names_target_principle_and_one_line():
    assert 12 <= len(PYTORCH_V1) <= 20
    for m in PYTORCH_V1:
        assert m.id.startswith("pt-") and m.kind in KINDS, m.id
        assert m.target.startswith(("apply_top_k_top_p_pytorch", "apply_top_k_only")), m.id
        assert m.principle and m.what and m.occurrence >= 1, m.id
        assert m.old != m.new and "\n" not in m.old + m.new, m.id
    assert {m.kind for m in PYTORCH_V1} == set(KINDS)
    # the entries that cannot change an output on the gated path say so
    unreached = [m.id for m in PYTORCH_V1 if m.target.startswith("apply_top_k_only")]
    assert unreached and all("Not reached" in m.principle for m in PYTORCH_V1
                             if m.id in unreached)


@pytest.fixture(scope="module")
def sampler() -> bytes:
    side = load_pin_file(PIN).side("stock")
    try:
        tree = sources.resolve_tree(side, cache=sources.cache_root())
    except HarnessError as err:
        pytest.skip(f"vLLM 0.33.0 sources: {err}")
    raw = (tree / side.kernel_path).read_bytes()
    assert sha256_hex(raw) == SAMPLER_SHA256 == side.kernel_sha256
    return raw


@pytest.mark.sources
@pytest.mark.parametrize("entry", PYTORCH_V1, ids=[m.id for m in PYTORCH_V1])
def test_every_entry_applies_to_exactly_one_line_and_still_loads(sampler, entry, tmp_path):
    lines = sampler.decode("utf-8").splitlines(keepends=True)
    hits = [i for i, line in enumerate(lines) if entry.old in line]
    assert 1 <= entry.occurrence <= len(hits), entry.id
    # the stated occurrence, and no other line holds it unless the entry picks among them
    assert len(hits) == (2 if entry.id == "pt-topk-only-without-p" else 1), (entry.id, hits)
    mutated = apply_mutation(sampler, entry)
    new = mutated.decode("utf-8").splitlines(keepends=True)
    changed = [i for i, (a, b) in enumerate(zip(lines, new, strict=True)) if a != b]
    assert changed == [hits[entry.occurrence - 1]]
    ast.parse(mutated)
    diff = mutant_diff(sampler, sampler, entry, SAMPLER_PATH)  # the strict applier agrees
    assert mutate_module._changed_lines(diff) == 2
    assert f"+++ b/{SAMPLER_PATH}".encode() in diff
    path = tmp_path / "topk_topp_sampler.py"
    path.write_bytes(mutated)
    import torch

    module = load_functions(path, "mutant", FUNCTIONS, {"torch": torch})  # no new globals
    assert all(callable(getattr(module, name)) for name in FUNCTIONS)


@pytest.mark.sources
def test_mutate_refuses_a_catalogue_of_another_file_naming_the_one_that_fits(sampler, tmp_path):
    options = Options(manifest=FROZEN, out=tmp_path / "o", key=tmp_path / "k")  # v2: Triton
    with pytest.raises(UsageError, match=r"mutates vllm/v1/sample/ops/topk_topp_triton\.py, "
                       r"not vllm/v1/sample/ops/topk_topp_sampler\.py \(use --catalogue "
                       r"topp-gate/mutants/pytorch-v1\)"):
        _kernel_bytes(options)
    files, manifest = _kernel_bytes(Options(manifest=FROZEN, out=tmp_path / "o",
                                            key=tmp_path / "k", catalogue=PYTORCH_V1_ID))
    pinned, base = files(SAMPLER_PATH)
    assert pinned == base == sampler and manifest.name == "pr-pytorch-v1"
