"""``topp-gate pr`` on a small interpreter matrix: the helpers the pr tests share.

The matrix is the newest interpreter PR matrix (``NEWEST_PR_MATRIX``) cut to its
``traffic-near-uniform-v2048`` case and two ordinary rows, with its rule set (``--matrix
FILE``), small enough for CI.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from harness.cli import main
from harness.pins.pinfile import load_pin_file
from harness.pins.sources import cache_root, resolve_tree
from harness.pr.flow import NEWEST_PR_MATRIX

ROOT = Path(__file__).resolve().parents[2]
PINS = ROOT / "evidence/pins"
BASE = PINS / "vllm-0.33.0.json"
PUB = ROOT / "tests/assets/keys/test-only-signing.pub"
KEEP = "        keep = (prob > pivot) | (x == M)\n"


def _kernel() -> bytes:
    side = load_pin_file(BASE).side("stock")
    return (resolve_tree(side, cache=cache_root()) / side.kernel_path).read_bytes()


def _diff(tmp_path: Path, name: str, old: str, new: str) -> Path:
    from harness.pins.sources import kernel_diff

    kernel = _kernel()
    assert kernel.count(old.encode()) == 1
    path = tmp_path / name
    path.write_bytes(kernel_diff(kernel, kernel.replace(old.encode(), new.encode()),
                                 load_pin_file(BASE).data["kernel_path"]))
    return path


# The backend these tests run on: Triton's interpreter, unless TOPP_GATE_TEST_BACKEND=cuda
# (scripts/device_untrusted.sh runs the attack tests so on the H200). The near-uniform case
# of the backend's newest PR matrix, and two ordinary rows.
BACKEND = os.environ.get("TOPP_GATE_TEST_BACKEND", "interpreter")
NEAR_UNIFORM = {"interpreter": "traffic-near-uniform-v2048", "cuda": "traffic-near-uniform-v32000"}


def _small_matrix(tmp_path: Path) -> Path:
    newest = NEWEST_PR_MATRIX[BACKEND]
    packaged = json.loads((ROOT / f"harness/data/matrices/{newest}.json").read_bytes())
    cases = [c for c in packaged["cases"] if c["id"] == NEAR_UNIFORM[BACKEND]]
    assert len(cases) == 1, f"{newest} has no case {NEAR_UNIFORM[BACKEND]}"
    cases.append({"id": "ordinary-s42-b2-v1024", "kind": "ordinary", "seed": 42, "batch": 2,
                  "vocab": 1024})
    matrix = {key: packaged[key] for key in ("schema", "rules", "backend", "limits")}
    matrix["description"] = f"pr test: {newest}'s near-uniform case, 2 ordinary rows"
    matrix["cases"] = cases
    path = tmp_path / "small-pr.json"
    path.write_text(json.dumps(matrix, indent=1), encoding="utf-8")
    return path


def _pr(tmp_path: Path, key: Path, out: Path, *change: str, base: str = str(BASE)) -> int:
    return main(["pr", base, *change, "--backend", BACKEND,
                 "--matrix", str(_small_matrix(tmp_path)), "--key", str(key),
                 "--out", str(out), "--base-cache", str(tmp_path / "bases"), "--workers", "1"])
