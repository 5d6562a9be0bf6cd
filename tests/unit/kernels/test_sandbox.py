"""The kernel child's sandbox (harness/kernels/sandbox.py), with the real bubblewrap:
what a process inside sees, and what it cannot reach."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.kernels import sandbox

PROBE = r"""
import json, os, sys
secret, readonly, drop = sys.argv[1:4]
seen = {"pid": os.getpid(), "env": sorted(os.environ), "pids": sorted(
    int(p) for p in os.listdir("/proc") if p.isdigit())}
for name, path in (("secret", secret), ("readonly", readonly)):
    try:
        with open(path) as handle:
            seen[name] = handle.read()
    except OSError as err:
        seen[name] = f"error {err.errno}"
try:
    with open(readonly, "a") as handle:
        handle.write("x")
    seen["wrote_readonly"] = True
except OSError:
    seen["wrote_readonly"] = False
with open(os.path.join(drop, "out.json"), "w") as handle:
    json.dump(seen, handle)
"""


@pytest.fixture(scope="module")
def isolation() -> sandbox.Isolation:
    try:
        return sandbox.probe()
    except sandbox.SandboxError as err:
        pytest.skip(f"no sandbox here: {err}")


def _run(tmp_path: Path, env: dict[str, str]) -> dict:
    secret = tmp_path / "secret.key"
    secret.write_text("private", encoding="utf-8")
    readonly = tmp_path / "inputs.f32"
    readonly.write_text("input", encoding="utf-8")
    drop = tmp_path / "drop"
    drop.mkdir()
    argv = sandbox.command([sys.executable, "-c", PROBE, str(secret), str(readonly),
                            str(drop)], sandbox.Mounts(ro=(readonly,), rw=(drop,)),
                           env=env, backend="interpreter")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads((drop / "out.json").read_text(encoding="utf-8"))


def test_a_sandboxed_process_sees_only_what_it_was_given(tmp_path, isolation):
    assert isolation.isolated and set(isolation.namespaces) >= {"user", "mount", "pid", "net"}
    seen = _run(tmp_path, sandbox.allowed_env({**os.environ, "TOPP_GATE_KEY": "x",
                                               "AWS_SECRET_ACCESS_KEY": "y"}))
    assert seen["pid"] == 2 and max(seen["pids"]) < 10  # its own PID namespace
    assert seen["secret"].startswith("error")  # a file beside its inputs: not there
    assert seen["readonly"] == "input" and seen["wrote_readonly"] is False
    assert "TOPP_GATE_KEY" not in seen["env"] and "AWS_SECRET_ACCESS_KEY" not in seen["env"]
    # PWD: bwrap sets it for --chdir
    assert set(seen["env"]) <= {*sandbox.ENV_ALLOWLIST, "PATH", "HOME", "TMPDIR", "PWD"}


def test_the_environment_is_an_allowlist_and_path_keeps_only_entries_the_sandbox_shows(
        tmp_path):
    home_bin = str(Path.home() / "bin")
    env = sandbox.allowed_env({"PATH": f"{home_bin}:{Path(sys.executable).parent}:/usr/bin",
                               "LANG": "C.UTF-8", "TOPP_GATE_SIGNING_KEY": "secret",
                               "SSH_AUTH_SOCK": "/run/agent"})
    assert env["LANG"] == "C.UTF-8" and "TOPP_GATE_SIGNING_KEY" not in env
    assert "SSH_AUTH_SOCK" not in env and env["HOME"] == sandbox.SANDBOX_HOME
    path = env["PATH"].split(os.pathsep)
    assert home_bin not in path and str(Path(sys.executable).parent) in path


def test_no_folder_above_the_checkout_or_the_home_folder_is_bound():
    checkout = sandbox.harness_root().parent
    for root in sandbox.exposed_roots():
        assert not checkout.is_relative_to(root), root
        assert not Path.home().resolve().is_relative_to(root), root
    assert sandbox.exposes(checkout / "tests" / "assets" / "keys") is None
    assert sandbox.exposes(sandbox.harness_root() / "cli.py") == sandbox.harness_root()


def test_without_bubblewrap_the_probe_says_so(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    sandbox.probe.cache_clear()
    try:
        with pytest.raises(sandbox.SandboxError, match="bubblewrap"):
            sandbox.probe()
    finally:
        sandbox.probe.cache_clear()


def test_bwrap_is_named_by_its_absolute_path(tmp_path, monkeypatch):
    """The child starts with the sandbox's environment, whose PATH holds only folders the
    sandbox shows: a bwrap found only on the caller's PATH (a carried .deb unpacked under
    /tmp, as on the GPU machine) must be named by its absolute path, or it is not found."""
    import shutil

    real = shutil.which("bwrap")
    if real is None:
        pytest.skip("no bwrap here")
    folder = tmp_path / "unpacked" / "usr" / "bin"
    folder.mkdir(parents=True)
    (folder / "bwrap").symlink_to(real)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}/usr/local/bin{os.pathsep}/bin")
    argv = sandbox.command([sys.executable, "-c", "print(1)"], sandbox.Mounts(), env={},
                           backend="interpreter")
    assert argv[0] == str(folder / "bwrap")
