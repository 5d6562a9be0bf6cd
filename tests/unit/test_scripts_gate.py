"""scripts/gate's own argument handling, run for real with a stand-in for the tool it
installs (the gate itself is tested elsewhere; here: which folder and key verify reads).

Issue 29: ``scripts/gate M --out x`` wrote the bundle to ``x``, then verified a ``runs/...``
folder that did not exist and exited 2 on a valid PASS.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# The stand-in `topp-gate`: records each call; `run` makes its --out folder and exits 0
# (a PASS), `verify` exits 0 only when the folder it is given exists (as the real one: no
# bundle is exit 2), `keygen` writes PREFIX.key and PREFIX.pub.
# No `#!/usr/bin/env`: the Nix sandbox (the flake's cpu-tests) has none (issue 38); the
# stand-ins name their interpreter by its absolute path, and scripts/gate runs under bash.
TOOL = f"""#!{sys.executable}
import json, os, sys
log = os.environ["GATE_TEST_LOG"]
with open(log, "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
args = sys.argv[1:]
def value(flag):
    return args[args.index(flag) + 1]
if args[0] == "run":
    os.makedirs(value("--out"))
    sys.exit(0)
if args[0] == "verify":
    sys.exit(0 if os.path.isdir(args[1]) else 2)
if args[0] == "keygen":
    for suffix in (".key", ".pub"):
        open(value("--out") + suffix, "w").close()
    sys.exit(0)
sys.exit(2)
"""
# The stand-in venv python: torch imports, pip installs nothing, no CUDA.
PYTHON = f"""#!{shutil.which("bash") or "/bin/sh"}
case "$*" in
  *torch.cuda.is_available*) exit 1 ;;
  *) exit 0 ;;
esac
"""


def _fake_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "gate", repo / "scripts" / "gate")
    venv = repo / ".venv" / "bin"
    venv.mkdir(parents=True)
    for name, text in (("topp-gate", TOOL), ("python", PYTHON)):
        (venv / name).write_text(text)
        (venv / name).chmod(stat.S_IRWXU)
    return repo


def _gate(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
    repo = _fake_repo(tmp_path)
    caller = tmp_path / "caller"
    caller.mkdir()
    log = tmp_path / "calls.jsonl"
    env = {**os.environ, "GATE_TEST_LOG": str(log), "HOME": str(tmp_path / "home")}
    env.pop("TOPP_GATE_KEY", None)
    env.pop("TOPP_GATE_SOURCES", None)
    done = subprocess.run(["bash", str(repo / "scripts" / "gate"), *args], cwd=caller, env=env,  # noqa: S603,S607
                          capture_output=True, text=True, timeout=60, check=False)
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return done, calls


def test_out_given_is_the_folder_verified(tmp_path):
    done, calls = _gate(tmp_path, "M.json", "--out", "x", "--workers", "2")
    assert done.returncode == 0, done.stderr
    run = next(c for c in calls if c[0] == "run")
    verify = next(c for c in calls if c[0] == "verify")
    assert run.count("--out") == 1 and run[run.index("--out") + 1] == "x"
    assert "--workers" in run  # the other arguments still reach run
    assert verify[1] == "x"
    assert (tmp_path / "caller" / "x").is_dir()


def test_out_equals_form_and_key_given(tmp_path):
    key = tmp_path / "mine.key"
    key.write_text("")
    done, calls = _gate(tmp_path, "M.json", "--out=y", "--key", str(key))
    assert done.returncode == 0, done.stderr
    run = next(c for c in calls if c[0] == "run")
    verify = next(c for c in calls if c[0] == "verify")
    assert run.count("--key") == 1 and run[run.index("--key") + 1] == str(key)
    assert verify[1] == "y" and verify[verify.index("--pubkey") + 1] == str(tmp_path / "mine.pub")
    assert not any(c[0] == "keygen" for c in calls)


def test_without_out_the_bundle_goes_under_runs(tmp_path):
    done, calls = _gate(tmp_path, "M.json")
    assert done.returncode == 0, done.stderr
    verify = next(c for c in calls if c[0] == "verify")
    assert verify[1].startswith("runs/M-")
