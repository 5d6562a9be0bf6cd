"""vLLM's Triton top-k/top-p (``vllm/v1/sample/ops/topk_topp_triton.py``): family ``vllm-triton``.

What to pin: the kernel module's import closure (:mod:`harness.capture.closure`) from four
roots: the kernel module, ``vllm.platforms.cuda`` and ``vllm.platforms.cpu`` (vLLM picks
its platform class from a qualified-name string, which static analysis cannot follow) and
``vllm.third_party.pynvml`` (imported inside ``cuda_platform_plugin`` while vLLM detects
CUDA); plus the wheel's ``.dist-info/METADATA`` (vLLM reads its own version). Compiled
extensions (``vllm._C_stable_libtorch``, ...) become empty placeholder modules.

Two dispatch paths, each proven by observation without changing the module:

* ``split`` (0.30.0 and later): the CUDA split top-p pipeline. On CUDA the public
  ``apply_top_k_top_p_triton(logits, None, p)`` takes it for batch <= 64; in Triton's
  interpreter the child calls ``_apply_topp_split(logits, None, p, -inf, num_sm)`` on CPU
  tensors, the same pipeline the public function enters on CUDA. :class:`SplitObserver`
  proves it: the split entry ran once without top-k, the stats, step x rounds and mask
  launches with one slice count and grids of batch x slices, and no monolithic launch.
* ``single`` (releases before 0.30.0): the one-kernel path. The public entry is called (on
  CPU tensors in the interpreter, after setting vLLM's CPU platform, recorded);
  :class:`SingleObserver` proves exactly one launch, of ``_topk_topp_kernel``.

The proof is stored under the path's name in each case's record; ``k`` is always ``None``
today (top-p only).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import re
import sys
import types
from collections.abc import Collection
from typing import Any

from ...core.errors import KernelChildError
from ...core.names import SINGLE, SPLIT
from . import Family, register


class SplitObserver:
    """Records the split pipeline's calls and launch specs without changing the module.

    It watches code objects only: the entry ``_apply_topp_split`` (its arguments), the
    dispatch functions of the three split kernels (their returned ``(grid, kwargs)``, whose
    ``S`` is the slice count), and the monolithic ``_topk_topp`` dispatch (which must not
    run). On Python >= 3.12 it uses ``sys.monitoring`` local events on those code objects
    only (no cost elsewhere); on 3.11 it falls back to ``sys.setprofile``, which slows
    Triton's interpreter about 2.5x but not the CUDA call it observes.
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
            sys.setprofile(self._profile)
            return self
        mon = sys.monitoring
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
            sys.setprofile(None)
            return
        mon, tool = sys.monitoring, self._tool
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
            "observed_by": f"{self.method} on code objects",
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
            sys.setprofile(self._profile)
            return self
        mon = sys.monitoring
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
            sys.setprofile(None)
            return
        mon, tool = sys.monitoring, self._tool
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
            "observed_by": f"{self.method} on code objects",
            "entry_calls": len(self.entry_calls),
            "launches": self.launches,
            "proven": not problems,
            "problems": problems,
        }


def _triton_launch_codes() -> list[types.CodeType]:
    """The code objects of Triton's kernel launch (compiled and interpreted)."""
    from triton.runtime import jit  # type: ignore[import-untyped]

    codes = [inspect.unwrap(jit.JITFunction.run).__code__]
    try:
        from triton.runtime import interpreter  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - every Triton with an interpreter has it
        return codes
    codes.append(inspect.unwrap(interpreter.InterpretedFunction.run).__code__)
    return codes


def cpu_platform_for_interpreter() -> str:
    """Give vLLM its own CPU platform class, as a CPU build of vLLM would detect it.

    With no CUDA device vLLM resolves an unspecified platform, whose
    ``num_compute_units`` (called by the one-kernel entry) is not implemented. Only the
    interpreter backend of a ``single`` side does this; the evidence records it.
    """
    platforms = importlib.import_module("vllm.platforms")
    cpu = importlib.import_module("vllm.platforms.cpu")
    setattr(platforms, "_current_platform", cpu.CpuPlatform())  # noqa: B010
    return "vllm.platforms.cpu.CpuPlatform (set by the kernel child: Triton interpreter)"


class VllmTriton(Family):
    """vLLM's Triton top-k/top-p sampling kernel."""

    id = "vllm-triton"
    package = "vllm"
    kernel_path = "vllm/v1/sample/ops/topk_topp_triton.py"
    kernel_module = "vllm.v1.sample.ops.topk_topp_triton"
    closure_roots = (
        "vllm.v1.sample.ops.topk_topp_triton",
        "vllm.platforms.cuda",
        "vllm.platforms.cpu",
        "vllm.third_party.pynvml",
    )
    dispatch_paths = (SPLIT, SINGLE)
    default_dispatch = SPLIT

    def extra_files(self, names: Collection[str]) -> list[str]:
        """The distribution metadata vLLM reads its own version from, when the set has one."""
        return sorted(n for n in names if re.fullmatch(
            r"vllm-[^/]+\.dist-info/METADATA|vllm\.egg-info/PKG-INFO", n))

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
        if dispatch == SINGLE and backend == "interpreter":
            return {"platform": cpu_platform_for_interpreter()}
        return {}

    def observer(self, module: Any, dispatch: str, backend: str, num_sm: int) -> Any:
        if dispatch == SPLIT:
            return _Proving(SplitObserver(module), num_sm if backend == "interpreter" else None)
        return _Proving(SingleObserver(module), None)

    def check_case(self, module: Any, dispatch: str, case: dict[str, Any]) -> None:
        if dispatch == SPLIT and int(case["batch"]) > int(module._SPLIT_MAX_BATCH):
            raise KernelChildError(f"case {case['id']}: batch {case['batch']} does not take "
                                   "the split path")

    def call(self, module: Any, dispatch: str, backend: str, logits: Any, k: Any, p: Any,
             num_sm: int) -> Any:
        if backend == "interpreter" and dispatch == SPLIT:
            module._apply_topp_split(logits, k, p, float("-inf"), num_sm)
            return logits
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


class _Proving:
    """An observer whose proof knows the SM count it must have seen (interpreter split)."""

    def __init__(self, inner: SplitObserver | SingleObserver, num_sm: int | None) -> None:
        self.inner, self.num_sm = inner, num_sm

    def __enter__(self) -> _Proving:
        self.inner.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.inner.__exit__(*exc)

    def proof(self, batch: int) -> dict[str, Any]:
        return self.inner.proof(batch, self.num_sm)


FAMILY = register(VllmTriton())
