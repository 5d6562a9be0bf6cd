"""README.md's `sh` block ("Verify a bundle"), pasted in order into one fresh shell at the root
of a fresh clone (issue 29: every command README shows works pasted into a fresh shell): no
activated virtual environment, nothing prepared, HOME an empty folder. A line ending in
`# exits N` must exit N, every other line 0. README's `bash` blocks name the long commands
(scripts/gate, scripts/test, topp-gate pr), which tests/unit/test_readme.py parses with the
real CLI and the tests named there run.

Slow (a base install from the network's package index and one verify: about a minute).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^```sh\n(.*?)^```", re.S | re.M)
EXITS = re.compile(r"#\s*exits (\d+)")

pytestmark = pytest.mark.slow


def documented_commands() -> list[tuple[str, int]]:
    commands = []
    for block in BLOCK.findall((ROOT / "README.md").read_text("utf-8")):
        for line in block.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            assert not line.rstrip().endswith("\\"), "one command per line"
            found = EXITS.search(line)
            commands.append((line, int(found.group(1)) if found else 0))
    return commands


def test_readme_shows_an_install_and_a_verify_with_its_exit_code() -> None:
    commands = documented_commands()
    assert any(c.startswith("pip install .") for c, _ in commands)
    assert any(c.startswith("topp-gate verify ") and code == 1 for c, code in commands)


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                    reason="needs git and this checkout's history")
def test_every_readme_sh_command_works_pasted_in_order_in_a_fresh_clone(tmp_path) -> None:
    clone = tmp_path / "topp-gate"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=600)
    lines = []
    for i, (command, _) in enumerate(documented_commands()):
        lines += [command, f'echo "__rc__ {i} $?"']
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}
    for passthrough in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS",
                        "PIP_CONFIG_FILE", "http_proxy", "https_proxy", "HTTPS_PROXY"):
        if passthrough in os.environ:
            env[passthrough] = os.environ[passthrough]
    done = subprocess.run(["bash", "--noprofile", "--norc"], input="\n".join(lines) + "\n",
                          cwd=clone, env=env, capture_output=True, text=True, timeout=900)
    codes = {int(i): int(rc) for i, rc in re.findall(r"^__rc__ (\d+) (\d+)$", done.stdout, re.M)}
    expected = {i: code for i, (_, code) in enumerate(documented_commands())}
    assert codes == expected, done.stdout[-4000:] + done.stderr[-4000:]
    assert "STOP" in done.stdout
