"""``topp-gate keygen`` and ``topp-gate verify`` driven in-process through ``main(argv)``."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

from harness.cli import main

ROOT = Path(__file__).resolve().parents[2]
TAMPER = ROOT / "tests" / "assets" / "tamper"
PUB = str(ROOT / "tests" / "assets" / "keys" / "test-only-signing.pub")
sys.path.insert(0, str(ROOT / "tests" / "assets"))


def test_keygen_writes_a_0600_key_and_refuses_to_overwrite(tmp_path, capsys):
    prefix = tmp_path / "gate"
    assert main(["keygen", "--out", str(prefix)]) == 0
    out = capsys.readouterr().out
    assert "key id:" in out and "BEGIN" not in out  # the key itself is never printed
    assert stat.S_IMODE((tmp_path / "gate.key").stat().st_mode) == 0o600
    assert (tmp_path / "gate.pub").read_bytes().startswith(b"-----BEGIN PUBLIC KEY-----")
    before = (tmp_path / "gate.key").read_bytes()
    assert main(["keygen", "--out", str(prefix)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "refusing to overwrite" in err
    assert (tmp_path / "gate.key").read_bytes() == before


def test_verify_good_bundle_prints_what_was_verified(capsys):
    assert main(["verify", str(TAMPER / "good"), "--pubkey", PUB, "--workers", "2"]) == 0
    out = capsys.readouterr().out
    assert "key id 9aee0a6518caf58e952a7e10af43dd29795e4e42ba536283eb89080650b99752" in out
    assert "verdict: PASS" in out and "7 rows of 2 cases" in out


@pytest.mark.parametrize("name,code", [
    ("output_bit_flipped", "binding_mismatch"),
    ("resigned_other_key", "bad_signature"),
    ("payload_keys_reordered_resigned", "malformed_evidence"),
    ("row_result_edited_resigned", "binding_mismatch"),
])
def test_verify_tampered_bundle_exits_4_with_one_line(capsys, name, code):
    assert main(["verify", str(TAMPER / name), "--pubkey", PUB]) == 4
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"topp-gate: {code}: ") and captured.err.count("\n") == 1


def test_verify_strict_fails_on_harness_drift(capsys):
    name = str(TAMPER / "harness_digest_edited_resigned")
    assert main(["verify", name, "--pubkey", PUB]) == 0
    assert "DIFFERS" in capsys.readouterr().out
    assert main(["verify", name, "--pubkey", PUB, "--strict"]) == 4
    assert "harness_drift" in capsys.readouterr().err


def test_missing_bundle_is_usage(tmp_path, capsys):
    # a path that is not there is the caller's mistake (2), not a tampered bundle (4)
    assert main(["verify", str(tmp_path / "absent"), "--pubkey", PUB]) == 2
    assert "no bundle at" in capsys.readouterr().err


def test_usage_errors_exit_2(tmp_path, capsys):
    assert main(["verify"]) == 2  # no bundle
    junk = tmp_path / "junk.pub"
    junk.write_text("nope")
    assert main(["verify", str(TAMPER / "good"), "--pubkey", str(junk)]) == 2
    assert main(["verify", str(TAMPER / "good"), "--pubkey", PUB, "--workers", "0"]) == 2
    assert all(line.startswith("topp-gate: ") for line in capsys.readouterr().err.splitlines())


def test_without_pubkey_the_project_key_is_used_and_foreign_bundles_fail(capsys):
    # The synthetic fixtures are signed by a test-only key, not the project's key.
    assert main(["verify", str(TAMPER / "good")]) == 4
    captured = capsys.readouterr()
    assert "built-in topp-gate project evidence key" in captured.err  # stdout: results only
    assert "bad_signature" in captured.err


def _verify_with_stderr(stderr_is_tty: bool) -> tuple[int, bytes, str]:
    """Run verify in a child whose stderr is a pseudo-terminal (or a pipe); its stdout."""
    import os
    import pty
    import subprocess

    command = [sys.executable, "-m", "harness", "verify", str(TAMPER / "good"), "--pubkey",
               PUB, "--workers", "1"]
    if not stderr_is_tty:
        done = subprocess.run(command, capture_output=True, cwd=ROOT, timeout=120)
        return done.returncode, done.stderr, done.stdout.decode()
    leader, follower = pty.openpty()
    try:
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=follower, cwd=ROOT,
                              timeout=120)
        os.close(follower)
        follower = -1
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the terminal's other end is closed: all read
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    return done.returncode, b"".join(chunks), done.stdout.decode()


def test_verify_shows_row_progress_on_a_terminal_only():
    code, terminal, out = _verify_with_stderr(True)
    assert code == 0 and "verdict: PASS" in out
    assert b"verifying: oracle and gate rerun: 7 rows" in terminal
    code, piped, out = _verify_with_stderr(False)
    assert code == 0 and piped == b""  # a log or a pipe gets no progress noise
    assert "made from:" in out


def test_without_pubkey_each_committed_bundle_verifies_with_the_built_in_key_that_signed_it(
        capsys):
    """Two project keys are built in; the envelope's (unverified) key id only picks between
    them, and the signature must still verify with the one picked."""
    old = ROOT / "evidence/bundles/smoke-interpreter-20261129"
    sweep = ROOT / "evidence/sweep/bundles/sweep-vllm-0.30.0-cuda"
    assert main(["verify", str(old), "--workers", "1"]) == 1  # verified STOP
    assert "5b30f19bdf6bccea" in capsys.readouterr().out
    assert main(["verify", str(sweep), "--workers", "1"]) == 0  # verified PASS
    assert "64cdb84c39ee8d20" in capsys.readouterr().out


def test_a_bundle_signed_by_an_unknown_key_is_not_rescued_by_its_key_id_hint(capsys):
    assert main(["verify", str(TAMPER / "good"), "--workers", "1"]) == 4  # test-only key
    assert "bad_signature" in capsys.readouterr().err
