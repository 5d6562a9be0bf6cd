"""README.md's `sh` block ("Verify a bundle"), pasted in order into one fresh shell at the root
of a fresh clone (issue 29: every command README shows works pasted into a fresh shell): no
activated virtual environment, nothing prepared, HOME an empty folder. A line ending in
`# exits N` must exit N, every other line 0. README's `bash` blocks name the long commands
(scripts/gate, scripts/test, topp-gate pr), which tests/unit/test_readme.py parses with the
real CLI and the tests named there run.

Slow (a base install from the network's package index and one verify: about a minute).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "assets"))
from pasted import documented_commands as _commands  # noqa: E402
from pasted import paste  # noqa: E402

pytestmark = pytest.mark.slow


def documented_commands() -> list[tuple[str, int]]:
    return _commands(ROOT / "README.md")


def test_readme_shows_an_install_and_a_verify_with_its_exit_code() -> None:
    commands = documented_commands()
    assert any(c.startswith("pip install .") for c, _ in commands)
    assert any(c.startswith("topp-gate verify ") and code == 1 for c, code in commands)


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                    reason="needs git and this checkout's history")
def test_every_readme_sh_command_works_pasted_in_order_in_a_fresh_clone(tmp_path) -> None:
    clone = tmp_path / "topp-gate"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=600)
    codes, expected, done = paste(documented_commands(), cwd=clone, home=tmp_path / "home")
    assert codes == expected, done.stdout[-4000:] + done.stderr[-4000:]
    assert "STOP" in done.stdout
