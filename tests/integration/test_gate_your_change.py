"""Gate your own change, in Triton's interpreter on CPU, with version 2 manifests.

* a pre-split release (0.24.0, one Triton kernel) against the fix (0.33.0, split path):
  the child proves the single path, stock keeps the forced token, the gate passes;
* a split release (0.30.0) against the fix: stock loses the forced token at 1e30 (the
  defect), the fix keeps exactly one token;
* the example of a bad pull request: 0.33.0 with the fix reverted (a unified diff frozen on
  the patched side) STOPs on the forced rows;
* a side declared ``split`` that has only the one-kernel path STOPs with
  ``split_path_not_taken``.

Every bundle is then verified offline (signature, bindings, oracle and gate rerun).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.pins.pinfile import load_pin_file
from harness.pins.sources import cache_root, kernel_diff, resolve_tree

ROOT = Path(__file__).resolve().parents[2]
KEYS = ROOT / "tests/assets/keys"
PINS = ROOT / "evidence/pins"

pytestmark = [pytest.mark.slow, pytest.mark.sources]


def _manifest(tmp_path: Path, name: str, stock: str, patched: str, *extra: str) -> Path:
    out = tmp_path / f"{name}.json"
    assert main(["manifest", "new", "--stock", str(PINS / f"vllm-{stock}.json"),
                 "--patched", str(PINS / f"vllm-{patched}.json"),
                 "--matrix", "forced-interpreter", "--out", str(out), *extra]) == 0
    return out


def _run(manifest: Path, out: Path, key: Path, *extra: str) -> int:
    """``key``: the ``signing_key`` fixture, a 0600 copy (``run`` refuses a key others may
    read, and git checks the committed test key out as 0644)."""
    return main(["run", "--manifest", str(manifest), "--out", str(out), "--key", str(key),
                 *extra])


def _verify(bundle: Path, manifest: Path) -> int:
    return main(["verify", str(bundle), "--pubkey", str(KEYS / "test-only-signing.pub"),
                 "--frozen-manifest", str(manifest)])


def _receipt(bundle: Path) -> dict:
    return json.loads((bundle / "receipt.json").read_bytes())["predicate"]


def _forced(bundle: Path) -> list[dict]:
    rows = json.loads((bundle / "results/rows.json").read_bytes())
    return [row for row in rows if row["kind"] == "forced"]


def test_a_pre_split_release_proves_the_single_path_and_keeps_the_forced_token(
        tmp_path, signing_key):
    manifest = _manifest(tmp_path, "single", "0.24.0", "0.33.0")
    out = tmp_path / "bundle"
    assert _run(manifest, out, signing_key) == 0
    predicate = _receipt(out)
    assert all(case["paths"] == {"stock": "single", "patched": "split"}
               for case in predicate["cases"])
    stock = predicate["kernel_path"]["stock"]
    for record in stock["cases"]:
        assert record["single"]["proven"]
        assert [launch["kernel"] for launch in record["single"]["launches"]] == \
            ["_topk_topp_kernel"]
    for row in _forced(out):
        assert row["diagnostics"]["stock_forced_failures"] == []  # exactly-one: split only
        assert row["stock"]["kept"] >= 1 and row["patched"]["kept"] == 1
    assert _verify(out, manifest) == 0


def test_a_split_release_loses_the_forced_token_and_the_fix_keeps_exactly_one(
        tmp_path, signing_key):
    manifest = _manifest(tmp_path, "split", "0.30.0", "0.33.0")
    out = tmp_path / "bundle"
    assert _run(manifest, out, signing_key) == 0  # stock's failures are diagnostics, never a stop
    by_label = {row["row"]: row for row in _forced(out)}
    assert by_label[0]["diagnostics"]["stock_forced_failures"] == []  # 1e4 keeps it
    assert "forced_token_dropped" in by_label[1]["diagnostics"]["stock_forced_failures"]
    assert all(row["patched"]["kept"] == 1 for row in by_label.values())
    assert _verify(out, manifest) == 0


def test_a_bad_pull_request_reverting_the_fix_stops_on_the_forced_rows(tmp_path, signing_key):
    cache = cache_root()
    fixed = load_pin_file(PINS / "vllm-0.33.0.json").side("patched")
    broken = load_pin_file(PINS / "vllm-0.30.0.json").side("stock")
    revert = kernel_diff((resolve_tree(fixed, cache=cache) / fixed.kernel_path).read_bytes(),
                         (resolve_tree(broken, cache=cache) / broken.kernel_path).read_bytes(),
                         fixed.kernel_path)
    patch = tmp_path / "revert-the-fix.diff"
    patch.write_bytes(revert)
    manifest = _manifest(tmp_path, "bad-pr", "0.33.0", "0.33.0", "--patch", str(patch),
                         "--on", "patched")
    out = tmp_path / "bundle"
    assert _run(manifest, out, signing_key, "--patch", str(patch)) == 1
    verdict = _receipt(out)["verdict"]
    assert verdict["verdict"] == "STOP" and "forced_failure" in verdict["reasons"]
    assert _verify(out, manifest) == 1  # verified, and the verdict in it is STOP
    # the patch is frozen: running without it is refused before anything runs
    assert _run(manifest, tmp_path / "b2", signing_key) == 2
    assert not (tmp_path / "b2").exists()


def test_a_side_that_takes_another_path_than_declared_stops(tmp_path, signing_key):
    manifest = _manifest(tmp_path, "wrong-path", "0.24.0", "0.33.0", "--stock-path", "split")
    out = tmp_path / "bundle"
    assert _run(manifest, out, signing_key) == 1
    predicate = _receipt(out)
    assert "split_path_not_taken" in predicate["run_stops"]
    assert all(case["paths"]["stock"] is None for case in predicate["cases"])
    assert _verify(out, manifest) == 1  # verified STOP
