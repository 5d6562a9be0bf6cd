"""``topp-gate keygen --out DIR/prefix`` on a first run: the missing folders are made 0700."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from harness.cli import main


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_keygen_creates_missing_parent_folders_private(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    os.chmod(home, 0o755)
    prefix = home / ".config" / "topp-gate" / "signing"
    old_umask = os.umask(0o022)  # a common umask: it must not widen the folders
    try:
        assert main(["keygen", "--out", str(prefix)]) == 0
    finally:
        os.umask(old_umask)
    assert _mode(home / ".config") == 0o700
    assert _mode(home / ".config" / "topp-gate") == 0o700
    assert _mode(home) == 0o755, "an existing folder keeps its mode"
    assert _mode(prefix.with_suffix(".key")) == 0o600
    assert prefix.with_suffix(".pub").read_bytes().startswith(b"-----BEGIN PUBLIC KEY-----")


def test_keygen_refuses_a_parent_that_is_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "config").write_text("not a folder")
    assert main(["keygen", "--out", str(tmp_path / "config" / "topp-gate" / "signing")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert (tmp_path / "config").read_text() == "not a folder"
