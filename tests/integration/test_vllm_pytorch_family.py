"""vLLM's PyTorch path (family ``vllm-pytorch``) pinned from the real 0.33.0 wheel and run
in a real kernel child on the CPU: its functions loaded from the pinned file (no module
code), called as vLLM calls it, its ``sort`` path proven by observation, and its output
checked against the binary64 oracle's top-k then top-p convention (ties aside: vLLM's sort
keeps tied tokens with the highest ids, which the test reports rather than assumes away).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from harness import families
from harness.core.errors import KernelChildError
from harness.core.f32 import rows, to_float32
from harness.core.names import proven_cases
from harness.core.oracle import Certified, top_k_top_p
from harness.families.vllm_pytorch import FUNCTIONS, load_functions
from harness.kernels.runner import run_side
from harness.pins import sources
from harness.pins.pinfile import load_pin_file
from harness.pins.pinning import pin

ROOT = Path(__file__).resolve().parents[2]
PINS = ROOT / "evidence/pins"
VOCAB = 512
# (k or None, p or None) per row: top-p only, top-k only, both
ROWS = [(None, 0.9), (40, None), (64, 0.8), (None, 0.5)]

pytestmark = [pytest.mark.sources]


def _wheel(version: str) -> Path:
    side = load_pin_file(PINS / f"vllm-{version}.json").side("stock")
    cache = sources.cache_root()
    wheel = sources.verified_wheel(side, cache)
    return wheel if wheel is not None else sources.fetch_wheel(side, cache)


@pytest.fixture(scope="module")
def pinned(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pin")
    result = pin(str(_wheel("0.33.0")), tmp / "vllm-pytorch-0.33.0.json",
                 family="vllm-pytorch")
    return load_pin_file(result.path), result.tree


def _cases(root: Path, ks: list[int | None], ps: list[float | None]) -> tuple[Path, bytes]:
    import torch

    g = torch.Generator().manual_seed(11)
    logits = torch.randn(len(ks), VOCAB, generator=g).to(torch.bfloat16).to(torch.float32)
    data = logits.numpy().astype("<f4").tobytes()
    (root / "l.f32").write_bytes(data)
    (root / "p.f32").write_bytes(struct.pack(f"<{len(ps)}f", *[q or 1.0 for q in ps]))
    (root / "k.i32").write_bytes(struct.pack(f"<{len(ks)}i", *[k or VOCAB for k in ks]))
    index = {"schema": "topp-gate/cases/v1", "cases": [{
        "id": "mixed", "kind": "traffic", "batch": len(ks), "vocab": VOCAB,
        "logits": "l.f32", "p": "p.f32", "k": "k.i32", "rows": []}]}
    path = root / "cases.json"
    path.write_text(json.dumps(index))
    return path, data


def test_its_pin_holds_the_sampler_file_and_the_metadata_only(pinned):
    pin_file, _ = pinned
    assert pin_file.data["family"] == "vllm-pytorch"
    assert set(pin_file.data["files"]) == {
        "vllm/v1/sample/ops/topk_topp_sampler.py", "vllm-0.33.0.dist-info/METADATA"}
    assert pin_file.data["placeholders"] == []
    assert families.get("vllm-pytorch").kernel_path == pin_file.data["kernel_path"]


def test_the_sort_path_runs_and_is_proven_on_the_cpu(pinned, tmp_path):
    pin_file, tree = pinned
    side = pin_file.side("stock")
    cases, data = _cases(tmp_path, [k for k, _ in ROWS], [p for _, p in ROWS])
    result = run_side(side, tree, "interpreter", 4, cases, tmp_path / "out", timeout_s=300)
    assert result.ok, (result.reason, result.stderr_tail)
    evidence = result.evidence
    assert evidence["family"] == "vllm-pytorch" and evidence["dispatch"] == "sort"
    assert evidence["module_level_code_run"] is False
    assert evidence["vllm_version"] == "0.33.0"
    assert evidence["kernel_sha256"] == side.kernel_sha256
    assert proven_cases(evidence, "sort") == {"mixed": True}
    record = evidence["cases"][0]
    assert record["sort"]["k_given"] and record["sort"]["p_given"]
    assert record["k_sha256"] == sources.sha256_hex((tmp_path / "k.i32").read_bytes())
    out = rows((tmp_path / "out/mixed.out.f32").read_bytes(), VOCAB)
    for (k, p), got, given in zip(ROWS, out, rows(data, VOCAB), strict=True):
        kept = {i for i, v in enumerate(got) if v != float("-inf")}
        assert all(struct.pack("<f", got[i]) == struct.pack("<f", given[i]) for i in kept)
        answer = top_k_top_p(given, p32=None if p is None else to_float32(p), k=k)
        assert isinstance(answer, Certified)
        # the same count as the oracle, up to the tokens tied at its boundary
        boundary = min(given[i] for i in answer.kept)
        assert {i for i in kept if given[i] > boundary} == \
            {i for i in answer.kept if given[i] > boundary}
        assert abs(len(kept) - answer.count) <= 1


def test_top_p_only_rows_reach_it_without_k(pinned, tmp_path):
    pin_file, tree = pinned
    cases, _ = _cases(tmp_path, [None, None], [0.9, 0.5])
    result = run_side(pin_file.side("stock"), tree, "interpreter", 4, cases,
                      tmp_path / "out", timeout_s=300)
    assert result.ok, (result.reason, result.stderr_tail)
    proof = result.evidence["cases"][0]["sort"]
    assert proof["proven"] and not proof["k_given"] and proof["p_given"]


def test_loading_refuses_a_definition_that_reads_another_global(tmp_path):
    import torch

    source = tmp_path / "m.py"
    source.write_text("import os\n\ndef apply_top_k_top_p_pytorch(logits, k, p):\n"
                      "    return os.getcwd()\n\ndef apply_top_k_only(logits, k):\n"
                      "    return logits\n")
    with pytest.raises(KernelChildError, match="read globals os"):
        load_functions(source, "m", FUNCTIONS, {"torch": torch})
    source.write_text("def apply_top_k_only(logits, k):\n    return logits\n")
    with pytest.raises(AttributeError, match="apply_top_k_top_p_pytorch"):
        load_functions(source, "m", FUNCTIONS, {"torch": torch})


def test_a_whole_gate_of_its_top_k_and_top_p_rows_runs_signs_and_verifies(pinned, tmp_path,
                                                                          signing_key):
    """``manifest new`` (version 3, serve/v1) -> ``run`` on the CPU -> ``verify``, with rows
    that have top-k only, top-k and top-p, and top-p only."""
    from harness.capture.manifest_new import SideSpec, new_manifest
    from harness.cli import main

    pin_file, _ = pinned
    pin_path = tmp_path / "pins" / "vllm-pytorch-0.33.0.json"
    pin_path.parent.mkdir()
    pin_path.write_bytes(pin_file.raw)
    matrix = {
        "schema": "topp-gate/matrix/v1", "rules": "serve/v1",
        "description": "vllm-pytorch on CPU: bf16 rows with top-k, top-k then top-p, top-p.",
        "backend": {"required": "interpreter", "interpreter_sm_count": 4},
        "limits": {"max_vocab": 1024, "max_batch": 8, "child_timeout_s": 300,
                   "run_timeout_s": 600, "max_bundle_bytes": 1 << 22},
        "cases": [{"id": "traffic-bf16-v1024", "kind": "traffic", "vocab": 1024, "batch": 6,
                   "seed": 5, "rows": {"round": "bf16", "scale": "2"},
                   "sampling": [{"k": 20}, {"k": 50, "p": "0.8"}, {"p": "0.9"}]}],
    }
    (tmp_path / "m.json").write_text(json.dumps(matrix))
    side = SideSpec(pin_path, "sort")
    manifest = new_manifest({"stock": side, "patched": side}, str(tmp_path / "m.json"),
                            tmp_path / "gate" / "pytorch-cpu.json")
    key = signing_key
    out = tmp_path / "bundle"
    code = main(["run", "--manifest", str(manifest), "--out", str(out), "--key", str(key)])
    assert code in (0, 1) and (out / "receipt.dsse.json").is_file()
    rows = json.loads((out / "results/rows.json").read_text())
    rows = rows["rows"] if isinstance(rows, dict) else rows
    assert len(rows) == 6 and {r.get("k") for r in rows} == {20, 50, None}
    receipt = json.loads((out / "receipt.json").read_text())
    assert all(c["paths"] == {"stock": "sort", "patched": "sort"}
               for c in receipt["predicate"]["cases"])
    pub = ROOT / "tests/assets/keys/test-only-signing.pub"
    assert main(["verify", str(out), "--pubkey", str(pub), "--frozen-manifest",
                 str(manifest)]) == code
