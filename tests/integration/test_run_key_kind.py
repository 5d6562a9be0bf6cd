"""``run --key`` given a public key file says so (issue 29: it answered with advice to chmod
the file, which cannot help: the signer needs the private key)."""

from __future__ import annotations

from pathlib import Path

from harness.cli import main
from harness.core.errors import EXIT_USAGE

ROOT = Path(__file__).resolve().parents[2]
KEYS = ROOT / "tests" / "assets" / "keys"
MANIFEST = ROOT / "evidence" / "manifests" / "smoke-interpreter.json"


def test_run_with_a_public_key_names_it_a_public_key(tmp_path, capsys):
    pub = tmp_path / "signing.pub"
    pub.write_bytes((KEYS / "test-only-signing.pub").read_bytes())
    pub.chmod(0o644)  # as keygen writes it: the old answer was "run: chmod 600"
    code = main(["run", "--manifest", str(MANIFEST), "--backend", "interpreter",
                 "--key", str(pub), "--out", str(tmp_path / "bundle")])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE
    assert err.count("\n") == 1 and "holds a public key" in err and "key id " in err
    assert "chmod" not in err
    assert not (tmp_path / "bundle").exists()

