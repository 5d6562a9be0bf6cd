"""Two runs into one --out (issue 17): the second is refused before any kernel runs, and
it never deletes the first one's scratch, even when the first runs in another PID
namespace (its pid then means nothing here). The claim is a flock on .<name>.lock."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.capture.run import claim_output, claim_path, remove_stale_scratch
from harness.cli import main

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "evidence/manifests/smoke-interpreter.json"
HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(60)
"""


@pytest.fixture
def other_run(tmp_path: Path):
    """Another process holding the claim on tmp_path/bundle, as a live run would."""
    out = tmp_path / "bundle"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(claim_path(out))],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    yield out
    holder.kill()
    holder.wait()


def test_a_second_run_into_a_claimed_out_is_refused_before_any_kernel(other_run, tmp_path,
                                                                     capsys, signing_key):
    pytest.importorskip("torch")
    # the other run's scratch, named with a pid that is dead in this namespace
    scratch = tmp_path / ".bundle.partial-999999999-abcd"
    scratch.mkdir()
    (scratch / "cases.json").write_text("{}")
    started = time.monotonic()
    code = main(["run", "--manifest", str(SMOKE), "--out", str(other_run),
                 "--key", str(signing_key)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "another run is writing" in err
    assert time.monotonic() - started < 30, "refused only after running kernels"
    assert scratch.is_dir() and (scratch / "cases.json").exists()
    assert not other_run.exists()


def test_claim_refuses_an_existing_bundle_and_is_released(tmp_path):
    out = tmp_path / "bundle"
    with claim_output(out):
        assert claim_path(out).exists()
    assert not claim_path(out).exists()
    out.mkdir()
    from harness.core.errors import UsageError

    with pytest.raises(UsageError, match="already exists"), claim_output(out):
        pass


def test_stale_scratch_is_removed_under_the_claim_whatever_its_pid(tmp_path):
    out = tmp_path / "bundle"
    stale = tmp_path / ".bundle.partial-1-abc"  # pid 1 is alive: the pid decides nothing
    stale.mkdir()
    with claim_output(out):
        assert remove_stale_scratch(out) == [stale]
    assert not stale.exists()
