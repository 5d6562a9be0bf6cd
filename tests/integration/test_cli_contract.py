"""The exit-code contract, safe to script: 0 only for success (a verified PASS), 1 only for a
gate STOP, 2 usage, 4 verification failed, 5 internal error; plus the small CLI defects of
issue 9 (SIGPIPE, half-printed oracle output, key files, help text, the gpu extra)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness import cli
from harness.cli import main
from harness.core.errors import EXIT_INTERNAL, EXIT_STOP, EXIT_USAGE
from harness.core.f32 import encode

ROOT = Path(__file__).resolve().parents[2]
TAMPER = ROOT / "tests" / "assets" / "tamper"
KEYS = ROOT / "tests" / "assets" / "keys"
PUB = str(KEYS / "test-only-signing.pub")
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def test_a_verified_stop_exits_1_and_a_verified_pass_exits_0(capsys):
    smoke = next((ROOT / "evidence/bundles").glob("smoke-interpreter-*"))
    assert main(["verify", str(smoke), "--pubkey",
                 str(ROOT / "evidence/keys/topp-gate-evidence.pub"), "--workers", "1"]) \
        == EXIT_STOP
    assert "verdict: STOP" in capsys.readouterr().out
    assert main(["verify", str(TAMPER / "good"), "--pubkey", PUB, "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "verdict: PASS" in out and "(1 process)" in out


def test_an_unexpected_exception_is_exit_5_with_one_line(monkeypatch, capsys):
    import harness.commands.keygen as keygen

    def broken(args):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(keygen, "run", broken)
    assert main(["keygen", "--out", "x"]) == EXIT_INTERNAL
    err = capsys.readouterr().err
    assert err.startswith("topp-gate: internal_error: unexpected ZeroDivisionError: a bug")
    assert err.count("\n") == 1 and EXIT_INTERNAL != EXIT_STOP


def test_top_level_help_is_a_description_and_the_exit_codes(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert cli.DESCRIPTION.split("?")[0] in out
    assert "main(argv)" not in out and "``" not in out
    for line in ("1    gate STOP", "4    verification failed", "5    internal error"):
        assert line in out


def test_verify_help_states_the_exit_codes(capsys):
    assert main(["verify", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Exit 0 only for a verified PASS, 1 for a verified STOP" in out


def test_oracle_into_head_ends_quietly(tmp_path):
    logits = tmp_path / "rows.f32"
    logits.write_bytes(encode([float(i % 7) for i in range(64 * 2000)]))
    done = subprocess.run(f"{sys.executable} -m harness oracle {logits} --p 0.9 --vocab 64 "
                          "--json | head -1", shell=True, env=ENV, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.stdout.startswith('{"row":0,')
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr


def test_oracle_prints_nothing_when_a_later_row_is_bad(tmp_path, capsys):
    rows = [1.0, 2.0, 3.0, 4.0] * 3
    rows[-1] = float("nan")
    path = tmp_path / "rows.f32"
    path.write_bytes(encode(rows))
    assert main(["oracle", str(path), "--p", "0.9", "--vocab", "4", "--json"]) == EXIT_USAGE
    captured = capsys.readouterr()
    assert captured.out == "" and "non_finite_logit" in captured.err


@pytest.mark.parametrize("prefix", ["", "."])
def test_keygen_refuses_a_prefix_that_names_no_file(tmp_path, capsys, monkeypatch, prefix):
    monkeypatch.chdir(tmp_path)  # restored after: later tests of this worker keep their cwd
    assert main(["keygen", "--out", prefix]) == EXIT_USAGE
    assert "names no file" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def _der_spki_with_unknown_oid() -> bytes:
    """SubjectPublicKeyInfo with algorithm OID 1.2.3.4 and 32 key bytes."""
    algorithm = bytes.fromhex("300506032a0304")  # SEQUENCE { OID 1.2.3.4 }
    key = b"\x03\x21\x00" + b"\x01" * 32  # BIT STRING, no unused bits
    body = algorithm + key
    return b"\x30" + bytes([len(body)]) + body


def test_an_unknown_key_algorithm_is_exit_2_with_one_line(tmp_path, capsys):
    import base64

    pem = (b"-----BEGIN PUBLIC KEY-----\n" + base64.encodebytes(_der_spki_with_unknown_oid())
           + b"-----END PUBLIC KEY-----\n")
    path = tmp_path / "odd.pub"
    path.write_bytes(pem)
    assert main(["verify", str(TAMPER / "good"), "--pubkey", str(path)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "unsupported algorithm" in err and err.count("\n") == 1
    private = tmp_path / "odd.key"
    private.write_bytes(pem.replace(b"PUBLIC", b"PRIVATE"))
    from harness.capture.signing import load_private_key
    from harness.core.errors import UsageError

    with pytest.raises(UsageError):
        load_private_key(private)


def test_a_missing_frozen_manifest_is_exit_2(tmp_path, capsys):
    assert main(["verify", str(TAMPER / "good"), "--pubkey", PUB, "--frozen-manifest",
                 str(tmp_path / "typo.json")]) == EXIT_USAGE
    assert "No such file" in capsys.readouterr().err


def test_run_refuses_a_private_key_readable_by_others(tmp_path):
    from harness.capture.signing import load_private_key
    from harness.core.errors import UsageError

    key = tmp_path / "k.key"
    key.write_bytes((KEYS / "test-only-signing.key").read_bytes())
    key.chmod(0o644)
    with pytest.raises(UsageError, match="accessible by group or others.*chmod 600"):
        load_private_key(key, owner_only=True)
    key.chmod(0o600)
    load_private_key(key, owner_only=True)
    assert stat.S_IMODE(key.stat().st_mode) == 0o600


@pytest.mark.parametrize("verb,args", [
    ("run", ["--out", "b"]),
    ("kernels", ["--logits", "x", "--vocab", "4", "--p", "0.9", "--backend", "interpreter",
                 "--out", "o"]),
])
def test_kernel_verbs_without_the_gpu_extra_exit_2(tmp_path, verb, args):
    script = textwrap.dedent(f"""
        import sys
        class NoGpuExtra:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("torch", "triton", "rich"):
                    raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        sys.meta_path.insert(0, NoGpuExtra())
        from harness.cli import main
        sys.exit(main({[verb, *args]!r}))
    """)
    done = subprocess.run([sys.executable, "-c", script], env=ENV, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == EXIT_USAGE, done.stderr
    from harness.install_hint import install_command

    assert f"needs the gpu extra: {install_command('gpu')}" in done.stderr
    assert done.stderr.count("\n") == 1
