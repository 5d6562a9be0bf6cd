"""scripts/sandbox_tests.sh runs pytest the way the flake's cpu-tests check does (issue 28).

The probe below runs only inside that script (it sets TOPP_GATE_SANDBOX) and checks what the
Nix sandbox would take away; the outer test runs the script on the probe.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODE = os.environ.get("TOPP_GATE_SANDBOX")


@pytest.mark.skipif(MODE is None, reason="runs only inside scripts/sandbox_tests.sh")
def test_inside_the_sandbox_this_machine_is_out_of_reach() -> None:
    assert not (ROOT / ".git").exists(), "the copy has no git history"
    assert (ROOT / "harness" / "cli.py").is_file() and (ROOT / "pyproject.toml").is_file()
    # HOME and the cache are the sandbox's own folders beside the copy (empty at the start;
    # tests run before this one may have written to them), never this machine's
    home = Path(os.environ["HOME"])
    assert home.is_dir() and home.parent == ROOT.parent and home.parent.name.startswith(
        "topp-gate-sandbox."
    )
    assert Path(os.environ["TOPP_GATE_CACHE"]).is_relative_to(ROOT.parent)
    assert os.environ["CUDA_VISIBLE_DEVICES"] == ""
    for tool in ("nix", "nix-instantiate", "shellcheck", "unzip", "ruff", "unshare"):
        assert shutil.which(tool) is None, tool
    assert shutil.which("git") and shutil.which("python")
    with pytest.raises(ImportError):
        import flint  # noqa: F401
    # nor the linters nix/envs.nix's test environment lacks (tests/unit/test_sandbox_env.py)
    with pytest.raises(ImportError):
        import mypy  # noqa: F401
    import xmlschema  # noqa: F401  (nix/envs.nix provides it)
    if MODE == "unshare":
        with pytest.raises(OSError):
            socket.create_connection(("192.0.2.1", 443), timeout=2).close()
        # no /usr/bin/env, as in the Nix sandbox (issue 38): a `#!/usr/bin/env` script
        # cannot start, while `env` on PATH still runs
        script = Path(os.environ["TMPDIR"]) / "env-shebang"
        script.write_text("#!/usr/bin/env sh\necho ran\n")
        script.chmod(0o700)
        with pytest.raises(OSError):
            subprocess.run([str(script)], capture_output=True, check=False)  # noqa: S603
        assert subprocess.run(["env", "python", "-c", "pass"], check=False).returncode == 0  # noqa: S607
    else:
        assert os.environ["https_proxy"] == "http://192.0.2.1:9"
    sources = Path(os.environ["TOPP_GATE_SOURCES"])
    assert sources.is_dir()


@pytest.mark.skipif(MODE is not None, reason="this is the outer run")
@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                    reason="needs a git checkout (the script copies the tracked files)")
def test_the_script_runs_the_probe_in_the_sandbox() -> None:
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "sandbox_tests.sh"), "--",
         "tests/unit/test_sandbox_tests.py"],
        env={**os.environ, "PYTHON": sys.executable}, capture_output=True, text=True,
        timeout=600,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    # the probe ran (not skipped) and this outer test skipped inside
    assert "1 passed, 1 skipped" in out, out[-3000:]
