"""`topp-gate run --patch`: gate stock plus a team's own unified diff of the kernel file.

The diff used here is the upstream fix itself (stock 0.30.0 kernel -> 0.33.0 kernel), so
the candidate must reproduce the fix: the forced row keeps exactly its forced token. The
manifest freezes the patch's sha256 and names, for the patched side, stock's wheel with
the patched kernel's sha256; the bundle then verifies offline like any other.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.pins.sources import cache_root, kernel_diff, load_pins, resolve_tree

ROOT = Path(__file__).resolve().parents[2]
KEYS = ROOT / "tests/assets/keys"
SMOKE = ROOT / "evidence/manifests/smoke-interpreter.json"

pytestmark = [pytest.mark.slow, pytest.mark.sources]


def _freeze(path: Path, data: dict) -> Path:
    raw = json.dumps(data, indent=2).encode() + b"\n"
    path.write_bytes(raw)
    path.with_name(path.name + ".sha256").write_text(
        f"{hashlib.sha256(raw).hexdigest()}  {path.name}\n")
    return path


def test_run_with_a_user_patch_gates_the_candidate_and_verifies(tmp_path, capsys, signing_key):
    pins = load_pins()
    stock, patched = pins.side("stock"), pins.side("patched")
    cache = cache_root()
    stock_kernel = (resolve_tree(stock, cache=cache) / stock.kernel_path).read_bytes()
    fixed_kernel = (resolve_tree(patched, cache=cache) / patched.kernel_path).read_bytes()
    diff = kernel_diff(stock_kernel, fixed_kernel, stock.kernel_path)
    patch = tmp_path / "my-fix.diff"
    patch.write_bytes(diff)

    manifest = copy.deepcopy(json.loads(SMOKE.read_bytes()))
    manifest["name"] = "user-patch-smoke"
    manifest["sources"]["patch_sha256"] = hashlib.sha256(diff).hexdigest()
    manifest["sources"]["sides"]["patched"] = {
        "version": stock.version, "wheel": stock.wheel, "wheel_sha256": stock.wheel_sha256,
        "kernel_sha256": hashlib.sha256(fixed_kernel).hexdigest()}
    manifest["cases"] = [{"id": "forced-v1024", "kind": "forced", "vocab": 1024,
                          "background_seed": 0,
                          "grid": {"value": ["1e30"], "p": ["0.9"], "forced_id": [3]}}]
    path = _freeze(tmp_path / "user-patch-smoke.json", manifest)

    out = tmp_path / "bundle"
    code = main(["run", "--manifest", str(path), "--patch", str(patch), "--out", str(out),
                 "--key", str(signing_key)])
    assert code == 0, capsys.readouterr()
    rows = json.loads((out / "results/rows.json").read_bytes())
    assert rows[0]["patched"]["kept"] == 1
    assert rows[0]["diagnostics"]["stock_forced_failures"]  # stock still shows the defect
    assert main(["verify", str(out), "--pubkey", str(KEYS / "test-only-signing.pub"),
                 "--frozen-manifest", str(path)]) == 0

    # A different patch file than the one the manifest froze is refused before anything runs.
    other = tmp_path / "other.diff"
    other.write_bytes(diff.replace(b"\n+", b"\n+ ", 1))
    assert main(["run", "--manifest", str(path), "--patch", str(other), "--out",
                 str(tmp_path / "b2"), "--key", str(signing_key)]) == 2
    assert "evidence_drift" in capsys.readouterr().err
    assert not (tmp_path / "b2").exists()
