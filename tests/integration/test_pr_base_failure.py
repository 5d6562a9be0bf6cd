"""A base that cannot run is the base's failure, never the change's (issue 37, item 4).

The base is an exported vLLM tree made pinnable (empty placeholders for its compiled
extensions) whose kernel module raises at import; the change is the same tree without that
line. Both kernel children run; the base's crashes. ``pr`` answers ``BASE FAILED`` with the
crash's first line and exits 2; no row is said to be broken by the change, and the bundle's
report.md says the rows stop for the base's failure.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from harness.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "assets"))
from pr_small import _small_matrix  # noqa: E402

EXPORT = Path("/tmp/topp-gate-test-export")
KERNEL = "vllm/v1/sample/ops/topk_topp_triton.py"

pytestmark = [pytest.mark.sources, pytest.mark.slow]


def _tree(tmp_path: Path) -> Path:
    trees = sorted(p for p in EXPORT.glob("*") if (p / KERNEL).is_file()) \
        if EXPORT.is_dir() else []
    if not trees:
        pytest.skip("no exported trees (topp-gate sources export)")
    newest = max(trees, key=lambda p: [d.name for d in p.glob("vllm-*.dist-info")])
    good = tmp_path / "good"
    shutil.copytree(newest, good)
    for path in good.rglob("*"):
        path.chmod(path.stat().st_mode | 0o200)
    for name in ("_C_stable_libtorch", "_qutlass_C"):  # what a wheel's .so files name
        (good / "vllm" / f"{name}.abi3.so").write_bytes(b"")
    return good


def test_a_crashing_base_is_reported_as_the_bases_failure(tmp_path, signing_key, capsys):
    good = _tree(tmp_path)
    bad = tmp_path / "bad"
    shutil.copytree(good, bad)
    kernel = bad / KERNEL
    kernel.write_bytes(b'raise ImportError("this base cannot import its kernel")\n'
                       + kernel.read_bytes())
    out = tmp_path / "out"
    code = main(["pr", str(bad), "--change", str(good), "--backend", "interpreter",
                 "--matrix", str(_small_matrix(tmp_path)), "--key", str(signing_key),
                 "--out", str(out), "--base-cache", str(tmp_path / "bases"),
                 "--cache", str(tmp_path / "cache"), "--workers", "1"])
    stdout = capsys.readouterr().out
    assert code == 2, stdout
    assert stdout.startswith("BASE FAILED: the base could not run (kernel_crash: child exit "
                             "status 1: ImportError: this base cannot import its kernel)")
    assert "the change broke" not in stdout and "no verdict on the change" in stdout
    report = (out / "bundle/report.md").read_text(encoding="utf-8")
    assert "The base (stock) did not run on 4 of 4 rows (kernel_crash x4)" in report
    assert "## Rows the change broke" not in report
    assert "The base (stock) fails no row judged alone" not in report
