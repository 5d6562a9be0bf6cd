"""Kernel child: import one side's pinned vLLM kernel module and run it on captured bytes.

Run as ``python -m harness.capture.kernels.child REQUEST.json`` by
:mod:`harness.capture.kernels.runner`, one process per side, so two vLLM versions never
share an interpreter. Needs only the standard library, torch, triton and numpy (the GPU
machine has nothing else), and of topp-gate only :mod:`harness.core.digest`,
:mod:`harness.core.names` and :mod:`harness.core.errors` (standard library only).

The request (written by the runner) names the side, its verified tree, the backend, the SM
count for the interpreter, the cases index and the output directory. The child:

1. puts the tree first on ``sys.path`` and installs empty placeholder modules for exactly
   the compiled vLLM extensions listed in the request (the split top-p path is pure
   Triton); it never writes bytecode into the tree;
2. imports ``vllm.v1.sample.ops.topk_topp_triton`` unmodified, checks that every ``vllm``
   module came from the tree, and hashes the kernel file it actually imported (``__file__``);
3. for each case reads the raw little-endian float32 logits and p, hashes exactly the bytes
   it read, runs the split top-p pipeline while observing (``sys.setprofile``, no change
   to the module) that the split entry point ran, with which SM count, slice count and
   grids, and that the monolithic kernel did not launch; a case without that proof fails;
4. writes ``<case id>.out.f32`` and ``evidence.json``.

The request's ``dispatch`` names the path to prove (default ``split``). For ``single`` (the
one-kernel path of releases before 0.30.0) step 3 observes instead the public entry
``apply_top_k_top_p_triton`` and Triton's own launch method (:class:`SingleObserver`): the
proof is exactly one launch, of ``_topk_topp_kernel``; in the interpreter the public entry
is called on CPU tensors (vLLM's CPU platform set, and recorded, first). The proof is
stored under the path's name (``split`` or ``single``) in each case's record.

Backends: ``cuda`` calls the public ``apply_top_k_top_p_triton(logits, None, p)`` (batch
<= 64 takes the split pipeline); ``interpreter`` (``TRITON_INTERPRET=1`` and an empty
``CUDA_VISIBLE_DEVICES``, set by the runner) calls ``_apply_topp_split(logits, None, p,
-inf, num_sm)`` on CPU tensors, the same pipeline the public function enters on CUDA.

Test hook: ``TOPP_GATE_TEST_FAULT=abort|hang`` (set only by the test suite through the
runner's ``fault`` argument) aborts the process or sleeps after the kernel import; the
value is written into the evidence the child starts with.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import json
import os
import platform
import statistics
import sys
import time
import types
from pathlib import Path
from typing import Any

from ...core.digest import sha256_hex
from ...core.errors import KernelChildError
from ...core.names import DISPATCH_PATHS, SINGLE, SPLIT

KERNEL_MODULE = "vllm.v1.sample.ops.topk_topp_triton"
EVIDENCE_SCHEMA = "topp-gate/kernel-evidence/v1"
FAULT_ENV = "TOPP_GATE_TEST_FAULT"
EXIT_CASE_FAILED = 3  # a case ran but its split-path proof or its input check failed


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


# --- import ---------------------------------------------------------------------------------


def install_placeholders(names: list[str]) -> list[str]:
    """Empty modules for compiled extensions the split path never calls."""
    for name in names:
        if not name.startswith("vllm."):
            raise KernelChildError(f"placeholder {name!r} is not a vLLM extension")
        module = types.ModuleType(name, "topp-gate placeholder for a compiled extension")
        module.__topp_gate_placeholder__ = True  # type: ignore[attr-defined]
        sys.modules[name] = module
    return sorted(names)


def import_kernel(tree: Path, kernel_path: str,
                  placeholders: list[str]) -> tuple[Any, dict[str, Any]]:
    sys.dont_write_bytecode = True
    sys.path.insert(0, str(tree))
    installed = install_placeholders(placeholders)
    started = time.perf_counter()
    module = importlib.import_module(KERNEL_MODULE)
    import_s = time.perf_counter() - started
    kernel_file = Path(module.__file__ or "").resolve()
    if kernel_file != (tree / kernel_path).resolve():
        raise KernelChildError(f"kernel imported from {kernel_file}, not from the pinned tree")
    outside = []
    for name, mod in list(sys.modules.items()):
        if name != "vllm" and not name.startswith("vllm."):
            continue
        if getattr(mod, "__topp_gate_placeholder__", False):
            continue
        origin = getattr(mod, "__file__", None)
        if origin is None or not Path(origin).resolve().is_relative_to(tree):
            outside.append(name)
    if outside:
        shown = ", ".join(sorted(outside)[:5])
        raise KernelChildError(f"vLLM modules from outside the pinned tree: {shown}")
    vllm_modules = sorted(n for n in sys.modules if n == "vllm" or n.startswith("vllm."))
    try:
        dist_version = importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        dist_version = None
    vllm = sys.modules["vllm"]
    info = {
        "kernel_file": kernel_path,
        "kernel_sha256": sha256_hex(kernel_file.read_bytes()),
        "vllm_version": getattr(vllm, "__version__", None),
        "vllm_dist_version": dist_version,
        "vllm_modules_loaded": len(vllm_modules),
        "vllm_modules_all_from_tree": True,
        "placeholders_installed": installed,
        "third_party_loaded": sorted(
            {n.split(".")[0] for n in sys.modules}
            - set(sys.stdlib_module_names) - {"vllm", "harness", "__main__", "__mp_main__"}
            - {n for n in sys.modules if n.startswith("_")}
        ),
        "import_s": round(import_s, 3),
    }
    return module, info


# --- observing the split path ---------------------------------------------------------------


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


Observer = SplitObserver | SingleObserver


# --- running cases --------------------------------------------------------------------------


def read_case(base: Path, case: dict[str, Any]) -> tuple[bytes, bytes]:
    batch, vocab = int(case["batch"]), int(case["vocab"])
    logits = (base / case["logits"]).read_bytes()
    p = (base / case["p"]).read_bytes()
    if len(logits) != 4 * batch * vocab or len(p) != 4 * batch:
        raise KernelChildError(
            f"case {case['id']}: {len(logits)} logits bytes and {len(p)} p bytes do not "
            f"match batch {batch} x vocab {vocab} float32"
        )
    return logits, p


def _device_info(torch: Any, backend: str) -> dict[str, Any]:
    if backend == "interpreter":
        cpu = platform.processor() or platform.machine()
        return {"name": f"cpu ({cpu}), Triton interpreter",
                "driver": None, "sm_count": None, "capability": None, "cuda_runtime": None}
    props = torch.cuda.get_device_properties(0)
    return {
        "name": props.name,
        "driver": _driver_version(),
        "sm_count": int(props.multi_processor_count),
        "capability": f"{props.major}.{props.minor}",
        "cuda_runtime": torch.version.cuda,
    }


def _driver_version() -> str | None:
    pynvml = sys.modules.get("vllm.third_party.pynvml")
    if pynvml is None:
        return None
    try:
        pynvml.nvmlInit()
        version = pynvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:  # noqa: BLE001 - the driver version is informative only
        return None


def run_case(torch: Any, module: Any, observer: Observer, backend: str, num_sm: int,
             case: dict[str, Any], logits_bytes: bytes, p_bytes: bytes,
             repeats: int) -> tuple[bytes, dict[str, Any]]:
    batch, vocab = int(case["batch"]), int(case["vocab"])
    split = isinstance(observer, SplitObserver)
    if split and batch > int(module._SPLIT_MAX_BATCH):
        raise KernelChildError(f"case {case['id']}: batch {batch} does not take the split path")
    host_logits = torch.frombuffer(bytearray(logits_bytes), dtype=torch.float32)
    host_logits = host_logits.reshape(batch, vocab)
    host_p = torch.frombuffer(bytearray(p_bytes), dtype=torch.float32)
    if backend == "cuda":
        out, proof, timings = run_cuda(torch, module, observer, host_logits, host_p, batch,
                                       repeats)
    else:
        out, proof, timings = run_interpreter(module, observer, host_logits, host_p, batch,
                                              num_sm)
    out_bytes = out.numpy().astype("<f4", copy=False).tobytes()
    kept = (out != float("-inf")).sum(dim=1).tolist()  # tokens not masked, per row
    record = {
        "id": case["id"],
        "batch": batch,
        "vocab": vocab,
        "logits_sha256": sha256_hex(logits_bytes),
        "p_sha256": sha256_hex(p_bytes),
        "output": f"{case['id']}.out.f32",
        "output_sha256": sha256_hex(out_bytes),
        "kept_counts": [int(k) for k in kept],
        (SPLIT if split else SINGLE): proof,
        "timings": timings,
        "status": "ok" if proof["proven"] else
        ("split_path_not_proven" if split else "single_path_not_proven"),
    }
    return out_bytes, record


def run_cuda(torch: Any, module: Any, observer: Observer, host_logits: Any, host_p: Any,
             batch: int, repeats: int) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """The public entry on the GPU, observed once; then ``repeats`` timed calls. Returns
    the first call's output (on the host), the path proof and the timings."""
    logits = host_logits.to("cuda")
    # The split path masks its input in place and returns it: repeats start from a
    # pristine copy of the captured bytes, never from an already-masked tensor.
    pristine = logits.clone()
    p = host_p.to("cuda")
    torch.cuda.synchronize()
    started = time.perf_counter()
    with observer:
        out = module.apply_top_k_top_p_triton(logits, None, p)
        torch.cuda.synchronize()
    timings: dict[str, Any] = {"first_call_ms": round((time.perf_counter() - started) * 1e3, 3)}
    proof = observer.proof(batch, None)
    first = out.detach().cpu().contiguous()
    timings.update(_timed_repeats(torch, module, pristine, p, first, repeats))
    return first, proof, timings


def _timed_repeats(torch: Any, module: Any, pristine: Any, p: Any, first: Any,
                   repeats: int) -> dict[str, Any]:
    """CUDA-event timings of ``repeats`` more calls, each from the pristine input, and
    whether every output is bit-identical to the first (empty when ``repeats`` is 0)."""
    per_call, identical = [], True
    work = torch.empty_like(pristine)
    for _ in range(repeats):
        work.copy_(pristine)
        begin = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        begin.record()
        again = module.apply_top_k_top_p_triton(work, None, p)
        end.record()
        torch.cuda.synchronize()
        per_call.append(begin.elapsed_time(end))
        identical = identical and bool(torch.equal(again.cpu().view(torch.int32),
                                                   first.view(torch.int32)))
    if not per_call:
        return {}
    return {"repeats": repeats, "median_ms": round(statistics.median(per_call), 4),
            "min_ms": round(min(per_call), 4), "max_ms": round(max(per_call), 4),
            "repeat_outputs_bit_identical": identical}


def run_interpreter(module: Any, observer: Observer, host_logits: Any, host_p: Any,
                    batch: int, num_sm: int) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """One observed call in Triton's interpreter on CPU tensors: the split entry with the
    requested SM count, or the public entry for the one-kernel path."""
    split = isinstance(observer, SplitObserver)
    logits = host_logits.clone()
    p = host_p.clone()
    started = time.perf_counter()
    with observer:
        if split:
            module._apply_topp_split(logits, None, p, float("-inf"), num_sm)
            out = logits
        else:
            out = module.apply_top_k_top_p_triton(logits, None, p)
    timings = {"wall_s": round(time.perf_counter() - started, 3)}
    proof = observer.proof(batch, num_sm if split else None)
    return out, proof, timings


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m harness.capture.kernels.child REQUEST.json", file=sys.stderr)
        return 2
    request = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    out_dir = Path(request["out_dir"])
    fault = os.environ.get(FAULT_ENV) or None
    evidence = started_evidence(request, fault)
    evidence_path = out_dir / "evidence.json"
    _write_json(evidence_path, evidence)
    try:
        check_host(request["backend"])
        torch, module, dispatch = load_kernel(request, evidence)
        _write_json(evidence_path, evidence)
        if fault == "abort":
            os.abort()
        if fault == "hang":
            time.sleep(10**6)
        cases_path = Path(request["cases"])
        index = json.loads(cases_path.read_text(encoding="utf-8"))
        observer = make_observer(module, dispatch, evidence)
        evidence["cases"] = run_cases(torch, module, observer, request, index,
                                      cases_path.parent, out_dir)
        failed = [r["id"] for r in evidence["cases"] if r["status"] != "ok"]
        evidence["status"] = "ok" if not failed else "failed"
        _write_json(evidence_path, evidence)
        if failed:
            print(f"{dispatch} path not proven for case {failed[0]}", file=sys.stderr)
            return EXIT_CASE_FAILED
        return 0
    except KernelChildError as err:
        evidence.update(status="failed", error=err.detail)
        _write_json(evidence_path, evidence)
        print(f"kernel child: {err.detail}", file=sys.stderr)
        return EXIT_CASE_FAILED


def started_evidence(request: dict[str, Any], fault: str | None) -> dict[str, Any]:
    """The evidence a child writes before it imports anything: what it was asked to do."""
    backend = request["backend"]
    return {
        "schema": EVIDENCE_SCHEMA,
        "status": "started",
        "side": request["side"],
        "backend": backend,
        "interpreter": backend == "interpreter",
        "env": {k: os.environ.get(k) for k in ("TRITON_INTERPRET", "CUDA_VISIBLE_DEVICES")},
        "test_fault": fault,
        "python": platform.python_version(),
    }


def check_host(backend: str) -> None:
    """The host's byte order and the environment the runner set for ``backend``."""
    if sys.byteorder != "little":
        raise KernelChildError("the captured bytes are little-endian; this host is not")
    if backend == "interpreter" and (os.environ.get("TRITON_INTERPRET") != "1"
                                     or os.environ.get("CUDA_VISIBLE_DEVICES") != ""):
        raise KernelChildError(
            "interpreter backend needs TRITON_INTERPRET=1 and CUDA_VISIBLE_DEVICES="
        )
    if backend == "cuda" and os.environ.get("TRITON_INTERPRET"):
        raise KernelChildError("cuda backend must not run with TRITON_INTERPRET set")


def load_kernel(request: dict[str, Any], evidence: dict[str, Any]) -> tuple[Any, Any, str]:
    """Import the pinned kernel module, then torch and triton; record in ``evidence`` what
    was imported, from where, and on which device. Returns torch, the module, the path."""
    backend = request["backend"]
    tree = Path(request["tree"]).resolve()
    module, info = import_kernel(tree, request["side"]["kernel_path"],
                                 request["placeholders"])
    import numpy  # noqa: F401  (output bytes)
    import torch
    import triton

    if backend == "cuda" and not torch.cuda.is_available():
        raise KernelChildError("cuda backend: torch sees no CUDA device")
    dispatch = str(request.get("dispatch", "split"))
    if dispatch not in DISPATCH_PATHS:
        raise KernelChildError(f"unknown dispatch path {dispatch!r}")
    evidence["dispatch"] = dispatch
    if dispatch == "single" and backend == "interpreter":
        evidence["platform"] = cpu_platform_for_interpreter()
    evidence.update(info)
    evidence.update(torch=torch.__version__, triton=triton.__version__,
                    device=_device_info(torch, backend),
                    num_sm_requested=request["num_sm"] if backend == "interpreter" else None)
    return torch, module, dispatch


def make_observer(module: Any, dispatch: str, evidence: dict[str, Any]) -> Observer:
    """The observer of the declared path; a module without that path is recorded as such."""
    try:
        return SplitObserver(module) if dispatch == "split" else SingleObserver(module)
    except AttributeError as err:
        evidence["declared_path_missing"] = True
        raise KernelChildError(f"the kernel module has no {dispatch} path ({err})") from None


def run_cases(torch: Any, module: Any, observer: Observer, request: dict[str, Any],
              index: dict[str, Any], base: Path, out_dir: Path) -> list[dict[str, Any]]:
    """Every case of the index (inputs under ``base``), in order: its output file
    written, its record returned."""
    records = []
    for case in index["cases"]:
        logits_bytes, p_bytes = read_case(base, case)
        out_bytes, record = run_case(
            torch, module, observer, request["backend"], int(request["num_sm"]), case,
            logits_bytes, p_bytes, int(request["repeats"]),
        )
        (out_dir / record["output"]).write_bytes(out_bytes)
        records.append(record)
    return records


if __name__ == "__main__":
    raise SystemExit(main())
