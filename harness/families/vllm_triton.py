"""vLLM's Triton top-k/top-p (``vllm/v1/sample/ops/topk_topp_triton.py``): family ``vllm-triton``.

What to pin: the kernel module's import closure (:mod:`harness.pins.closure`) from four
roots: the kernel module, ``vllm.platforms.cuda`` and ``vllm.platforms.cpu`` (vLLM picks
its platform class from a qualified-name string, which static analysis cannot follow) and
``vllm.third_party.pynvml`` (imported inside ``cuda_platform_plugin`` while vLLM detects
CUDA); plus the wheel's ``.dist-info/METADATA`` (vLLM reads its own version). Compiled
extensions (``vllm._C_stable_libtorch``, ...) become empty placeholder modules.

Four dispatch paths (:data:`harness.core.names.DISPATCH_PATHS`), each proven by
observation without changing the module. The child passes ``(logits, k, p)`` as vLLM's V2
sampler does (``k`` None when no row has a top-k, ``p`` None when no row has a top-p) and
``has_topp_only_rows`` (some row with k >= vocab and p < 1) only where the release's entry
takes it (0.33.0; 0.30.0-0.32.0 do not, and there the split pipeline always follows the
monolithic kernel for a batch <= 64 with top-k and top-p). :func:`expected_path` says, from
a kernel source, which path a case takes on CUDA (``manifest new`` freezes it per case).

* ``split`` (0.30.0 and later): the CUDA split top-p pipeline alone. On CUDA the public
  entry takes it for p only at batch <= 64; in Triton's interpreter the child calls
  ``_apply_topp_split(logits, None, p, -inf, num_sm)`` on CPU tensors, the same pipeline the
  public function enters on CUDA. :class:`SplitObserver` proves it: the split entry ran
  once without top-k, the stats, step x rounds and mask launches with one slice count and
  grids of batch x slices, and no monolithic launch.
* ``single``: one launch of ``_topk_topp_kernel`` without top-k (p only at batch > 64, or
  any batch before 0.30.0). The public entry is called (on CPU tensors in the interpreter,
  after setting vLLM's CPU platform, recorded); :class:`SingleObserver` proves exactly one
  launch, of ``_topk_topp_kernel``.
* ``single-topk``: the public entry with a top-k tensor, one monolithic launch with
  ``TOPK_ENABLED``, no split (top-k only; or top-k and top-p with no p-only row on 0.33.0;
  or any top-k batch above 64). :class:`PathObserver`.
* ``mixed``: the monolithic kernel with top-k (leaving p-only rows to the split pipeline,
  ``SPLIT_COVERS_PONLY``), then ``_apply_topp_split`` with the top-k tensor (batch <= 64 on
  CUDA with top-k and top-p). The public entry takes it only on CUDA: in the interpreter
  the child makes the entry's internal calls in its order (:func:`_mixed_internals`), with
  the kernel module's ``current_platform`` bound to vLLM's CUDA platform class so that the
  monolithic dispatch sets ``SPLIT_COVERS_PONLY`` as on CUDA (recorded). :class:`PathObserver`.

In the interpreter the monolithic kernel of 0.30.0 and later needs one accommodation of
Triton's interpreter, not of vLLM (:func:`interpreter_loop_tensors`, recorded).
The proof is stored under the path's name in each case's record.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import operator
import re
import sys
import types
from collections.abc import Collection
from typing import Any

from ..core.errors import KernelChildError
from ..core.names import MIXED, SINGLE, SINGLE_TOPK, SPLIT
from . import Family, register


def _monitoring() -> types.ModuleType:
    """``sys.monitoring`` (Python >= 3.12; the observers check for it first). Looked up by
    name because typeshed for Python 3.11, the oldest supported, has no such attribute."""
    monitoring: types.ModuleType = getattr(sys, "monitoring")
    return monitoring


class _Profiler:
    """``sys.setprofile`` for an observer on Python 3.11, off while Triton's interpreter
    executes a grid.

    The observers watch Python-level code only: vLLM's entry and dispatch functions and
    Triton's launch method, all of which run before a grid executes. Inside the
    interpreter's ``GridExecutor.__call__`` every ``tl`` operation is a few Python and C
    calls, each of which would reach the profile function: that made an interpreter run
    about 2.5x slower on Python 3.11. While a grid executes, the profile function is
    removed and then put back; nothing the observers record happens there, and the kernel
    runs the same code either way. On CUDA no grid executes in Python, and nothing is
    wrapped when the interpreter module is not loaded. The proof says which was done
    (:meth:`method`).
    """

    def __init__(self) -> None:
        self._original: Any = None

    @staticmethod
    def _executor() -> Any:
        interpreter = sys.modules.get("triton.runtime.interpreter")
        return None if interpreter is None else getattr(interpreter, "GridExecutor", None)

    def start(self, callback: Any) -> None:
        executor = self._executor()
        if executor is not None and self._original is None:
            original = executor.__call__

            def unprofiled(grid_self: Any, *args: Any, **kwargs: Any) -> Any:
                profile = sys.getprofile()
                sys.setprofile(None)
                try:
                    return original(grid_self, *args, **kwargs)
                finally:
                    sys.setprofile(profile)

            executor.__call__ = unprofiled
            self._original = original
        sys.setprofile(callback)

    def stop(self) -> None:
        sys.setprofile(None)
        if self._original is not None:
            self._executor().__call__ = self._original
            self._original = None

    def method(self, base: str) -> str:
        if base != "sys.setprofile" or self._executor() is None:
            return f"{base} on code objects"
        return f"{base} on code objects (off while Triton's interpreter executes a grid)"


class SplitObserver:
    """Records the split pipeline's calls and launch specs without changing the module.

    It watches code objects only: the entry ``_apply_topp_split`` (its arguments), the
    dispatch functions of the three split kernels (their returned ``(grid, kwargs)``, whose
    ``S`` is the slice count), and the monolithic ``_topk_topp`` dispatch (which must not
    run). On Python >= 3.12 it uses ``sys.monitoring`` local events on those code objects
    only (no cost elsewhere); on 3.11 it falls back to ``sys.setprofile``, removed while Triton's
    interpreter executes a grid (:class:`_Profiler`).
    """

    def __init__(self, module: Any) -> None:
        self.entry = module._apply_topp_split.__code__
        self.stages = {
            inspect.unwrap(module._topp_split_stats).__code__: "stats",
            inspect.unwrap(module._topp_split_step).__code__: "step",
            inspect.unwrap(module._topp_split_mask).__code__: "mask",
        }
        self.monolithic = inspect.unwrap(module._topk_topp).__code__
        self.rounds = int(module._SPLIT_ROUNDS)
        self.method = "sys.monitoring" if hasattr(sys, "monitoring") else "sys.setprofile"
        self._profiler = _Profiler()
        self._tool: int | None = None
        self.reset()

    def reset(self) -> None:
        self.entry_calls: list[dict[str, Any]] = []
        self.launches: list[dict[str, Any]] = []
        self.monolithic_calls = 0

    def _started(self, code: types.CodeType, frame: types.FrameType) -> None:
        if code is self.entry:
            local = frame.f_locals
            self.entry_calls.append({
                "num_sm": int(local["num_sm"]),
                "k_is_none": local["k"] is None,
                "mask_value": repr(float(local["mask_value"])),
            })
        elif code is self.monolithic:
            self.monolithic_calls += 1

    def _returned(self, code: types.CodeType, value: Any) -> None:
        if code in self.stages and value is not None:
            grid, kwargs = value
            self.launches.append({
                "stage": self.stages[code],
                "grid": [int(g) for g in grid],
                "slices": int(kwargs["S"]),
            })

    def _profile(self, frame: types.FrameType, event: str, arg: Any) -> None:
        if event == "call":
            self._started(frame.f_code, frame)
        elif event == "return":
            self._returned(frame.f_code, arg)

    def __enter__(self) -> SplitObserver:
        self.reset()
        if self.method == "sys.setprofile":
            self._profiler.start(self._profile)
            return self
        mon = _monitoring()
        for tool in (mon.PROFILER_ID, 3, 4, 5):
            if mon.get_tool(tool) is None:
                mon.use_tool_id(tool, "topp-gate split observer")
                self._tool = tool
                break
        else:
            raise KernelChildError("no free sys.monitoring tool id to observe the split path")
        events = mon.events
        mon.register_callback(tool, events.PY_START,
                              lambda code, _off: self._started(code, sys._getframe(1)))
        mon.register_callback(tool, events.PY_RETURN,
                              lambda code, _off, value: self._returned(code, value))
        for code in (self.entry, self.monolithic):
            mon.set_local_events(tool, code, events.PY_START)
        for code in self.stages:
            mon.set_local_events(tool, code, events.PY_RETURN)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.method == "sys.setprofile":
            self._profiler.stop()
            return
        mon, tool = _monitoring(), self._tool
        if tool is None:
            return
        for code in (self.entry, self.monolithic, *self.stages):
            mon.set_local_events(tool, code, 0)
        mon.register_callback(tool, mon.events.PY_START, None)
        mon.register_callback(tool, mon.events.PY_RETURN, None)
        mon.free_tool_id(tool)
        self._tool = None

    def proof(self, batch: int, num_sm: int | None) -> dict[str, Any]:
        stages = [launch["stage"] for launch in self.launches]
        slices = sorted({launch["slices"] for launch in self.launches})
        expected = ["stats"] + ["step"] * self.rounds + ["mask"]
        problems = []
        if len(self.entry_calls) != 1:
            problems.append(f"split entry ran {len(self.entry_calls)} times")
        elif not self.entry_calls[0]["k_is_none"]:
            problems.append("split entry ran with a top-k tensor")
        if stages != expected:
            problems.append(f"split launches {stages}, expected {expected}")
        if len(slices) != 1:
            problems.append(f"slice counts {slices}")
        elif any(launch["grid"] != [batch * slices[0]] for launch in self.launches):
            problems.append("a split grid is not batch x slices")
        if self.monolithic_calls:
            problems.append("the monolithic kernel launched")
        observed_sm = self.entry_calls[0]["num_sm"] if self.entry_calls else None
        if num_sm is not None and observed_sm is not None and observed_sm != num_sm:
            problems.append(f"split entry got num_sm={observed_sm}, requested {num_sm}")
        return {
            "entry_point": "_apply_topp_split",
            "observed_by": self._profiler.method(self.method),
            "entry_calls": len(self.entry_calls),
            "num_sm": observed_sm,
            "slices": slices[0] if len(slices) == 1 else None,
            "launches": [
                {"stage": s, "count": stages.count(s),
                 "grid": next(x["grid"] for x in self.launches if x["stage"] == s)}
                for s in ("stats", "step", "mask") if s in stages
            ],
            "monolithic_launched": self.monolithic_calls > 0,
            "proven": not problems,
            "problems": problems,
        }


class SingleObserver:
    """Records the one-kernel path's entry and every Triton launch, without changing vLLM.

    It watches code objects only: the public entry ``apply_top_k_top_p_triton`` (its ``k``)
    and Triton's own launch method (``JITFunction.run``, or ``InterpretedFunction.run`` in
    the interpreter), whose ``self`` names the kernel launched and whose ``grid`` is its
    grid. The single path is proven when the entry ran once without top-k and exactly one
    kernel launched: ``_topk_topp_kernel`` (no split-pipeline kernel).
    """

    KERNEL = "_topk_topp_kernel"

    def __init__(self, module: Any) -> None:
        self.entry = inspect.unwrap(module.apply_top_k_top_p_triton).__code__
        self.launchers = set(_triton_launch_codes())
        self.method = "sys.monitoring" if hasattr(sys, "monitoring") else "sys.setprofile"
        self._profiler = _Profiler()
        self._tool: int | None = None
        self.reset()

    def reset(self) -> None:
        self.entry_calls: list[dict[str, Any]] = []
        self.launches: list[dict[str, Any]] = []

    def _started(self, code: types.CodeType, frame: types.FrameType) -> None:
        local = frame.f_locals
        if code is self.entry:
            self.entry_calls.append({"k_is_none": local.get("k") is None})
        elif code in self.launchers:
            kernel = local.get("self")
            fn = getattr(kernel, "fn", None)
            name = getattr(fn, "__name__", None) or getattr(kernel, "__name__", repr(kernel))
            grid = local.get("grid")
            shown = [int(g) for g in grid] if isinstance(grid, tuple | list) else repr(grid)
            self.launches.append({"kernel": str(name), "grid": shown})

    def _profile(self, frame: types.FrameType, event: str, arg: Any) -> None:
        if event == "call":
            self._started(frame.f_code, frame)

    def __enter__(self) -> SingleObserver:
        self.reset()
        if self.method == "sys.setprofile":
            self._profiler.start(self._profile)
            return self
        mon = _monitoring()
        for tool in (mon.PROFILER_ID, 3, 4, 5):
            if mon.get_tool(tool) is None:
                mon.use_tool_id(tool, "topp-gate single-path observer")
                self._tool = tool
                break
        else:
            raise KernelChildError("no free sys.monitoring tool id to observe the kernel path")
        mon.register_callback(tool, mon.events.PY_START,
                              lambda code, _off: self._started(code, sys._getframe(1)))
        for code in (self.entry, *self.launchers):
            mon.set_local_events(tool, code, mon.events.PY_START)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.method == "sys.setprofile":
            self._profiler.stop()
            return
        mon, tool = _monitoring(), self._tool
        if tool is None:
            return
        for code in (self.entry, *self.launchers):
            mon.set_local_events(tool, code, 0)
        mon.register_callback(tool, mon.events.PY_START, None)
        mon.free_tool_id(tool)
        self._tool = None

    def proof(self, batch: int, num_sm: int | None) -> dict[str, Any]:
        kernels = [launch["kernel"] for launch in self.launches]
        problems = []
        if len(self.entry_calls) != 1:
            problems.append(f"entry ran {len(self.entry_calls)} times")
        elif not self.entry_calls[0]["k_is_none"]:
            problems.append("entry ran with a top-k tensor")
        if kernels != [self.KERNEL]:
            problems.append(f"kernels launched {kernels}, expected [{self.KERNEL!r}]")
        return {
            "entry_point": "apply_top_k_top_p_triton",
            "observed_by": self._profiler.method(self.method),
            "entry_calls": len(self.entry_calls),
            "launches": self.launches,
            "proven": not problems,
            "problems": problems,
        }


class PathObserver:
    """Watches every step of the top-k paths (``single-topk``, ``mixed``), without changing
    vLLM: the public entry (whether it got ``k`` and ``p``, and ``has_topp_only_rows``), the
    monolithic dispatch ``_topk_topp`` (its returned launch constants ``TOPK_ENABLED``,
    ``TOPP_ENABLED``, ``SPLIT_COVERS_PONLY``), the split entry ``_apply_topp_split`` (its
    ``k`` and ``num_sm``), the three split dispatches (their grids and slice count ``S``)
    and every Triton kernel launch (``JITFunction.run`` / ``InterpretedFunction.run``: the
    kernel's name and grid), in the order they happened. One callback watches all of them
    (``sys.monitoring`` local events on those code objects on Python >= 3.12, else
    ``sys.setprofile``).

    ``single-topk`` is proven by: one monolithic launch with ``TOPK_ENABLED`` and no split
    step. ``mixed`` by: the monolithic launch with ``TOPK_ENABLED`` and ``TOPP_ENABLED`` and
    ``SPLIT_COVERS_PONLY`` first, then the split entry once with the top-k tensor and its
    stats, step x rounds and mask launches of one slice count over batch x slices. The
    public entry must have run once, with a top-k tensor, except for ``mixed`` in the
    interpreter, where the child calls the entry's internal functions itself (the public
    entry takes the split pipeline only on CUDA; recorded as ``entry_calls`` 0).
    """

    def __init__(self, module: Any, path: str, interpreter: bool) -> None:
        self.path, self.interpreter = path, interpreter
        self.entry = inspect.unwrap(module.apply_top_k_top_p_triton).__code__
        self.monolithic = inspect.unwrap(module._topk_topp).__code__
        self.split_entry: types.CodeType | None = None
        self.stages: dict[types.CodeType, str] = {}
        if path == MIXED:  # AttributeError on a release without the split pipeline
            self.split_entry = module._apply_topp_split.__code__
            self.stages = {
                inspect.unwrap(module._topp_split_stats).__code__: "stats",
                inspect.unwrap(module._topp_split_step).__code__: "step",
                inspect.unwrap(module._topp_split_mask).__code__: "mask",
            }
            self.rounds = int(module._SPLIT_ROUNDS)
        self.launchers = set(_triton_launch_codes())
        self.method = "sys.monitoring" if hasattr(sys, "monitoring") else "sys.setprofile"
        self._profiler = _Profiler()
        self._tool: int | None = None
        self.reset()

    def reset(self) -> None:
        self.events: list[dict[str, Any]] = []

    def _started(self, code: types.CodeType, frame: types.FrameType) -> None:
        local = frame.f_locals
        if code is self.entry:
            self.events.append({"event": "entry", "k_is_none": local.get("k") is None,
                                "p_is_none": local.get("p") is None,
                                "has_topp_only_rows": local.get("has_topp_only_rows")})
        elif code is self.split_entry:
            self.events.append({"event": "split_entry", "k_is_none": local["k"] is None,
                                "num_sm": int(local["num_sm"])})
        elif code in self.launchers:
            kernel = local.get("self")
            fn = getattr(kernel, "fn", None)
            name = getattr(fn, "__name__", None) or getattr(kernel, "__name__", repr(kernel))
            grid = local.get("grid")
            shown = [int(g) for g in grid] if isinstance(grid, tuple | list) else repr(grid)
            self.events.append({"event": "launch", "kernel": str(name), "grid": shown})

    def _returned(self, code: types.CodeType, value: Any) -> None:
        if value is None:
            return
        if code is self.monolithic:
            grid, kwargs = value
            self.events.append({"event": "monolithic_dispatch",
                                "grid": [int(g) for g in grid],
                                **{key.lower(): bool(kwargs.get(key)) for key in
                                   ("TOPK_ENABLED", "TOPP_ENABLED", "SPLIT_COVERS_PONLY")}})
        elif code in self.stages:
            grid, kwargs = value
            self.events.append({"event": "split_dispatch", "stage": self.stages[code],
                                "grid": [int(g) for g in grid], "slices": int(kwargs["S"])})

    def _profile(self, frame: types.FrameType, event: str, arg: Any) -> None:
        if event == "call":
            self._started(frame.f_code, frame)
        elif event == "return":
            self._returned(frame.f_code, arg)

    def _starts(self) -> list[types.CodeType]:
        return [self.entry, *([self.split_entry] if self.split_entry else []),
                *self.launchers]

    def _returns(self) -> list[types.CodeType]:
        return [self.monolithic, *self.stages]

    def __enter__(self) -> PathObserver:
        self.reset()
        if self.method == "sys.setprofile":
            self._profiler.start(self._profile)
            return self
        mon = _monitoring()
        for tool in (mon.PROFILER_ID, 3, 4, 5):
            if mon.get_tool(tool) is None:
                mon.use_tool_id(tool, "topp-gate path observer")
                self._tool = tool
                break
        else:
            raise KernelChildError("no free sys.monitoring tool id to observe the kernel path")
        events = mon.events
        mon.register_callback(tool, events.PY_START,
                              lambda code, _off: self._started(code, sys._getframe(1)))
        mon.register_callback(tool, events.PY_RETURN,
                              lambda code, _off, value: self._returned(code, value))
        for code in self._starts():
            mon.set_local_events(tool, code, events.PY_START)
        for code in self._returns():
            mon.set_local_events(tool, code, events.PY_RETURN)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.method == "sys.setprofile":
            self._profiler.stop()
            return
        mon, tool = _monitoring(), self._tool
        if tool is None:
            return
        for code in (*self._starts(), *self._returns()):
            mon.set_local_events(tool, code, 0)
        mon.register_callback(tool, mon.events.PY_START, None)
        mon.register_callback(tool, mon.events.PY_RETURN, None)
        mon.free_tool_id(tool)
        self._tool = None

    def proof(self, batch: int, num_sm: int | None) -> dict[str, Any]:
        events = self.events
        entries = [e for e in events if e["event"] == "entry"]
        launches = [e["kernel"] for e in events if e["event"] == "launch"]
        mono = [e for e in events if e["event"] == "monolithic_dispatch"]
        splits = [e for e in events if e["event"] == "split_entry"]
        stages = [e for e in events if e["event"] == "split_dispatch"]
        problems: list[str] = []
        expected_entries = 0 if self.interpreter and self.path == MIXED else 1
        if len(entries) != expected_entries:
            problems.append(f"public entry ran {len(entries)} times, expected "
                            f"{expected_entries}")
        elif entries and entries[0]["k_is_none"]:
            problems.append("public entry ran without a top-k tensor")
        if len(mono) != 1 or not mono[0]["topk_enabled"]:
            problems.append("not one monolithic launch with top-k enabled")
        if not launches or launches[0] != MONOLITHIC_KERNEL:
            problems.append(f"first kernel launched {launches[:1]}, expected "
                            f"[{MONOLITHIC_KERNEL!r}]")
        if self.path == SINGLE_TOPK:
            if len(launches) != 1:
                problems.append(f"kernels launched {launches}, expected one")
            if splits or stages:
                problems.append("the split pipeline ran")
        else:
            problems += self._mixed_problems(mono, splits, stages, launches, batch, num_sm)
        return {
            "entry_point": ("_topk_topp + _apply_topp_split (interpreter: the public "
                            "entry's internal calls on CUDA, in its order)"
                            if self.interpreter and self.path == MIXED
                            else "apply_top_k_top_p_triton"),
            "observed_by": self._profiler.method(self.method),
            "entry_calls": len(entries),
            "entry": entries[0] if entries else None,
            "monolithic": mono[0] if len(mono) == 1 else None,
            "split_entry_calls": len(splits),
            "num_sm": splits[0]["num_sm"] if splits else None,
            "slices": stages[0]["slices"] if stages else None,
            "kernels_launched": launches,
            "proven": not problems,
            "problems": problems,
        }

    def _mixed_problems(self, mono: list[dict[str, Any]], splits: list[dict[str, Any]],
                        stages: list[dict[str, Any]], launches: list[str], batch: int,
                        num_sm: int | None) -> list[str]:
        problems = []
        if len(mono) == 1 and not (mono[0]["topp_enabled"] and mono[0]["split_covers_ponly"]):
            problems.append("the monolithic launch does not leave p-only rows to the split "
                            "pipeline (TOPP_ENABLED and SPLIT_COVERS_PONLY)")
        if len(splits) != 1:
            problems.append(f"split entry ran {len(splits)} times")
        elif splits[0]["k_is_none"]:
            problems.append("split entry ran without the top-k tensor")
        elif num_sm is not None and splits[0]["num_sm"] != num_sm:
            problems.append(f"split entry got num_sm={splits[0]['num_sm']}, requested {num_sm}")
        order = [e["event"] for e in self.events if e["event"] in
                 ("monolithic_dispatch", "split_entry")]
        if order != ["monolithic_dispatch", "split_entry"]:
            problems.append(f"order {order}, expected the monolithic kernel, then the split")
        names = [e["stage"] for e in stages]
        expected = ["stats"] + ["step"] * self.rounds + ["mask"]
        if names != expected:
            problems.append(f"split launches {names}, expected {expected}")
        slices = sorted({e["slices"] for e in stages})
        if len(slices) != 1:
            problems.append(f"slice counts {slices}")
        elif any(e["grid"] != [batch * slices[0]] for e in stages):
            problems.append("a split grid is not batch x slices")
        if len(launches) != 1 + len(expected):
            problems.append(f"{len(launches)} kernel launches, expected {1 + len(expected)}")
        return problems


def _triton_launch_codes() -> list[types.CodeType]:
    """The code objects of Triton's kernel launch (compiled and interpreted)."""
    from triton.runtime import jit

    codes = [inspect.unwrap(jit.JITFunction.run).__code__]
    try:
        from triton.runtime import interpreter
    except ImportError:  # pragma: no cover - every Triton with an interpreter has it
        return codes
    codes.append(inspect.unwrap(interpreter.InterpretedFunction.run).__code__)
    return codes


def cpu_platform_for_interpreter(num_sm: int) -> str:
    """Give vLLM its own CPU platform class, as a CPU build of vLLM would detect it.

    With no CUDA device vLLM resolves an unspecified platform, whose
    ``num_compute_units`` (called by the one-kernel entry) is not implemented. Only the
    interpreter backend of a ``single`` or ``single-topk`` case does this; the evidence
    records it. Releases before 0.24.0 have a CPU platform without ``num_compute_units``
    (the interface's raises): there the child's subclass answers the interpreter's SM
    count, and the evidence says so.
    """
    platforms = importlib.import_module("vllm.platforms")
    cpu = importlib.import_module("vllm.platforms.cpu")
    base = cpu.CpuPlatform
    if "num_compute_units" in vars(base):
        setattr(platforms, "_current_platform", base())  # noqa: B010
        return "vllm.platforms.cpu.CpuPlatform (set by the kernel child: Triton interpreter)"

    class InterpreterCpuPlatform(base):  # type: ignore[misc, valid-type]
        @classmethod
        def num_compute_units(cls, device_id: int = 0) -> int:
            return num_sm

    setattr(platforms, "_current_platform", InterpreterCpuPlatform())  # noqa: B010
    return (f"vllm.platforms.cpu.CpuPlatform subclass (set by the kernel child: Triton "
            f"interpreter; the release's CPU platform has no num_compute_units, so it "
            f"answers {num_sm})")


MONOLITHIC_KERNEL = "_topk_topp_kernel"


def interpreter_loop_tensors() -> str:
    """Let Triton's interpreter run the monolithic kernel of vLLM 0.30.0 and later.

    That kernel loops ``for row_id in tl.range(pid, BATCH_SIZE, num_programs)`` and calls
    ``row_id.to(tl.int64)``: compiled, the loop variable is an int32 scalar tensor; Triton's
    interpreter (3.x) maps ``tl.range`` to Python's ``range``, whose ints have no ``.to``.
    For launches of ``_topk_topp_kernel`` only, ``tl.range`` then yields int32 scalar
    tensors of the interpreter (the compiled type). vLLM's module is not touched; the
    evidence records this. Idempotent."""
    import numpy as np
    from triton import language as tl
    from triton.runtime import interpreter

    note = ("triton interpreter: tl.range yields int32 scalar tensors in "
            f"{MONOLITHIC_KERNEL} (set by the kernel child)")
    if getattr(interpreter._patch_lang, "__topp_gate_loop_tensors__", False):
        return note
    original = interpreter._patch_lang

    def scalar(value: int) -> Any:
        return tl.tensor(interpreter.TensorHandle(np.array([value], dtype=np.int32),
                                                  tl.int32), tl.int32)

    def tensor_range(arg1: Any, arg2: Any = None, step: Any = None, **_: Any) -> Any:
        start, end = (0, arg1) if arg2 is None else (arg1, arg2)
        bounds = [operator.index(v) for v in (start, end, 1 if step is None else step)]
        return (scalar(i) for i in range(*bounds))

    active = [False]  # inside a launch of the monolithic kernel

    def patch_lang(fn: Any) -> Any:
        # Called for the launched kernel and again for every device function it calls
        # (each call re-patches tl.range to Python's range): re-apply ours while the
        # monolithic kernel's launch runs; its scope's restore ends that.
        scope = original(fn)
        if getattr(fn, "__name__", None) == MONOLITHIC_KERNEL and not active[0]:
            active[0] = True
            restore = scope.restore

            def restore_and_end() -> None:
                active[0] = False
                restore()

            scope.restore = restore_and_end
        if active[0]:
            for value in list(fn.__globals__.values()):
                if inspect.ismodule(value) and value in (tl, tl.core):
                    scope.set_attr(value, "range", tensor_range)
        return scope

    patch_lang.__topp_gate_loop_tensors__ = True  # type: ignore[attr-defined]
    interpreter._patch_lang = patch_lang
    return note


class _KernelPlatform:
    """The platform object the kernel module bound at import (``current_platform``), as
    vLLM bound it, or a CUDA platform for the interpreter's ``mixed`` path: its monolithic
    dispatch asks ``current_platform.is_cuda_alike()`` to leave p-only rows to the split
    pipeline, as it does on CUDA. The module's own binding is restored for every other
    path."""

    def __init__(self) -> None:
        self.original: dict[int, Any] = {}

    def set(self, module: Any, cuda: bool) -> str | None:
        if not cuda and not hasattr(module, "current_platform"):
            return None  # a release before 0.30.0 binds no platform in the kernel module
        key = id(module)
        if key not in self.original:
            self.original[key] = module.current_platform
        if not cuda:
            module.current_platform = self.original[key]
            return None
        cuda_platforms = importlib.import_module("vllm.platforms.cuda")
        module.current_platform = cuda_platforms.CudaPlatform()
        return ("vllm.platforms.cuda.CudaPlatform bound as the kernel module's "
                "current_platform (set by the kernel child: Triton interpreter, mixed path)")


_PLATFORM = _KernelPlatform()


def accepts_has_topp_only_rows(module: Any) -> bool:
    """Whether the release's public entry takes ``has_topp_only_rows`` (0.33.0 does;
    0.30.0-0.32.0 do not: there a batch with top-k and top-p at batch <= 64 always runs the
    split pipeline after the monolithic kernel)."""
    entry = inspect.unwrap(module.apply_top_k_top_p_triton)
    return "has_topp_only_rows" in inspect.signature(entry).parameters


HAS_TOPP_ONLY_ROWS = re.compile(rb"^\s*has_topp_only_rows:\s*bool", re.MULTILINE)


def expected_path(kernel: bytes, batch: int, vocab: int, ks: list[int],
                  ps: list[float]) -> str | None:
    """The path the public entry takes on CUDA for one captured case, read from the
    kernel's source (the release) and the case's per-row k and float32 p, with the
    arguments vLLM's V2 sampler passes: ``k`` None when every k is the vocabulary, ``p``
    None when every p is 1.0, ``has_topp_only_rows`` = some row with k >= vocab and p < 1.
    None: no kernel runs (neither top-k nor top-p)."""
    top_k = any(k != vocab for k in ks)
    top_p = any(p != 1.0 for p in ps)
    has_split = bool(SPLIT_ENTRY.search(kernel))
    small = batch <= SPLIT_MAX_BATCH and has_split
    if not top_k:
        return None if not top_p else (SPLIT if small else SINGLE)
    if not (top_p and small):
        return SINGLE_TOPK
    if not HAS_TOPP_ONLY_ROWS.search(kernel):
        return MIXED  # 0.30.0-0.32.0: the split pipeline always follows
    topp_only = any(k >= vocab and p < 1.0 for k, p in zip(ks, ps, strict=True))
    return MIXED if topp_only else SINGLE_TOPK


SPLIT_ENTRY = re.compile(rb"^def _apply_topp_split\(", re.MULTILINE)
SPLIT_MAX_BATCH = 64  # vLLM's _SPLIT_MAX_BATCH (0.30.0-0.33.0); check_case reads the module's


class VllmTriton(Family):
    """vLLM's Triton top-k/top-p sampling kernel."""

    id = "vllm-triton"
    _num_sm = 16  # the interpreter's SM count, as the child's first observer() says
    package = "vllm"
    kernel_path = "vllm/v1/sample/ops/topk_topp_triton.py"
    kernel_module = "vllm.v1.sample.ops.topk_topp_triton"
    closure_roots = (
        "vllm.v1.sample.ops.topk_topp_triton",
        "vllm.platforms.cuda",
        "vllm.platforms.cpu",
        "vllm.third_party.pynvml",
    )
    dispatch_paths = (SPLIT, SINGLE, SINGLE_TOPK, MIXED)
    default_dispatch = SPLIT

    def extra_files(self, names: Collection[str]) -> list[str]:
        """The distribution metadata vLLM reads its own version from, when the set has one."""
        return sorted(n for n in names if re.fullmatch(
            r"vllm-[^/]+\.dist-info/METADATA|vllm\.egg-info/PKG-INFO", n))

    def guess_dispatch(self, kernel: bytes) -> str:
        """A side's path for top-p-only cases: ``split`` when the kernel module defines the
        split pipeline (0.30.0 and later), else ``single``."""
        return SPLIT if SPLIT_ENTRY.search(kernel) else SINGLE

    def guess_case_path(self, kernel: bytes, batch: int, vocab: int, ks: list[int],
                        ps: list[float]) -> str | None:
        return expected_path(kernel, batch, vocab, ks, ps)

    def package_info(self, module: Any, loaded: list[str]) -> dict[str, Any]:
        try:
            dist_version = importlib.metadata.version("vllm")
        except importlib.metadata.PackageNotFoundError:
            dist_version = None
        return {
            "vllm_version": getattr(sys.modules["vllm"], "__version__", None),
            "vllm_dist_version": dist_version,
            "vllm_modules_loaded": len(loaded),
            "vllm_modules_all_from_tree": True,
        }

    def prepare(self, module: Any, dispatch: str, backend: str) -> dict[str, Any]:
        if backend != "interpreter":
            return {}
        prepared: dict[str, Any] = {}
        if dispatch != SPLIT and hasattr(module, "_apply_topp_split"):
            prepared["interpreter_loops"] = interpreter_loop_tensors()
        bound = _PLATFORM.set(module, cuda=dispatch == MIXED)
        if bound is not None:
            prepared["platform"] = bound
        elif dispatch in (SINGLE, SINGLE_TOPK):
            prepared["platform"] = cpu_platform_for_interpreter(self._num_sm)
        return prepared

    def observer(self, module: Any, dispatch: str, backend: str, num_sm: int) -> Any:
        interpreter = backend == "interpreter"
        self._num_sm = num_sm  # the interpreter's SM count, for prepare's CPU platform
        if dispatch == SPLIT:
            return _Proving(SplitObserver(module), num_sm if interpreter else None)
        if dispatch == SINGLE:
            return _Proving(SingleObserver(module), None)
        return _Proving(PathObserver(module, dispatch, interpreter),
                        num_sm if interpreter else None)

    def check_case(self, module: Any, dispatch: str, case: dict[str, Any]) -> None:
        if dispatch in (SPLIT, MIXED) and int(case["batch"]) > int(module._SPLIT_MAX_BATCH):
            raise KernelChildError(f"case {case['id']}: batch {case['batch']} does not take "
                                   f"the {dispatch} path")

    def call(self, module: Any, dispatch: str, backend: str, logits: Any, k: Any, p: Any,
             num_sm: int) -> Any:
        """The public entry with ``(logits, k, p)`` and, where the release takes it,
        ``has_topp_only_rows`` as vLLM's V2 sampler computes it. In the interpreter the
        split and mixed paths (CUDA only in the public entry) call the entry's internal
        functions in its order instead."""
        if backend == "interpreter" and dispatch == SPLIT:
            module._apply_topp_split(logits, k, p, float("-inf"), num_sm)
            return logits
        if backend == "interpreter" and dispatch == MIXED:
            return _mixed_internals(module, logits, k, p, num_sm)
        if k is not None and p is not None and accepts_has_topp_only_rows(module):
            vocab = int(logits.shape[1])
            topp_only = bool(((k >= vocab) & (p < 1.0)).any())
            return module.apply_top_k_top_p_triton(logits, k, p,
                                                   has_topp_only_rows=topp_only)
        return module.apply_top_k_top_p_triton(logits, k, p)

    def driver_version(self) -> str | None:
        pynvml = sys.modules.get("vllm.third_party.pynvml")
        if pynvml is None:
            return None
        try:
            pynvml.nvmlInit()
            version = pynvml.nvmlSystemGetDriverVersion()
            return version.decode() if isinstance(version, bytes) else str(version)
        except Exception:  # noqa: BLE001 - the driver version is informative only
            return None


def _mixed_internals(module: Any, logits: Any, k: Any, p: Any, num_sm: int) -> Any:
    """What ``apply_top_k_top_p_triton(logits, k, p)`` runs on CUDA for a batch <= 64 with
    top-k, top-p and p-only rows, step for step: int32 k and float32 p, a per-program
    buffer of ``min(next_power_of_2(programs), num_sm)`` rows cut to ``programs`` =
    ``min(num_sm, batch)``, the two lookup tables as tensors, the monolithic dispatch
    ``_topk_topp``, then ``_apply_topp_split`` with the top-k tensor."""
    batch, vocab = logits.shape
    k_ptr, p_ptr = k.to(module.torch.int32), p.to(module.torch.float32)
    programs = min(num_sm, batch)
    size = min(1 << max(programs - 1, 0).bit_length(), num_sm)
    buffer = logits.new_empty((size, vocab))[:programs]
    sigma = logits.new_tensor(module._NORMAL_CDF_TO_SIGMA_TABLE)
    percentile = logits.new_tensor(module._PERCENTILE_TO_STD_TABLE)
    module._topk_topp(logits, buffer, percentile, sigma, k_ptr, p_ptr, float("-inf"), num_sm)
    module._apply_topp_split(logits, k_ptr, p_ptr, float("-inf"), num_sm)
    return logits


class _Proving:
    """An observer whose proof knows the SM count it must have seen (interpreter split)."""

    def __init__(self, inner: SplitObserver | SingleObserver | PathObserver,
                 num_sm: int | None) -> None:
        self.inner, self.num_sm = inner, num_sm

    def __enter__(self) -> _Proving:
        self.inner.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.inner.__exit__(*exc)

    def proof(self, batch: int) -> dict[str, Any]:
        return self.inner.proof(batch, self.num_sm)


FAMILY = register(VllmTriton())
