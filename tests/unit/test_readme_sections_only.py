"""scripts/readme_sections.py --only: scripts/test checks the mutation runs in one process and
the other four sections in another; a name it does not know is refused in one line, before
any bundle is read."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _sections(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "readme_sections.py"), *args],
                          capture_output=True, text=True, timeout=600)


def test_an_unknown_section_name_is_one_line_and_exit_2():
    for only in ("mutation_tabel", "", "deploy_table,"):
        done = _sections("--check", "--only", only)
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1 and "no section script" in done.stderr
        assert "readme_sections: deploy_table" not in done.stderr  # nothing ran
