"""``topp-gate verify --json`` (for CI scripts) and ``--regenerate`` (rebuild the captured
inputs from the manifest), driven in-process through ``main(argv)``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harness.cli import main

ROOT = Path(__file__).resolve().parents[2]
PUB = str(ROOT / "tests" / "assets" / "keys" / "test-only-signing.pub")
SMOKE = ROOT / "evidence" / "bundles" / "smoke-interpreter-20261129"
PROJECT_PUB = str(ROOT / "evidence" / "keys" / "topp-gate-evidence.pub")
sys.path.insert(0, str(ROOT / "tests" / "assets"))
import synthetic  # noqa: E402


def _json(capsys) -> dict:
    out = capsys.readouterr().out
    assert out.count("\n") == 1  # exactly one JSON object
    return json.loads(out)


def test_json_of_a_verified_stop_names_rows_by_reason_and_the_judgement(capsys):
    assert main(["verify", str(SMOKE), "--pubkey", PROJECT_PUB, "--json"]) == 1
    found = _json(capsys)
    assert found["verified"] is True and found["verdict"] == "STOP"
    assert found["stopped_rows_by_reason"] == {"count_bound": 2, "stock_under_keep": 3}
    assert (found["rules"], found["report_format"]) == ("seed/v1", "report/v1")
    assert found["regenerated_inputs"] is None
    assert found["harness"]["recorded"] != found["harness"]["this_verifier"]


def test_json_without_pubkey_is_one_json_object_on_stdout(capsys):
    # the note naming the built-in key goes to stderr, so a CI script can parse stdout
    assert main(["verify", str(SMOKE), "--json"]) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out)["verified"] is True
    assert "built-in topp-gate project evidence key" in captured.err


def test_json_of_a_refused_bundle_names_the_code_and_keeps_exit_4(tmp_path, capsys):
    synthetic.write_v3(tmp_path / "b", lie_inputs=True)
    assert main(["verify", str(tmp_path / "b"), "--pubkey", PUB, "--json"]) == 4
    captured = capsys.readouterr()
    found = json.loads(captured.out)
    assert found["verified"] is False and found["code"] == "binding_mismatch"
    assert found["exit_code"] == 4 and captured.err.count("\n") == 1


def test_regenerate_rebuilds_a_real_bundles_inputs_byte_for_byte(capsys):
    pytest.importorskip("torch")
    assert main(["verify", str(SMOKE), "--pubkey", PROJECT_PUB, "--json",
                 "--regenerate"]) == 1
    assert _json(capsys)["regenerated_inputs"] == 14


def test_regenerate_refuses_inputs_no_generator_made(tmp_path, capsys):
    # the synthetic bundle's random rows come from Python's random, not the manifest's
    # torch generator: every check without torch passes, the rebuild does not
    pytest.importorskip("torch")
    synthetic.write_v3(tmp_path / "b")
    assert main(["verify", str(tmp_path / "b"), "--pubkey", PUB]) == 0
    capsys.readouterr()
    assert main(["verify", str(tmp_path / "b"), "--pubkey", PUB, "--regenerate"]) == 4
    assert "rebuilt from the manifest" in capsys.readouterr().err
