"""The real pinned vLLM kernels in Triton's interpreter (CPU), one child per side.

Small shapes keep this cheap: batch 4, vocab 8192, SM count 2 (one slice per row on both
versions), so each side runs 7 launches of 4 programs. The defect must reproduce on stock
(a forced 1e30 logit leaves no token) and the fix must hold on patched (exactly the forced
token survives); ordinary rows must sit inside the seed's count envelope around the binary64
oracle on both sides; both children must report the same input hashes.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pytest

from harness.core.f32 import decode, rows, to_float32
from harness.core.gate import within_count_bound
from harness.core.names import SIDES
from harness.core.oracle import Certified, reference
from harness.kernels.runner import run_side
from harness.pins import sources

pytestmark = [pytest.mark.slow, pytest.mark.sources]

VOCAB = 8192
NUM_SM = 2
FORCED = [(0, 0.9), (VOCAB - 1, 0.5)]  # (forced id, p) for rows 0 and 1; rows 2-3 ordinary


def _write_case(root: Path) -> Path:
    import torch

    background = torch.randn(VOCAB, generator=torch.Generator().manual_seed(11))
    logits = background.repeat(4, 1)
    for row, (token, _) in enumerate(FORCED):
        logits[row, token] = 1e30
    g = torch.Generator().manual_seed(12)
    logits[2:] = torch.randn(2, VOCAB, generator=g)
    p = torch.tensor([p for _, p in FORCED] + [0.0, 0.0], dtype=torch.float32)
    p[2:] = torch.rand(2, generator=g) * 0.9 + 0.1
    (root / "inputs").mkdir()
    (root / "inputs/mixed.logits.f32").write_bytes(logits.numpy().astype("<f4").tobytes())
    (root / "inputs/mixed.p.f32").write_bytes(p.numpy().astype("<f4").tobytes())
    index = {"schema": "topp-gate/cases/v1", "cases": [{
        "id": "mixed", "kind": "forced", "batch": 4, "vocab": VOCAB,
        "logits": "inputs/mixed.logits.f32", "p": "inputs/mixed.p.f32",
        "rows": [{"judge": "forced", "forced_id": t, "label": f"value=1e30 p={p} id={t}"}
                 for t, p in FORCED] + [{"judge": "ordinary", "label": "randn"}] * 2,
    }]}
    path = root / "cases.json"
    path.write_text(json.dumps(index))
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    root = tmp_path_factory.mktemp("interp")
    cases = _write_case(root)
    pins = sources.load_pins()
    cache = sources.cache_root()
    results = {}
    for name in SIDES:
        side = pins.side(name)
        sources.fetch_wheel(side, cache, quiet=True)
        tree = sources.resolve_tree(side, cache=cache)
        results[name] = run_side(side, tree, "interpreter", NUM_SM, cases,
                                 root / f"out-{name}", timeout_s=900)
    results["root"] = root
    return results


def _outputs(result: object) -> list[list[float]]:
    data = (result.out_dir / "mixed.out.f32").read_bytes()  # type: ignore[attr-defined]
    return rows(data, VOCAB)


def _kept(values: list[float]) -> list[int]:
    return [i for i, v in enumerate(values) if v != -math.inf]


@pytest.mark.parametrize("name", SIDES)
def test_child_ran_the_split_path_in_the_interpreter(runs, name):
    result = runs[name]
    assert result.status == "ok", (result.reason, result.stderr_tail)
    ev = result.evidence
    pins = sources.load_pins()
    assert ev["backend"] == "interpreter" and ev["interpreter"] is True
    assert ev["env"] == {"TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}
    assert ev["kernel_sha256"] == pins.side(name).kernel_sha256
    assert ev["vllm_version"] == pins.side(name).version
    assert ev["vllm_modules_all_from_tree"] is True
    assert ev["placeholders_installed"] == list(pins.side(name).placeholders)
    (case,) = ev["cases"]
    split = case["split"]
    assert split["proven"] and split["entry_calls"] == 1 and not split["monolithic_launched"]
    assert split["num_sm"] == NUM_SM and split["slices"] == 1
    assert [(s["stage"], s["count"], s["grid"]) for s in split["launches"]] == [
        ("stats", 1, [4]), ("step", 5, [4]), ("mask", 1, [4])]


def test_stock_reproduces_the_defect(runs):
    out = _outputs(runs["stock"])
    for row, _ in enumerate(FORCED):
        assert _kept(out[row]) == []


def test_patched_keeps_exactly_the_forced_token(runs):
    out = _outputs(runs["patched"])
    for row, (token, _) in enumerate(FORCED):
        assert _kept(out[row]) == [token]
        assert out[row][token] == to_float32(1e30)  # the kept logit is untouched


@pytest.mark.parametrize("name", SIDES)
def test_ordinary_rows_inside_the_oracle_envelope(runs, name):
    root = runs["root"]
    logits = rows((root / "inputs/mixed.logits.f32").read_bytes(), VOCAB)
    p = decode((root / "inputs/mixed.p.f32").read_bytes())
    out = _outputs(runs[name])
    for row in (2, 3):
        oracle = reference(logits[row], p[row], row=row)
        assert isinstance(oracle, Certified)
        kept = _kept(out[row])
        assert within_count_bound(len(kept), oracle.count), (len(kept), oracle.count)
        assert all(out[row][i] == logits[row][i] for i in kept)  # kept logits untouched


def test_both_sides_read_the_same_bytes(runs):
    root = runs["root"]
    def digest(what: str) -> str:
        return hashlib.sha256((root / f"inputs/mixed.{what}.f32").read_bytes()).hexdigest()

    want = {f"{what}_sha256": digest(what) for what in ("logits", "p")}
    for name in SIDES:
        (case,) = runs[name].evidence["cases"]
        assert {k: case[k] for k in want} == want
