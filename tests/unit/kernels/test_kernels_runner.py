"""The kernel runner records a crash as kernel_crash and a hang as timeout (real children)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from harness.core.errors import KernelRunError
from harness.kernels.runner import child_output_dir, run_side
from harness.pins import sources


def _cases(tmp_path: Path) -> Path:
    (tmp_path / "in.logits.f32").write_bytes(b"\x00" * 4 * 2 * 16)
    (tmp_path / "in.p.f32").write_bytes(b"\x00\x00\x00\x3f" * 2)
    path = tmp_path / "cases.json"
    path.write_text(json.dumps({"schema": "topp-gate/cases/v1", "cases": [{
        "id": "tiny", "kind": "ordinary", "batch": 2, "vocab": 16,
        "logits": "in.logits.f32", "p": "in.p.f32", "rows": []}]}))
    return path


def _no_files(side: sources.Side) -> sources.Side:
    """A side pinning no file: its private copy is empty, so its child starts and fails
    at the import (the runner refuses to copy a tree that lacks a pinned file)."""
    return replace(side, files={})


def test_a_child_on_a_broken_tree_is_a_kernel_crash(tmp_path):
    side = _no_files(sources.load_pins().side("stock"))
    empty_tree = tmp_path / "tree"
    empty_tree.mkdir()
    result = run_side(side, empty_tree, "interpreter", 2, _cases(tmp_path), tmp_path / "out",
                      timeout_s=120)
    assert result.status == "kernel_crash" and not result.ok
    assert result.returncode not in (0, None)
    assert "No module named 'vllm" in result.stderr_tail
    assert result.evidence is not None and result.evidence["status"] == "started"


def test_relative_paths_reach_the_child_from_its_own_working_directory(tmp_path,
                                                                      monkeypatch):
    """The child runs in a scratch folder: every path it is given must still resolve (a
    relative --out once made it look for its request under the wrong folder)."""
    side = _no_files(sources.load_pins().side("stock"))
    (tmp_path / "tree").mkdir()
    _cases(tmp_path)
    monkeypatch.chdir(tmp_path)
    result = run_side(side, Path("tree"), "interpreter", 2, Path("cases.json"),
                      Path("runs/out"), timeout_s=120)
    assert result.status == "kernel_crash"  # an empty tree: the child got as far as vllm
    assert "No module named 'vllm" in result.stderr_tail, result.stderr_tail
    assert "request.json" not in result.stderr_tail


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
    # killed by SIGABRT: bwrap reports 128 + 6 and the reason says which signal
    assert result.returncode == 134 and "signal 6 inside the sandbox" in result.reason
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


# --- a killed run leaves no kernel child and no scratch behind -------------------------------


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (the sandbox's processes sit under bwrap's)."""
    found, todo = [], [pid]
    while todo:
        for child in _children(todo.pop()):
            found.append(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait_for(predicate, seconds: float) -> bool:
    import time

    for _ in range(int(seconds * 10)):
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


@pytest.mark.sources
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_killing_the_parent_kills_the_kernel_child(stock_tree, tmp_path, how):
    import signal
    import subprocess
    import sys
    import textwrap

    root = Path(__file__).resolve().parents[3]
    driver = textwrap.dedent(f"""
        import signal, sys
        from pathlib import Path
        from harness.pins import sources
        from harness.commands.run import _terminated
        from harness.kernels.runner import run_side
        signal.signal(signal.SIGTERM, _terminated)
        side = sources.load_pins().side("stock")
        run_side(side, Path({str(stock_tree[1])!r}), "interpreter", 2,
                 Path({str(_cases(tmp_path))!r}), Path({str(tmp_path / "work" / "out")!r}),
                 timeout_s=600, fault="hang")
    """)
    # the parent's temporary folders (its private copy of the tree) in a TMPDIR of the test's
    # own: SIGKILL cannot unwind, so what it leaves goes with tmp_path, not into /tmp
    parent_tmp = tmp_path / "parent-tmp"
    parent_tmp.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", driver], cwd=root,
                            env={**__import__("os").environ, "PYTHONPATH": str(root),
                                 "TMPDIR": str(parent_tmp)})
    try:
        assert _wait_for(lambda: bool(_children(proc.pid)), 60), "no kernel child started"
        # the child writes into its own folder; the parent collects it when the child ends
        evidence = child_output_dir(tmp_path / "work" / "out") / "evidence.json"
        assert _wait_for(lambda: evidence.exists()
                         and "test_fault" in evidence.read_text(), 120)
        below = _descendants(proc.pid)  # bwrap, the sandbox's init, the kernel child
        assert len(below) >= 2
        proc.send_signal(getattr(signal, how))
        code = proc.wait(timeout=60)
        for child in below:
            assert _wait_for(lambda c=child: not _alive(c), 30), f"{child} survived {how}"
    finally:
        if proc.poll() is None:
            proc.kill()
    if how == "SIGTERM":  # unwound: scratch beside the output removed, exit 128 + 15
        assert code == 143
        assert not list((tmp_path / "work").glob(".out.*"))  # request scratch, child folder
        assert not list(parent_tmp.iterdir())  # and the private copy of the tree


def test_a_retry_removes_scratch_of_a_dead_run_only(tmp_path):
    import os

    from harness.capture.run import remove_stale_scratch, scratch_prefix

    out = tmp_path / "bundle"
    dead = tmp_path / ".bundle.partial-999999999-abc"
    live = tmp_path / f"{scratch_prefix(out)}xyz"
    other = tmp_path / ".other.partial-999999999-abc"
    for folder in (dead, live, other):
        folder.mkdir()
    assert scratch_prefix(out) == f".bundle.partial-{os.getpid()}-"
    assert remove_stale_scratch(out) == [dead]
    assert live.exists() and other.exists() and not dead.exists()
