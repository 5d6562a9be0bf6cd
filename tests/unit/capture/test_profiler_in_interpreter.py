"""The path observers' ``sys.setprofile`` on Python 3.11 (``_Profiler`` in
harness/families/vllm_triton.py) is off while Triton's interpreter executes a grid,
and only then: the launch it observes is still seen, the kernel's own frames are not, the
profile function is back after the grid (also after a grid that raised), and stopping puts
Triton's ``GridExecutor.__call__`` back.

Triton reads ``TRITON_INTERPRET`` when ``triton.language`` is first imported, so the kernels
run in a process of their own: this file runs itself as a script (see test_arith_probe.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")

ROOT = Path(__file__).resolve().parents[3]


def _in_the_interpreter(mode: str) -> dict[str, object]:
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": "",
           "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, __file__, mode], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_the_launch_is_seen_and_the_kernel_body_is_not():
    seen = _in_the_interpreter("profiler")
    assert seen["launches"] == 3                  # InterpretedFunction.run: double twice, broken
    assert seen["kernel_body_calls"] == 0         # nothing inside the grid reached the profile
    assert seen["profile_back_after_grid"] is True
    assert seen["profile_back_after_raising_grid"] is True
    assert seen["raised"] == "InterpreterError"
    assert seen["executor_restored"] is True and seen["profile_after_stop"] is None
    assert seen["outputs"] == [2.0, 4.0, 6.0, 8.0]


def test_a_plain_setprofile_sees_the_kernel_body():
    """What the wrapper takes away: without it every program's body reaches the profile."""
    seen = _in_the_interpreter("plain")
    assert seen["launches"] == 2
    assert isinstance(seen["kernel_body_calls"], int) and seen["kernel_body_calls"] >= 8
    assert seen["outputs"] == [2.0, 4.0, 6.0, 8.0]


def _script(mode: str) -> dict[str, object]:  # pragma: no cover - runs in the child
    import torch
    import triton
    import triton.language as tl
    from triton.runtime import interpreter

    from harness.families.vllm_triton import _Profiler

    @triton.jit
    def double(x_ptr, out_ptr):
        i = tl.program_id(0)
        tl.store(out_ptr + i, tl.load(x_ptr + i) * 2)

    @triton.jit
    def broken(x_ptr):
        tl.store(x_ptr + tl.program_id(0), tl.load(x_ptr) + undefined_name)  # noqa: F821

    launch = interpreter.InterpretedFunction.run.__code__
    counts = {"launches": 0, "kernel_body_calls": 0}

    def profile(frame, event, _arg):
        if event != "call":
            return
        if frame.f_code is launch:
            counts["launches"] += 1
        elif frame.f_code.co_name == "double":
            counts["kernel_body_calls"] += 1

    x = torch.arange(1, 5, dtype=torch.float32)
    out = torch.empty(4, dtype=torch.float32)
    original = interpreter.GridExecutor.__call__
    profiler = _Profiler()
    result: dict[str, object] = {}
    if mode == "profiler":
        profiler.start(profile)
    else:
        sys.setprofile(profile)
    double[(4,)](x, out)
    result["profile_back_after_grid"] = sys.getprofile() is profile
    double[(4,)](x, out)
    if mode == "profiler":
        try:
            broken[(1,)](x)
        except Exception as err:  # the interpreter's own error for the kernel's NameError
            result["raised"] = type(err).__name__
        result["profile_back_after_raising_grid"] = sys.getprofile() is profile
        profiler.stop()
        result["executor_restored"] = interpreter.GridExecutor.__call__ is original
    else:
        sys.setprofile(None)
    result["profile_after_stop"] = sys.getprofile()
    result.update(counts, outputs=out.tolist())
    return result


if __name__ == "__main__":  # pragma: no cover - the child of the tests above
    print(json.dumps(_script(sys.argv[1])))
