"""Every path, end to end in Triton's interpreter: `manifest new` (version 3) guesses each
case's path from the kernel source, `run` proves it per case in real kernel children, and
`verify` re-checks the proofs, the captured k (``k_sha256``) and the verdict offline.

The kernels are vLLM 0.33.0's own (the pinned tree), unmodified: the ``single-topk`` case
(top-k only, so the V2 sampler passes ``p=None``) goes through the public entry on CPU
tensors; the ``mixed`` case (top-k rows beside p-only rows at batch <= 64) runs the
internal calls the public entry makes on CUDA, monolithic kernel then split pipeline.
Small shapes keep it cheap on 2 cores: vocab 512, batch 4, interpreter SM count 2.

The test-only family ``torch-topp`` (tests/assets/families/torch_topp.py) goes through the
same `manifest new`, `run` and `verify`, registered from outside ``harness/``.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "assets" / "families"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import torch_topp  # noqa: E402  (registers the family "torch-topp")

from harness.capture.manifest_new import SideSpec, new_manifest  # noqa: E402
from harness.cli import main  # noqa: E402
from harness.core.digest import sha256_hex  # noqa: E402
from harness.core.keys import load_public_key  # noqa: E402
from harness.core.manifest import SCHEMA_V3, load_manifest  # noqa: E402
from harness.core.names import MIXED, SIDES, SINGLE_TOPK  # noqa: E402
from harness.pins.pinning import pin  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PINS = ROOT / "evidence/pins"
PUB = ROOT / "tests/assets/keys/test-only-signing.pub"

pytestmark = [pytest.mark.slow, pytest.mark.sources]

VOCAB = 512
MATRIX = {
    "schema": "topp-gate/matrix/v1",
    "description": "top-k and mixed paths in the interpreter (test).",
    "backend": {"required": "interpreter", "interpreter_sm_count": 2},
    "limits": {"max_vocab": VOCAB, "max_batch": 4, "child_timeout_s": 600,
               "run_timeout_s": 1200, "max_bundle_bytes": 4194304},
    "cases": [
        {"id": "topk-v512", "kind": "traffic", "vocab": VOCAB, "batch": 4, "seed": 5,
         "rows": {"round": "bf16", "temperature": "0.7"},
         "sampling": [{"k": 5}, {"k": 20}, {"k": 1}, {"k": 100}]},
        {"id": "mixed-v512", "kind": "traffic", "vocab": VOCAB, "batch": 4, "seed": 6,
         "rows": {"round": "bf16", "temperature": "0.5"},
         "sampling": [{"p": "0.9"}, {"k": 20, "p": "0.9"}, {"k": 50}, {"k": 5, "p": "0.8"}]},
    ],
}


def _matrix(tmp_path: Path, data: dict) -> str:
    path = tmp_path / "matrix.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def _receipt(bundle: Path) -> dict:
    return json.loads((bundle / "receipt.json").read_bytes())["predicate"]


def test_topk_and_mixed_paths_run_and_verify(tmp_path, capsys, signing_key):
    out = tmp_path / "gate" / "deploy-vllm-test.json"
    v33 = PINS / "vllm-0.33.0.json"
    new_manifest({"stock": SideSpec(v33), "patched": SideSpec(v33)},
                 _matrix(tmp_path, MATRIX), out)
    manifest = load_manifest(out)
    assert manifest.data["schema"] == SCHEMA_V3 and manifest.rules == "serve/v1"
    assert {s: manifest.case_dispatch(s) for s in SIDES} == {
        s: {"topk-v512": SINGLE_TOPK, "mixed-v512": MIXED} for s in SIDES}

    bundle = tmp_path / "bundle"
    code = main(["run", "--manifest", str(out), "--out", str(bundle), "--key",
                 str(signing_key)])
    captured = capsys.readouterr()
    assert code in (0, 1), captured.err
    predicate = _receipt(bundle)
    assert "split_path_not_taken" not in predicate["run_stops"]
    for entry in predicate["cases"]:
        path = SINGLE_TOPK if entry["id"] == "topk-v512" else MIXED
        assert entry["paths"] == {"stock": path, "patched": path}
        assert entry["split_path"] is False
    for side in SIDES:
        evidence = predicate["kernel_path"][side]
        records = {r["id"]: r for r in evidence["cases"]}
        topk, mixed = records["topk-v512"], records["mixed-v512"]
        k_bytes = (bundle / "inputs").glob("topk-v512.k.i32*")
        assert next(k_bytes, None) is not None
        # the V2 sampler's arguments: no p when every p is 1.0; k and p for the mixed batch
        assert topk["sampler_arguments"] == {"k": "int32[batch]", "p": None}
        assert mixed["sampler_arguments"] == {"k": "int32[batch]", "p": "float32[batch]"}
        assert topk[SINGLE_TOPK]["proven"] and topk[SINGLE_TOPK]["entry_calls"] == 1
        assert topk[SINGLE_TOPK]["kernels_launched"] == ["_topk_topp_kernel"]
        # p is None: has_topp_only_rows is not passed (the entry sees its default, True)
        assert topk[SINGLE_TOPK]["entry"]["p_is_none"] is True
        proof = mixed[MIXED]
        assert proof["proven"], proof["problems"]
        assert proof["monolithic"]["split_covers_ponly"] and proof["split_entry_calls"] == 1
        assert proof["kernels_launched"][0] == "_topk_topp_kernel"
        assert proof["kernels_launched"][1:] == (
            ["_topp_sb_stats_kernel"] + ["_topp_sb_step_kernel"] * 5 + ["_topp_sb_mask_kernel"])
        assert mixed["prepared"]["platform"].startswith("vllm.platforms.cuda.CudaPlatform")
        assert topk["k_sha256"] == sha256_hex(
            b"".join(k.to_bytes(4, "little") for k in (5, 20, 1, 100)))
        # top-k rows keep at most k tokens; the top-k-only row of the mixed batch exactly k
        assert all(kept <= k for kept, k in zip(topk["kept_counts"], (5, 20, 1, 100),
                                                 strict=True))
        assert mixed["kept_counts"][2] == 50
    verdict = main(["verify", str(bundle), "--pubkey", str(PUB), "--frozen-manifest",
                    str(out)])
    assert verdict == code, capsys.readouterr()

    # the README table reads the signed receipt: one line per workload, paths as proven
    import deploy_table

    folder = tmp_path / "deploy-bundles"
    folder.mkdir()
    shutil.copytree(bundle, folder / "deploy-vllm-test-interpreter")
    section = deploy_table.generate(folder, load_public_key(PUB))
    assert "| 0.33.0 vs 0.33.0 | topk-v512 | single-topk -> single-topk | 4 |" in section
    assert "| 0.33.0 vs 0.33.0 | mixed-v512 | mixed -> mixed | 4 |" in section
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{section}outro\n", encoding="utf-8")
    args = ["--bundles", str(folder), "--pubkey", str(PUB), "--check", str(readme)]
    assert deploy_table.main(args) == 0
    readme.write_text(f"intro\n{section.replace('| 4 |', '| 5 |', 1)}outro\n")
    assert deploy_table.main(args) == 1


def test_a_family_from_the_tests_runs_and_verifies_without_a_core_edit(tmp_path, capsys,
                                                                     signing_key):
    tree = tmp_path / "src"
    shutil.copytree(torch_topp.TREE, tree)
    pinned = pin(str(tree), tmp_path / "pins" / "torch-topp.pin.json",
                 cache=tmp_path / "cache", family="torch-topp")
    matrix = {
        "schema": "topp-gate/matrix/v1", "description": "torch-topp end to end (test).",
        "backend": {"required": "interpreter", "interpreter_sm_count": 2},
        "limits": {"max_vocab": 256, "max_batch": 4, "child_timeout_s": 300,
                   "run_timeout_s": 600, "max_bundle_bytes": 1048576},
        "cases": [{"id": "ordinary-v256", "kind": "ordinary", "seed": 3, "batch": 3,
                   "vocab": 256}],
    }
    out = tmp_path / "gate" / "torch-topp.json"
    new_manifest({"stock": SideSpec(pinned.path), "patched": SideSpec(pinned.path)},
                 _matrix(tmp_path, matrix), out, cache=tmp_path / "cache")
    manifest = load_manifest(out)
    assert manifest.family("stock") == "torch-topp" and manifest.dispatch("stock") == "sort"
    assert manifest.rules == "seed/v2"
    bundle = tmp_path / "bundle"
    code = main(["run", "--manifest", str(out), "--out", str(bundle), "--key",
                 str(signing_key), "--cache", str(tmp_path / "cache")])
    assert code == 0, capsys.readouterr().err
    (entry,) = _receipt(bundle)["cases"]
    assert entry["paths"] == {"stock": "sort", "patched": "sort"}
    assert main(["verify", str(bundle), "--pubkey", str(PUB), "--frozen-manifest",
                 str(out)]) == 0, capsys.readouterr()
