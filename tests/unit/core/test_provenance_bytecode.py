"""Bytecode the trusted core did not compile from its sources is refused (issue 17).

A ``.pyc`` in ``harness/core/__pycache__`` whose header matches its source's size and
time is what Python runs instead of the source, while the core digest (over sources) stays
the same: ``verify --strict`` from such a checkout reported PASS with code nobody reviewed.
Now the digest refuses such a tree (exit 4), from a trusted install (``harness-digest
DIR``) and inside the verifier itself; bytecode Python wrote from the sources passes.
"""

from __future__ import annotations

import compileall
import importlib._bootstrap_external as external
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "assets"))
import synthetic  # noqa: E402

from harness.cli import main  # noqa: E402
from harness.core import provenance  # noqa: E402
from harness.core.errors import HarnessDriftError  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
PUB = str(ROOT / "tests/assets/keys/test-only-signing.pub")


@pytest.fixture()
def checkout(tmp_path: Path) -> Path:
    """A copy of this checkout's harness package, with no bytecode."""
    root = tmp_path / "checkout"
    shutil.copytree(ROOT / "harness", root / "harness",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return root


def _plant_shadow(root: Path, module: str, extra: str) -> Path:
    """A .pyc of ``module`` (under harness/core) holding its source plus ``extra``, with
    a header naming the real source's time and size: Python loads it instead."""
    source = root / "harness/core" / f"{module}.py"
    info = source.stat()
    code = compile(source.read_bytes() + extra.encode(), str(source), "exec",
                   dont_inherit=True)
    pyc = Path(external.cache_from_source(str(source)))
    pyc.parent.mkdir(exist_ok=True)
    pyc.write_bytes(external._code_to_timestamp_pyc(code, int(info.st_mtime), info.st_size))
    return pyc


def _python(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("PYTHONPYCACHEPREFIX", None)
    return subprocess.run([sys.executable, *args], cwd=root, env=env, capture_output=True,
                          text=True, timeout=300, check=False)


def test_bytecode_python_wrote_from_the_sources_passes(checkout: Path):
    assert compileall.compile_dir(checkout / "harness/core", quiet=1, force=True)
    assert provenance.foreign_bytecode(checkout / "harness/core") == []
    assert provenance.checkout_digest(checkout) == provenance.checkout_digest(ROOT)


def test_a_shadowing_pyc_runs_under_an_unchanged_digest_and_is_refused(checkout: Path,
                                                                       capsys):
    before = provenance.checkout_digest(checkout)
    pyc = _plant_shadow(checkout, "gate", "\nSHADOWED = True\n")
    # the hole: Python really runs the planted code, and the sources' digest is unchanged
    ran = _python(checkout, "-c", "import harness.core.gate as g; print(g.SHADOWED)")
    assert ran.stdout.strip() == "True", ran.stderr
    assert provenance.digest_lines(provenance._checkout_files(checkout / "harness/core")) \
        == {k: before[k] for k in ("sha256", "files")}
    # now: refused, from a trusted install and as a command (exit 4, one line)
    with pytest.raises(HarnessDriftError, match="bytecode"):
        provenance.checkout_digest(checkout)
    assert main(["harness-digest", str(checkout)]) == 4
    err = capsys.readouterr().err
    assert "gate.cpython" in err and "Traceback" not in err
    assert provenance.foreign_bytecode(checkout / "harness/core") == [
        f"__pycache__/{pyc.name}"]


@pytest.mark.parametrize("name", ["stray.pyc", "__pycache__/gate.cpython-299.pyc",
                                  f"__pycache__/gone.{sys.implementation.cache_tag}.pyc"])
def test_bytecode_without_a_checkable_source_is_refused(checkout: Path, name: str):
    target = checkout / "harness/core" / name
    target.parent.mkdir(exist_ok=True)
    target.write_bytes(b"\x00" * 32)
    assert provenance.foreign_bytecode(checkout / "harness/core") == [name]


def test_verify_strict_from_a_checkout_with_a_shadowing_pyc_is_refused(checkout: Path,
                                                                        tmp_path: Path):
    bundle = tmp_path / "bundle"
    synthetic.write(bundle)
    clean = _python(checkout, "-m", "harness", "verify", str(bundle), "--pubkey", PUB,
                    "--strict")
    assert clean.returncode in (0, 1), clean.stdout + clean.stderr
    _plant_shadow(checkout, "gate", "\nSHADOWED = True\n")
    shadowed = _python(checkout, "-m", "harness", "verify", str(bundle), "--pubkey", PUB,
                       "--strict")
    assert shadowed.returncode == 4, shadowed.stdout + shadowed.stderr
    assert "bytecode" in shadowed.stderr and "Traceback" not in shadowed.stderr


def test_stale_bytecode_left_by_an_edit_is_not_refused(checkout: Path):
    # Python wrote gate.pyc; then the source is edited (other size and time): the import
    # system would recompile the source and never run the old code, so nothing is refused.
    # A shadow with the same header is refused, as above.
    compileall.compile_dir(str(checkout / "harness" / "core"), quiet=1)
    source = checkout / "harness/core/gate.py"
    source.write_bytes(source.read_bytes() + b"\n# an edit after the last import\n")
    os.utime(source, (source.stat().st_atime, source.stat().st_mtime + 5))
    assert provenance.foreign_bytecode(checkout / "harness" / "core") == []
    _plant_shadow(checkout, "gate", "\nSEED_STOP_REASONS = ()\n")
    tag = sys.implementation.cache_tag
    assert provenance.foreign_bytecode(checkout / "harness" / "core") == [
        f"__pycache__/gate.{tag}.pyc"]
