"""Every file a user names to the capture-side verbs (pin files, patches, matrices, logits)
is opened as a regular file only: a FIFO is refused at once with exit 2 and one line, never
waited on (the verifier side has its own tests in tests/unit/core/test_verify_hostile.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PIN = ROOT / "evidence" / "pins" / "vllm-0.33.0.json"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # a timeout, so a regression that blocks on the FIFO fails instead of hanging the suite
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "named-pipe"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("where", ["stock-pin", "patch", "matrix"])
def test_manifest_new_refuses_a_fifo(where, fifo, tmp_path):
    args = {"stock-pin": ["--stock", str(fifo), "--patched", str(PIN), "--matrix", "sweep"],
            "patch": ["--stock", str(PIN), "--patched", str(PIN), "--patch", str(fifo),
                      "--on", "patched", "--matrix", "sweep"],
            "matrix": ["--stock", str(PIN), "--patched", str(PIN), "--matrix", str(fifo)]}
    done = _cli("manifest", "new", *args[where], "--out", str(tmp_path / "m.json"),
                cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert not (tmp_path / "m.json").exists()


def test_kernels_refuses_a_fifo_as_logits(fifo, tmp_path):
    done = _cli("kernels", "--logits", str(fifo), "--vocab", "8", "--p", "0.9",
                "--backend", "interpreter", "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "not a regular file" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.sources
def test_paths_the_capture_verbs_print_are_escaped(tmp_path):
    """A folder named with a terminal escape is printed escaped, never raw. `manifest new`
    on the 0.33.0 pin reads that release's tree from the cache (marked sources: the Nix
    sandbox and scripts/sandbox_tests.sh deselect it, as the other tests that need it)."""
    folder = tmp_path / "evil\x1b[2Jname"
    folder.mkdir()
    done = _cli("manifest", "new", "--stock", str(PIN), "--patched", str(PIN), "--matrix",
                "forced-interpreter", "--out", str(folder / "m.json"), cwd=tmp_path)
    if done.returncode == 2 and "is not in the cache" in done.stderr:
        pytest.skip("the vLLM 0.33.0 tree is not in the cache (topp-gate sources fetch)")
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout + done.stderr
    assert "\\x1b[2Jname/m.json" in done.stdout
