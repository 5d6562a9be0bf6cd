"""The kernel runner records a crash as kernel_crash and a hang as timeout (real children)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.capture import sources
from harness.capture.kernels.runner import run_side
from harness.core.errors import KernelRunError


def _cases(tmp_path: Path) -> Path:
    (tmp_path / "in.logits.f32").write_bytes(b"\x00" * 4 * 2 * 16)
    (tmp_path / "in.p.f32").write_bytes(b"\x00\x00\x00\x3f" * 2)
    path = tmp_path / "cases.json"
    path.write_text(json.dumps({"schema": "topp-gate/cases/v1", "cases": [{
        "id": "tiny", "kind": "ordinary", "batch": 2, "vocab": 16,
        "logits": "in.logits.f32", "p": "in.p.f32", "rows": []}]}))
    return path


def test_a_child_on_a_broken_tree_is_a_kernel_crash(tmp_path):
    side = sources.load_pins().side("stock")
    empty_tree = tmp_path / "tree"
    empty_tree.mkdir()
    result = run_side(side, empty_tree, "interpreter", 2, _cases(tmp_path), tmp_path / "out",
                      timeout_s=120)
    assert result.status == "kernel_crash" and not result.ok
    assert result.returncode not in (0, None)
    assert "No module named 'vllm" in result.stderr_tail
    assert result.evidence is not None and result.evidence["status"] == "started"


def test_runner_refuses_bad_arguments(tmp_path):
    side = sources.load_pins().side("stock")
    with pytest.raises(KernelRunError, match="backend"):
        run_side(side, tmp_path, "rocm", 2, _cases(tmp_path), tmp_path / "o1", 10)
    out = tmp_path / "o2"
    out.mkdir()
    (out / "left.txt").write_text("x")
    with pytest.raises(KernelRunError, match="not empty"):
        run_side(side, tmp_path, "interpreter", 2, _cases(tmp_path), out, 10)


@pytest.fixture(scope="module")
def stock_tree() -> tuple[sources.Side, Path]:
    side = sources.load_pins().side("stock")
    cache = sources.cache_root()
    sources.fetch_wheel(side, cache, quiet=True)
    return side, sources.resolve_tree(side, cache=cache)


@pytest.mark.sources
def test_an_aborting_child_is_a_kernel_crash(stock_tree, tmp_path):
    side, tree = stock_tree
    result = run_side(side, tree, "interpreter", 2, _cases(tmp_path), tmp_path / "out",
                      timeout_s=300, fault="abort")
    assert result.status == "kernel_crash"
    assert result.returncode is not None and result.returncode < 0  # killed by SIGABRT
    assert result.injected_fault == "abort"
    assert result.evidence["test_fault"] == "abort"
    assert not list((tmp_path / "out").glob("*.out.f32"))


@pytest.mark.sources
def test_a_hanging_child_is_killed_and_recorded_as_timeout(stock_tree, tmp_path):
    side, tree = stock_tree
    result = run_side(side, tree, "interpreter", 2, _cases(tmp_path), tmp_path / "out",
                      timeout_s=20, fault="hang")
    assert result.status == "timeout" and not result.ok
    assert result.returncode is None
    assert result.evidence["test_fault"] == "hang"
    assert "process group killed" in result.reason
