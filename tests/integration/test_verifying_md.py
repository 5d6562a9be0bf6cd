"""VERIFYING.md's `sh` blocks, pasted in order into one fresh shell on a fresh clone (issue 18):
no activated virtual environment, nothing prepared. `REPO` becomes this checkout and `/tmp/`
the test's own folder; a line ending in `# exits N` must exit N, every other line 0.

Slow (two base installs from the network's package index and two verifies: about a minute).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "assets"))
from pasted import documented_commands as _commands  # noqa: E402
from pasted import paste  # noqa: E402

pytestmark = pytest.mark.slow


def documented_commands() -> list[tuple[str, int]]:
    return _commands(ROOT / "VERIFYING.md")


def test_verifying_md_names_commands_with_expected_exit_codes() -> None:
    commands = documented_commands()
    assert commands[0][0].startswith("git clone REPO")
    assert any("--strict" in c and code == 0 for c, code in commands)
    assert {0, 1} <= {code for _, code in commands}


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                    reason="needs git and this checkout's history")
def test_every_verifying_md_command_works_pasted_in_order_on_a_fresh_clone(tmp_path) -> None:
    scratch = tmp_path / "t"
    scratch.mkdir()
    # /tmp/ first: the checkout itself may live under /tmp (CI's fresh clone does)
    codes, expected, done = paste(
        documented_commands(), cwd=tmp_path, home=tmp_path / "home",
        rewrite=lambda c: c.replace("/tmp/", f"{scratch}/").replace("REPO", str(ROOT)))
    assert codes == expected, done.stdout[-4000:] + done.stderr[-4000:]
    assert "1ed918852f60b98d9206fe3392654261a7d954b57d6fc92e1fe79cd6abf4009a" in done.stdout
    assert "same as this verifier" in done.stdout
