"""scripts/test runs the suite in two parts so every test runs once (tests/conftest.py):
part 1 as the Nix sandbox runs it records the ids of the tests it skipped
($TOPP_GATE_SKIPPED_LOG); part 2 (``--sandbox-skipped=LOG``) runs exactly those and the
tests marked sources or gpu. Here the project's own conftest runs real pytest processes on a
small scratch suite."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SUITE = '''
import pytest

def test_plain():
    pass

def test_skips_here():
    pytest.skip("no tool here")

@pytest.mark.sources
def test_needs_sources():
    pass

@pytest.mark.gpu
def test_needs_cuda():
    pass

@pytest.mark.parametrize("n", [1, 2])
def test_param(n):
    if n == 2:
        pytest.skip("no tool here either")
'''


# a file part 1 skips whole as it collects it (as a module-level importorskip does there)
WHOLE_FILE = '''
import os
import pytest

if os.environ.get("SCRATCH_PART_ONE"):
    pytest.skip("no such library in part 1", allow_module_level=True)

def test_one():
    pass

def test_two():
    pass
'''


def _suite(tmp_path: Path) -> Path:
    root = tmp_path / "suite"
    (root / "tests").mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "conftest.py", root / "tests" / "conftest.py")
    (root / "tests" / "test_scratch.py").write_text(SUITE)
    (root / "tests" / "test_whole_file.py").write_text(WHOLE_FILE)
    (root / "pytest.ini").write_text(
        "[pytest]\ntestpaths = tests\naddopts = --strict-markers\nmarkers =\n"
        "    sources: needs the pinned sources\n    gpu: needs CUDA\n    slow: slow\n")
    return root


def _pytest(root: Path, *args: str, log: Path | None = None) -> subprocess.CompletedProcess[str]:
    """pytest in the scratch suite; with ``log``, as part 1 (recording, the whole file
    skipped), with pytest-xdist's two workers as scripts/test runs it."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("TOPP_GATE_SKIPPED_LOG", "SCRATCH_PART_ONE")}
    if log is not None:
        env.update(TOPP_GATE_SKIPPED_LOG=str(log), SCRATCH_PART_ONE="1")
        args = ("-n", "2", *args)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                           "-rA", *args], cwd=root, env=env, capture_output=True, text=True,
                          timeout=300)


def test_part_one_records_what_it_skipped_and_part_two_runs_exactly_that(tmp_path):
    root = _suite(tmp_path)
    log = tmp_path / "skipped.log"
    first = _pytest(root, "-m", "not gpu and not sources", log=log)
    assert first.returncode == 0, first.stdout
    recorded = set(log.read_text().splitlines())
    assert recorded == {"tests/test_scratch.py::test_skips_here",
                        "tests/test_scratch.py::test_param[2]", "tests/test_whole_file.py"}

    second = _pytest(root, f"--sandbox-skipped={log}")
    assert second.returncode == 0, second.stdout
    ran = {line.split()[1] for line in second.stdout.splitlines()
           if line.startswith("PASSED ")}
    assert ran == {"tests/test_scratch.py::test_needs_sources",
                   "tests/test_whole_file.py::test_one", "tests/test_whole_file.py::test_two"}
    # the two it skipped run again (and skip again here: no tool in this scratch suite), the
    # GPU test is skipped cleanly without CUDA, and the tests part 1 ran are left out
    assert "2 deselected" in second.stdout and "3 skipped" in second.stdout, second.stdout


def test_a_recorded_id_that_is_not_collected_is_an_error_never_a_vanished_test(tmp_path):
    root = _suite(tmp_path)
    log = tmp_path / "skipped.log"
    log.write_text("tests/test_scratch.py::test_skips_here\ntests/test_gone.py::test_x\n")
    done = _pytest(root, f"--sandbox-skipped={log}")
    assert done.returncode == 4, done.stdout + done.stderr
    assert "1 recorded test ids are not collected here, e.g. tests/test_gone.py::test_x" in (
        done.stderr)


def test_an_unreadable_log_is_one_line(tmp_path):
    root = _suite(tmp_path)
    done = _pytest(root, f"--sandbox-skipped={tmp_path / 'missing.log'}")
    assert done.returncode == 4
    assert "--sandbox-skipped: cannot read" in done.stderr and "No such file" in done.stderr
