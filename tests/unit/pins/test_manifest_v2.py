"""Version 2 manifests: sides by pin file, a frozen patch, dispatch paths; `manifest new`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness.capture.manifest_new import (
    SideSpec,
    detect_dispatch,
    load_matrix,
    matrix_names,
    new_manifest,
)
from harness.cli import main
from harness.core.errors import ManifestError, UsageError
from harness.core.manifest import PINNED_BY_FILE, PINNED_INLINE, load_manifest, parse_manifest
from harness.pins.pinfile import load_pin_file

ROOT = Path(__file__).resolve().parents[3]
SWEEP = ROOT / "evidence/manifests/sweep"
PINS = ROOT / "evidence/pins"


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split("."))


def test_committed_sweep_manifests_are_frozen_and_name_their_pins():
    manifests = sorted(SWEEP.glob("*.json"))
    assert len(manifests) == 24  # 0.17.0 .. 0.32.0 as stock
    for path in manifests:
        manifest = load_manifest(path)
        assert manifest.pinned_by == PINNED_BY_FILE and manifest.receipt_paths
        assert manifest.backend["required"] == "cuda"
        for side in ("stock", "patched"):
            entry = manifest.sources["sides"][side]
            pin = load_pin_file(manifest.pin_path(side), expected_sha256=entry["pin_sha256"])
            assert pin.version == entry["version"]
            assert pin.data["kernel_sha256"] == entry["kernel_sha256"]
            kernel_is_split = _version(pin.version) >= (0, 30, 0)
            assert manifest.dispatch(side) == ("split" if kernel_is_split else "single")
        assert manifest.sources["sides"]["patched"]["version"] == "0.33.0"
        assert manifest.limits["max_bundle_bytes"] == 4 * 1024 * 1024


def test_version_1_manifests_still_load():
    for name in ("h200-forced-logit-gate.json", "smoke-interpreter.json"):
        manifest = load_manifest(ROOT / "evidence/manifests" / name)
        assert manifest.pinned_by == PINNED_INLINE and not manifest.receipt_paths
        assert manifest.patch_sha256 == manifest.sources["patch_sha256"]
        for side in ("stock", "patched"):
            assert manifest.family(side) == "vllm-triton" and manifest.side_patch(side) is None
            assert manifest.sides[side].receipt_pins == {
                key: manifest.sources["sides"][side][key]
                for key in ("version", "wheel", "wheel_sha256", "kernel_sha256")}
        assert manifest.dispatch("stock") == manifest.dispatch("patched") == "split"


def test_detect_dispatch_reads_the_split_entry_point():
    assert detect_dispatch(b"x = 1\ndef _apply_topp_split(logits):\n    pass\n") == "split"
    assert detect_dispatch(b"def apply_top_k_top_p_triton(logits, k, p):\n    pass\n") \
        == "single"


def test_manifest_new_writes_a_frozen_manifest_and_never_overwrites(tmp_path):
    out = tmp_path / "gate" / "mine.json"
    sides = {"stock": SideSpec(PINS / "vllm-0.26.0.json", "single"),
             "patched": SideSpec(PINS / "vllm-0.33.0.json", "split")}
    new_manifest(sides, "forced-interpreter", out, cache=tmp_path / "empty-cache")
    manifest = load_manifest(out)
    assert manifest.name == "mine"
    assert not manifest.sources["sides"]["stock"]["pin"].startswith("/")  # relative
    assert manifest.pin_path("stock").resolve() == (PINS / "vllm-0.26.0.json").resolve()
    assert re.fullmatch(r"[0-9a-f]{64}  mine\.json\n",
                        out.with_name("mine.json.sha256").read_text())
    with pytest.raises(UsageError, match="never overwritten"):
        new_manifest(sides, "forced-interpreter", out, cache=tmp_path / "empty-cache")


def test_manifest_new_without_a_cached_tree_needs_the_path(tmp_path, capsys):
    code = main(["manifest", "new", "--stock", str(PINS / "vllm-0.26.0.json"), "--patched",
                 str(PINS / "vllm-0.33.0.json"), "--matrix", "smoke", "--cache",
                 str(tmp_path / "empty"), "--out", str(tmp_path / "m.json")])
    assert code == 2
    assert "not in the cache" in capsys.readouterr().err
    assert not (tmp_path / "m.json").exists()


def test_every_predeclared_matrix_makes_a_valid_manifest(tmp_path):
    assert {"forced-logit", "smoke", "sweep", "forced-interpreter"} <= set(matrix_names())
    for name in matrix_names():
        out = tmp_path / f"{name}.json"
        sides = {"stock": SideSpec(PINS / "vllm-0.30.0.json", "split"),
                 "patched": SideSpec(PINS / "vllm-0.33.0.json", "split")}
        if "sampling" in load_matrix(name):  # declared draws: read by a sampling path only
            with pytest.raises(UsageError, match="no case takes a path that draws tokens"):
                new_manifest(sides, name, out, cache=tmp_path / "empty")
            sides = {side: SideSpec(PINS / "flashinfer-0.7.2.post1.json", "top-p-sampling")
                     for side in sides}
        new_manifest(sides, name, out, cache=tmp_path / "empty")
        assert load_manifest(out).cases


def test_a_patch_on_both_sides_is_refused():
    raw = json.loads((SWEEP / "sweep-vllm-0.30.0.json").read_bytes())
    for side in ("stock", "patched"):
        raw["sources"]["sides"][side]["patch"] = {"sha256": "1" * 64, "kernel_sha256": "2" * 64}
    with pytest.raises(ManifestError, match="one side only"):
        parse_manifest(json.dumps(raw).encode())


def test_an_unknown_dispatch_path_fails_the_schema():
    raw = json.loads((SWEEP / "sweep-vllm-0.30.0.json").read_bytes())
    raw["sources"]["sides"]["stock"]["dispatch"] = "monolithic"
    with pytest.raises(ManifestError, match="schema violation"):
        parse_manifest(json.dumps(raw).encode())


def test_a_sampler_path_under_a_masking_rule_set_is_refused_before_writing(tmp_path, capsys):
    """FlashInfer's samplers return draws: judged by serve/v1 (which the deployment matrix
    predeclares) every row would stop on a sample's gaps. Given paths need no cached tree."""
    fi = PINS / "flashinfer-0.7.2.post1.json"
    out = tmp_path / "fi.json"
    code = main(["manifest", "new", "--stock", str(fi), "--patched", str(fi), "--stock-path",
                 "top-p-sampling", "--patched-path", "top-p-sampling", "--matrix", "deploy",
                 "--cache", str(tmp_path / "empty"), "--out", str(out)])
    assert code == 2
    err = capsys.readouterr().err
    assert "top-p-sampling draws tokens" in err and "support/v1, not serve/v1" in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists() and not out.with_name("fi.json.sha256").exists()
    # a masking path of the same family under serve/v1 is what that rule set judges
    assert main(["manifest", "new", "--stock", str(fi), "--patched", str(fi), "--stock-path",
                 "top-k-mask", "--patched-path", "top-k-mask", "--matrix", "deploy",
                 "--cache", str(tmp_path / "empty"), "--out", str(out)]) == 0


def test_a_sampler_side_path_no_case_takes_is_not_refused(tmp_path, capsys):
    """The side's own path counts only where a case takes it: a matrix whose every case names
    a masking path for both sides (the FlashInfer PR #2325 replay) is a masking matrix, even
    though the family's default path draws tokens; one case left on the default is refused."""
    fi = PINS / "flashinfer-0.7.2.post1.json"
    cases = [{"id": "masked", "kind": "traffic", "vocab": 64, "batch": 2, "seed": 1,
              "sampling": [{"k": 5}], "paths": {"stock": "top-k-mask",
                                                 "patched": "top-k-mask"}}]
    matrix = {"schema": "topp-gate/matrix/v1", "description": "masking paths only",
              "rules": "regression/v2",
              "backend": {"required": "cuda", "interpreter_sm_count": 132},
              "limits": {"max_vocab": 64, "max_batch": 8, "child_timeout_s": 60,
                         "run_timeout_s": 600, "max_bundle_bytes": 1 << 20},
              "cases": cases}
    path = tmp_path / "matrix.json"
    path.write_text(json.dumps(matrix), "utf-8")
    args = ["manifest", "new", "--stock", str(fi), "--patched", str(fi), "--stock-path",
            "top-p-sampling", "--patched-path", "top-p-sampling", "--matrix", str(path),
            "--cache", str(tmp_path / "empty")]
    assert main([*args, "--out", str(tmp_path / "ok.json")]) == 0
    cases.append({**cases[0], "id": "default", "paths": {"stock": "top-k-mask"}})
    path.write_text(json.dumps(matrix), "utf-8")
    assert main([*args, "--out", str(tmp_path / "refused.json")]) == 2
    assert "patched side: flashinfer path top-p-sampling draws tokens" in capsys.readouterr().err
