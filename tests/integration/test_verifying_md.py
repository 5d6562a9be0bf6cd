"""VERIFYING.md's `sh` blocks, pasted in order into one fresh shell on a fresh clone (issue 18):
no activated virtual environment, nothing prepared. `REPO` becomes this checkout and `/tmp/`
the test's own folder; a line ending in `# exits N` must exit N, every other line 0.

Slow (two base installs from the network's package index and two verifies: about a minute).
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
    for block in BLOCK.findall((ROOT / "VERIFYING.md").read_text()):
        for line in block.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            assert not line.rstrip().endswith("\\"), "one command per line"
            found = EXITS.search(line)
            commands.append((line, int(found.group(1)) if found else 0))
    return commands


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
    lines = []
    for i, (command, _) in enumerate(documented_commands()):
        # /tmp/ first: the checkout itself may live under /tmp (CI's fresh clone does)
        command = command.replace("/tmp/", f"{scratch}/").replace("REPO", str(ROOT))
        lines += [command, f'echo "__rc__ {i} $?"']
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}
    for passthrough in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS",
                        "PIP_CONFIG_FILE", "http_proxy", "https_proxy", "HTTPS_PROXY"):
        if passthrough in os.environ:
            env[passthrough] = os.environ[passthrough]
    done = subprocess.run(["bash", "--noprofile", "--norc"], input="\n".join(lines) + "\n",
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    codes = {int(i): int(rc) for i, rc in re.findall(r"^__rc__ (\d+) (\d+)$", done.stdout, re.M)}
    expected = {i: code for i, (_, code) in enumerate(documented_commands())}
    assert codes == expected, done.stdout[-4000:] + done.stderr[-4000:]
    assert "1ed918852f60b98d9206fe3392654261a7d954b57d6fc92e1fe79cd6abf4009a" in done.stdout
    assert "same as this verifier" in done.stdout
