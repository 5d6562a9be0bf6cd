"""A run whose kernel children crash is still a complete, signed bundle that verifies as a
STOP: the report written at run time must be the one ``verify`` regenerates from the
receipt (a side without evidence once made them differ, and such a bundle was refused)."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

import harness.capture.run as run_module
from harness.cli import main

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "evidence/manifests/smoke-interpreter.json"
PUB = ROOT / "tests/assets/keys/test-only-signing.pub"

pytestmark = [pytest.mark.slow, pytest.mark.sources]


def test_crashed_children_give_a_verified_stop_with_a_matching_report(tmp_path, monkeypatch,
                                                                     signing_key):
    # The real runner and real children; the runner's own test hook makes each child abort
    # right after importing its kernel (TOPP_GATE_TEST_FAULT), as a crashing kernel would.
    monkeypatch.setattr(run_module, "run_side",
                        functools.partial(run_module.run_side, fault="abort"))
    out = Path("runs/crashed")  # relative, as scripts/gate and the Nix wrapper pass it
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--manifest", str(SMOKE), "--out", str(out), "--backend",
                 "interpreter", "--key", str(signing_key)]) == 1
    predicate = json.loads((tmp_path / out / "receipt.json").read_bytes())["predicate"]
    assert predicate["verdict"]["verdict"] == "STOP"
    assert "kernel_crash" in predicate["verdict"]["reasons"]
    assert all(case[side] == "kernel_crash" for case in predicate["cases"]
               for side in ("stock", "patched"))
    assert main(["verify", str(out), "--pubkey", str(PUB), "--frozen-manifest",
                 str(SMOKE)]) == 1  # verified, and the verdict is STOP
