"""A document's ``sh`` blocks pasted in order into one fresh shell (README.md, VERIFYING.md).

A line ending in ``# exits N`` must exit N, every other line 0. The shell is bash with no
profile, ``PATH`` the system's, ``HOME`` an empty folder, ``LANG`` C.UTF-8; the package
index settings pass through, so ``pip install`` reaches what CI reaches.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

BLOCK = re.compile(r"^```sh\n(.*?)^```", re.S | re.M)
EXITS = re.compile(r"#\s*exits (\d+)")
PASSTHROUGH = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_CONFIG_FILE",
               "http_proxy", "https_proxy", "HTTPS_PROXY")


def documented_commands(document: Path) -> list[tuple[str, int]]:
    """Every command line of the document's ``sh`` blocks and the exit code it names."""
    commands = []
    for block in BLOCK.findall(document.read_text("utf-8")):
        for line in block.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            assert not line.rstrip().endswith("\\"), "one command per line"
            found = EXITS.search(line)
            commands.append((line, int(found.group(1)) if found else 0))
    return commands


def paste(commands: list[tuple[str, int]], *, cwd: Path, home: Path,
          rewrite: Callable[[str], str] = lambda command: command
          ) -> tuple[dict[int, int], dict[int, int], subprocess.CompletedProcess[str]]:
    """Run the commands (each through ``rewrite``) in one fresh shell: the exit code each
    gave, the one each should give, and the shell's run."""
    lines = []
    for i, (command, _) in enumerate(commands):
        lines += [rewrite(command), f'echo "__rc__ {i} $?"']
    home.mkdir(exist_ok=True)
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}
    env.update({k: os.environ[k] for k in PASSTHROUGH if k in os.environ})
    done = subprocess.run(["bash", "--noprofile", "--norc"], input="\n".join(lines) + "\n",
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    codes = {int(i): int(rc) for i, rc in re.findall(r"^__rc__ (\d+) (\d+)$", done.stdout, re.M)}
    return codes, {i: code for i, (_, code) in enumerate(commands)}, done
