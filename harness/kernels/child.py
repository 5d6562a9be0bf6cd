"""Kernel child: import one side's pinned kernel from a private copy and run it on captured bytes.

Run as ``python -m harness.kernels.child REQUEST.json`` by
:mod:`harness.kernels.runner`, one process per side, so two vLLM versions never
share an interpreter. Needs only the standard library, torch, triton and numpy (the GPU
machine has nothing else), and of topp-gate only :mod:`harness.core.digest`,
:mod:`harness.core.names`, :mod:`harness.core.errors` and the side's kernel family
(:mod:`harness.families`). Everything specific to one implementation (what to
import, which entry to call with ``(logits, k, p)``, how a dispatch path is proven) lives in
the family module the request names; this module is generic.

The request (written by the runner) names the side, its family (id, module, and the folder
to import that module from, if any), the *private copy* of its pinned tree (a fresh 0700
folder the runner filled and hashed after copying), the fresh empty bytecode prefix, the
backend, the SM count for the interpreter, the cases index and the output directory. The
child:

1. checks that it writes no bytecode (``sys.dont_write_bytecode``) and reads bytecode only
   from the fresh prefix (``sys.pycache_prefix``, set by ``PYTHONPYCACHEPREFIX``), puts the
   copy first on ``sys.path``, refuses to start when the environment or the path could
   supply what the family blocks (:func:`check_isolation`: FlashInfer's ``FLASHINFER_*``
   variables, ``flashinfer_jit_cache`` and ``flashinfer_cubin``; the runner removed the
   variables and the evidence names them, ``env_removed``), runs the family's
   ``before_import`` (FlashInfer: its JIT workspace is the stable copy's build folder,
   the request's ``build_dir``) and installs empty placeholder modules for exactly the
   compiled extensions listed in the request;
2. imports the family's kernel module unmodified (``family.import_kernel``: by default
   ``importlib.import_module``; ``vllm-pytorch`` loads two functions of its file and
   ``flashinfer`` imports through bare packages, each recorded in the evidence), checks
   that every module of the family's package came from the copy (``__file__``) and none
   from bytecode outside the fresh prefix (``__cached__``), and hashes the files of the
   copy it imported from (``kernel_sha256``, ``tree_sha256``: the bytes imported);
3. for each case reads the raw little-endian float32 logits and p, and the int32 top-k
   when the case has a ``k`` file, hashes exactly the bytes it read (``logits_sha256``,
   ``p_sha256``, ``k_sha256``), and calls the family's entry with ``(logits, k, p)`` as
   vLLM's V2 sampler passes them (``k`` None when every k is the vocabulary, ``p`` None
   when every p is 1.0: :func:`sampler_arguments`) while the family's observer of the
   case's path watches (no change to the module); a case without that proof fails; a
   sampling family's proof may carry the per-row ``draws``, which go into the case's record;
   a sampling family draws with the cases index's ``sampling`` when the manifest declares
   one (``Family.declare_sampling``: draws per row, Philox seed and offset, which the proof
   records and ``verify`` checks), else with its own constants;
4. writes ``<case id>.out.f32`` and ``evidence.json``.

The request's ``dispatch`` names the path to prove (default: the family's), and its
``paths`` (case id -> path) the cases that take another one (a version 3 manifest's
per-case ``paths``; such a record also says ``"dispatch": path``). The proof is stored
under the path's name in each case's record (``record[path]["proven"]``), as
:func:`harness.core.names.proven_cases` reads it; for ``vllm-triton`` the paths are
``split``, ``single``, ``single-topk`` and ``mixed``
(:mod:`harness.families.vllm_triton`).

Test hook: ``TOPP_GATE_TEST_FAULT=abort|hang`` (set only by the test suite through the
runner's ``fault`` argument) aborts the process or sleeps after the kernel import; the
value is written into the evidence the child starts with.
"""

from __future__ import annotations

import importlib
import json
import os
import platform
import statistics
import sys
import time
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.digest import sha256_hex
from ..core.errors import KernelChildError
from ..pins.tree_digest import copy_digest, tree_digest

EVIDENCE_SCHEMA = "topp-gate/kernel-evidence/v1"
FAULT_ENV = "TOPP_GATE_TEST_FAULT"
EXIT_CASE_FAILED = 3  # a case ran but its path proof or its input check failed


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


# --- the family and the import ----------------------------------------------------------------


def load_family(spec: dict[str, Any]) -> Any:
    """The family the request names: its module imported (from ``path`` when given), its
    ``FAMILY`` checked to carry the requested id."""
    if spec.get("path"):
        sys.path.append(str(spec["path"]))
    try:
        module = importlib.import_module(str(spec["module"]))
    except ImportError as err:
        raise KernelChildError(f"cannot import kernel family module {spec['module']!r}: "
                               f"{err}") from None
    family = getattr(module, "FAMILY", None)
    if getattr(family, "id", None) != spec["id"]:
        raise KernelChildError(f"module {spec['module']!r} does not define family "
                               f"{spec['id']!r}")
    return family


def install_placeholders(family: Any, names: list[str]) -> list[str]:
    """Empty modules for compiled extensions the measured path never calls."""
    for name in names:
        if not family.placeholder_ok(name):
            raise KernelChildError(f"placeholder {name!r} is not a {family.package} extension")
        module = types.ModuleType(name, "topp-gate placeholder for a compiled extension")
        module.__topp_gate_placeholder__ = True  # type: ignore[attr-defined]
        sys.modules[name] = module
    return sorted(names)


def check_bytecode_settings(prefix: Path) -> None:
    """No bytecode is written, and bytecode is read only from the fresh, empty prefix."""
    if not sys.dont_write_bytecode or os.environ.get("PYTHONDONTWRITEBYTECODE") != "1":
        raise KernelChildError("the kernel child must run with PYTHONDONTWRITEBYTECODE=1")
    if sys.pycache_prefix is None or Path(sys.pycache_prefix).resolve() != prefix:
        raise KernelChildError("the kernel child must read bytecode only from its fresh "
                               "PYTHONPYCACHEPREFIX")
    if any(prefix.iterdir()):
        raise KernelChildError(f"the bytecode prefix {prefix} is not empty")


def _in_package(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def check_loaded_from_copy(package: str, tree: Path, prefix: Path) -> list[str]:
    """Every loaded module of ``package`` (placeholders aside) came from a file of the copy,
    and from no bytecode outside the fresh prefix; returns their names."""
    outside, cached = [], []
    for name, mod in list(sys.modules.items()):
        if not _in_package(name, package) or getattr(mod, "__topp_gate_placeholder__", False):
            continue
        origin = getattr(mod, "__file__", None)
        if origin is None or not Path(origin).resolve().is_relative_to(tree):
            outside.append(name)
        bytecode = getattr(mod, "__cached__", None)
        if bytecode is not None and not Path(bytecode).resolve().is_relative_to(prefix):
            cached.append(name)
    if outside:
        shown = ", ".join(sorted(outside)[:5])
        raise KernelChildError(f"{package} modules from outside the pinned tree: {shown}")
    if cached:
        shown = ", ".join(sorted(cached)[:5])
        raise KernelChildError(f"{package} modules with bytecode outside the fresh prefix: "
                               f"{shown}")
    return sorted(n for n in sys.modules if _in_package(n, package))


def check_isolation(family: Any) -> dict[str, Any]:
    """Refuse to start when the environment or the import path could supply code or
    settings the family says must not reach its kernel (none for most families):

    * a variable whose name starts with one of ``family.env_prefixes_removed`` (the runner
      removed them all; one here was set some other way);
    * a top-level module of ``family.blocked_modules`` that ``importlib.util.find_spec``
      finds on this path (``find_spec`` of a top-level name locates it and runs none of its
      code). FlashInfer's ``jit/env.py`` imports ``flashinfer_jit_cache`` and
      ``flashinfer_cubin`` whenever they are found: their code would run during the pinned
      import and their shared objects would replace the build from the pinned sources.

    Refusing is the fail-closed choice: a blocker that made the import fail would break the
    pinned import too (it asks ``find_spec`` for the names on every start), and one that
    hid them would let a run go on beside a planted package nobody was told about. Returns
    evidence fields (what was checked)."""
    import importlib.util

    prefixes = tuple(getattr(family, "env_prefixes_removed", ()))
    blocked = tuple(getattr(family, "blocked_modules", ()))
    if not prefixes and not blocked:
        return {}
    present = sorted(name for name in os.environ if prefixes and name.startswith(prefixes))
    if present:
        raise KernelChildError(f"{family.id} child started with {', '.join(present)} set; "
                               "the runner removes every such variable; refused")
    for name in blocked:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError) as err:
            raise KernelChildError(f"cannot tell whether {name} is importable ({err}); "
                                   "refused") from None
        if spec is not None:
            where = spec.origin or ", ".join(spec.submodule_search_locations or []) or "?"
            raise KernelChildError(f"{name} is importable ({where[:200]}): {family.id} would "
                                   "load its code and libraries instead of the pinned "
                                   "build; refused (remove it from the path)")
    return {"isolation": {"env_prefixes_removed": list(prefixes),
                          "blocked_modules_absent": list(blocked)}}


def import_kernel(family: Any, tree: Path, prefix: Path, kernel_path: str,
                  placeholders: list[str], build_dir: Path | None = None
                  ) -> tuple[Any, dict[str, Any]]:
    sys.dont_write_bytecode = True
    check_bytecode_settings(prefix)
    sys.path.insert(0, str(tree))
    isolation = check_isolation(family)
    before = getattr(family, "before_import", None)
    if before is not None:
        isolation.update(before(tree, build_dir))
    installed = install_placeholders(family, placeholders)
    started = time.perf_counter()
    module = family.import_kernel(tree)
    import_s = time.perf_counter() - started
    kernel_file = Path(module.__file__ or "").resolve()
    if kernel_path != family.kernel_path or kernel_file != (tree / kernel_path).resolve():
        raise KernelChildError(f"kernel imported from {kernel_file}, not from the pinned tree")
    loaded = check_loaded_from_copy(family.package, tree, prefix)
    if any(prefix.iterdir()):
        raise KernelChildError(f"bytecode was written into the prefix {prefix}")
    files = copy_digest(tree)
    own = {family.package, type(family).__module__.split(".")[0]}
    info = {
        "family": family.id,
        "kernel_file": kernel_path,
        "kernel_sha256": files.get(kernel_path),
        "tree_sha256": tree_digest(files),
        **family.package_info(module, loaded),
        **isolation,
        "placeholders_installed": installed,
        "third_party_loaded": sorted(
            {n.split(".")[0] for n in sys.modules}
            - set(sys.stdlib_module_names) - own - {"harness", "__main__", "__mp_main__"}
            - {n for n in sys.modules if n.startswith("_")}
        ),
        "import_s": round(import_s, 3),
    }
    return module, info


# --- running cases --------------------------------------------------------------------------


@dataclass
class CaseInputs:
    """One case's captured bytes, as read (and hashed) by the child."""

    logits: bytes
    p: bytes
    k: bytes | None = None
    padding: bytes | None = None  # the other columns of a strided logits buffer
    indices: bytes | None = None  # FlashInfer's index array


def read_case(base: Path, case: dict[str, Any]) -> CaseInputs:
    """The captured logits, p, (when the case has a ``k`` file) int32 top-k bytes, and what
    its call pattern adds (``harness.core.call_pattern``): a strided buffer's padding, an
    index array."""
    batch, vocab = int(case["batch"]), int(case["vocab"])
    call = case.get("call") or {}
    logits = (base / case["logits"]).read_bytes()
    p = (base / case["p"]).read_bytes()
    k = (base / case["k"]).read_bytes() if case.get("k") else None
    padding = (base / call["padding"]).read_bytes() if call.get("padding") else None
    indices = (base / call["indices_file"]).read_bytes() if call.get("indices_file") else None
    if len(logits) != 4 * batch * vocab or len(p) != 4 * batch:
        raise KernelChildError(
            f"case {case['id']}: {len(logits)} logits bytes and {len(p)} p bytes do not "
            f"match batch {batch} x vocab {vocab} float32"
        )
    if k is not None and len(k) != 4 * batch:
        raise KernelChildError(f"case {case['id']}: {len(k)} k bytes do not match batch "
                               f"{batch} x int32")
    if padding is not None and len(padding) != 4 * batch * (int(call["logits_row_stride"])
                                                              - vocab):
        raise KernelChildError(f"case {case['id']}: {len(padding)} padding bytes do not "
                               "match its logits buffer")
    width = 8 if call.get("indices_dtype") == "int64" else 4
    if indices is not None and len(indices) != width * len(call["indices"]):
        raise KernelChildError(f"case {case['id']}: {len(indices)} index bytes do not match "
                               "its index array")
    return CaseInputs(logits, p, k, padding, indices)


def describe(tensor: Any) -> dict[str, Any] | None:
    """What the kernel got: shape, stride, storage offset and dtype (None: no tensor)."""
    if tensor is None:
        return None
    return {"shape": [int(n) for n in tensor.shape], "stride": [int(n) for n in tensor.stride()],
            "storage_offset": int(tensor.storage_offset()),
            "dtype": str(tensor.dtype).removeprefix("torch.")}


@dataclass
class CallArguments:
    """The host tensors of one case's call, laid out as its call pattern declares: the
    logits as the first ``vocab`` columns of a ``[batch, stride]`` buffer, k in its declared
    integer type, the index array."""

    buffer: Any  # float32 [batch, stride] (stride = vocab for a contiguous call)
    vocab: int
    k: Any
    p: Any
    indices: Any
    param_stride: int = 1  # k and p as every n-th element of a zeroed buffer

    def params(self, device: str) -> tuple[Any, Any]:
        """k and p on ``device``, each a fresh tensor laid out as declared: contiguous, or
        the view ``buffer[::n]`` of a zeroed buffer made on that device (moving a view
        would make it contiguous)."""
        return self._laid_out(self.k, device), self._laid_out(self.p, device)

    def _laid_out(self, tensor: Any, device: str) -> Any:
        if tensor is None:
            return None
        moved = tensor.to(device).clone()
        if self.param_stride == 1:
            return moved
        import torch

        buffer = torch.zeros(moved.shape[0] * self.param_stride, dtype=moved.dtype,
                             device=device)
        view = buffer[:: self.param_stride]
        view.copy_(moved)
        return view

    def logits(self, buffer: Any) -> Any:
        """The logits view of ``buffer`` (this one or a device copy of it)."""
        return buffer[:, : self.vocab]

    def padding_intact(self, buffer: Any) -> bool | None:
        """Whether ``buffer``'s columns beyond the view still hold the captured padding, bit
        for bit (None for a contiguous call)."""
        if int(self.buffer.shape[1]) == self.vocab:
            return None
        import torch

        after = buffer[:, self.vocab:].detach().cpu().contiguous().view(torch.int32)
        before = self.buffer[:, self.vocab:].contiguous().view(torch.int32)
        return bool(torch.equal(after, before))


def call_arguments(torch: Any, case: dict[str, Any], inputs: CaseInputs) -> CallArguments:
    batch, vocab = int(case["batch"]), int(case["vocab"])
    call = case.get("call") or {}
    rows = torch.frombuffer(bytearray(inputs.logits), dtype=torch.float32).reshape(batch, vocab)
    if inputs.padding is not None:
        stride = int(call["logits_row_stride"])
        padding = torch.frombuffer(bytearray(inputs.padding), dtype=torch.float32)
        buffer = torch.empty(batch, stride, dtype=torch.float32)
        buffer[:, :vocab] = rows
        buffer[:, vocab:] = padding.reshape(batch, stride - vocab)
    else:
        buffer = rows
    host_p = torch.frombuffer(bytearray(inputs.p), dtype=torch.float32)
    host_k = (torch.frombuffer(bytearray(inputs.k), dtype=torch.int32)
              if inputs.k is not None else None)
    host_k, host_p = sampler_arguments(torch, rows, host_k, host_p)
    if host_k is not None and call.get("k_dtype") == "int64":
        host_k = host_k.to(torch.int64)
    indices = None
    if inputs.indices is not None:
        dtype = torch.int64 if call.get("indices_dtype") == "int64" else torch.int32
        indices = torch.frombuffer(bytearray(inputs.indices), dtype=dtype)
    return CallArguments(buffer, vocab, host_k, host_p, indices,
                         int(call.get("param_stride", 1)))


def sampler_arguments(torch: Any, logits: Any, k: Any, p: Any) -> tuple[Any, Any]:
    """``(k, p)`` as vLLM's V2 sampler hands them to the kernel
    (``vllm/v1/worker/gpu/sample/states.py``, 0.30.0-0.33.0): ``k`` is None when every
    row's k is the vocabulary (no top-k), ``p`` None when every p is 1.0 (no top-p)."""
    vocab = int(logits.shape[1])
    k_arg = k if k is not None and bool((k != vocab).any()) else None
    p_arg = p if bool((p != 1.0).any()) else None
    return k_arg, p_arg


@dataclass
class Kernel:
    """The imported kernel of one side: its family, module, declared path (the side's, and
    per case where the request names one) and the observer of each path."""

    family: Any
    module: Any
    dispatch: str
    observers: dict[str, Any]
    backend: str
    num_sm: int
    paths: dict[str, str] = field(default_factory=dict)  # case id -> path (not the side's)

    def path_of(self, case_id: str) -> str:
        return self.paths.get(case_id, self.dispatch)

    def observer(self, path: str) -> Any:
        """The observer proving ``path`` (made on first use; ``AttributeError`` when the
        kernel module lacks what the path needs)."""
        if path not in self.observers:
            self.observers[path] = self.family.observer(self.module, path, self.backend,
                                                        self.num_sm)
        return self.observers[path]

    def call(self, path: str, logits: Any, k: Any, p: Any, indices: Any = None) -> Any:
        """The family's entry on ``(logits, k, p)`` along ``path`` (``k``/``p`` None: no
        top-k / no top-p, as :func:`sampler_arguments` makes them; ``indices``: a declared
        index array, passed only to a family that takes one)."""
        if indices is None:
            return self.family.call(self.module, path, self.backend, logits, k, p, self.num_sm)
        return self.family.call(self.module, path, self.backend, logits, k, p, self.num_sm,
                                indices=indices)


def _device_info(torch: Any, backend: str, family: Any) -> dict[str, Any]:
    if backend == "interpreter":
        cpu = platform.processor() or platform.machine()
        return {"name": f"cpu ({cpu}), Triton interpreter",
                "driver": None, "sm_count": None, "capability": None, "cuda_runtime": None}
    props = torch.cuda.get_device_properties(0)
    return {
        "name": props.name,
        "driver": family.driver_version(),
        "sm_count": int(props.multi_processor_count),
        "capability": f"{props.major}.{props.minor}",
        "cuda_runtime": torch.version.cuda,
    }


def run_case(torch: Any, kernel: Kernel, case: dict[str, Any], inputs: CaseInputs,
             repeats: int) -> tuple[bytes, dict[str, Any]]:
    batch, vocab = int(case["batch"]), int(case["vocab"])
    path = kernel.path_of(str(case["id"]))
    kernel.family.check_case(kernel.module, path, case)
    if (case.get("call") or {}).get("indices") is not None \
            and path not in kernel.family.index_paths:
        raise KernelChildError(f"case {case['id']}: the {path} path of {kernel.family.id} "
                               "takes no index array")
    prepared = kernel.family.prepare(kernel.module, path, kernel.backend)
    observer = kernel.observer(path)
    args = call_arguments(torch, case, inputs)
    if kernel.backend == "cuda":
        out, proof, timings, call, intact = run_cuda(torch, kernel, path, observer, args,
                                                     batch, repeats)
    else:
        out, proof, timings, call, intact = run_interpreter(kernel, path, observer, args,
                                                            batch)
    out_bytes = out.numpy().astype("<f4", copy=False).tobytes()
    # a sampling kernel's proof carries its per-row draws: they belong to the case record
    draws = proof.pop("draws", None) if isinstance(proof, dict) else None
    kept = (out != float("-inf")).sum(dim=1).tolist()  # tokens not masked, per row
    record = {
        "id": case["id"],
        "batch": batch,
        "vocab": vocab,
        "logits_sha256": sha256_hex(inputs.logits),
        "p_sha256": sha256_hex(inputs.p),
        **({"k_sha256": sha256_hex(inputs.k)} if inputs.k is not None else {}),
        **({"padding_sha256": sha256_hex(inputs.padding)} if inputs.padding is not None
           else {}),
        **({"indices_sha256": sha256_hex(inputs.indices)} if inputs.indices is not None
           else {}),
        "sampler_arguments": {"k": None if args.k is None else
                              f"{str(args.k.dtype).removeprefix('torch.')}[batch]",
                              "p": None if args.p is None else "float32[batch]"},
        "call": call,
        **({"padding_intact": intact} if intact is not None else {}),
        "output": f"{case['id']}.out.f32",
        "output_sha256": sha256_hex(out_bytes),
        "kept_counts": [int(k) for k in kept],
        **({"draws": draws} if draws is not None else {}),
        **({"dispatch": path} if path != kernel.dispatch else {}),
        **({"prepared": prepared} if prepared and path != kernel.dispatch else {}),
        path: proof,
        "timings": timings,
        "status": "ok" if proof["proven"] else f"{path}_path_not_proven",
    }
    return out_bytes, record


def _to(tensor: Any, device: str) -> Any:
    return None if tensor is None else tensor.to(device)


def _recorded_call(logits: Any, k: Any, p: Any, indices: Any) -> dict[str, Any]:
    return {"logits": describe(logits), "k": describe(k), "p": describe(p),
            **({"indices": describe(indices)} if indices is not None else {})}


def run_cuda(torch: Any, kernel: Kernel, path: str, observer: Any, args: CallArguments,
             batch: int, repeats: int
             ) -> tuple[Any, dict[str, Any], dict[str, Any], dict[str, Any], bool | None]:
    """The family's entry on the GPU, observed once; then ``repeats`` timed calls. Returns
    the first call's output (on the host), the path proof, the timings, the call as made
    and whether the logits buffer's padding was left alone."""
    buffer = args.buffer.to("cuda")  # the whole buffer: a view's padding travels with it
    # The split path masks its input in place and returns it: repeats start from a
    # pristine copy of the captured bytes, never from an already-masked tensor.
    pristine = buffer.clone()
    logits = args.logits(buffer)
    (k, p), indices = args.params("cuda"), _to(args.indices, "cuda")
    call = _recorded_call(logits, k, p, indices)
    torch.cuda.synchronize()
    started = time.perf_counter()
    with observer:
        out = kernel.call(path, logits, k, p, indices)
        torch.cuda.synchronize()
    timings: dict[str, Any] = {"first_call_ms": round((time.perf_counter() - started) * 1e3, 3)}
    proof = observer.proof(batch)
    first = out.detach().cpu().contiguous()
    intact = args.padding_intact(buffer)
    timings.update(_timed_repeats(torch, kernel, path, args, pristine, k, p, indices, first,
                                  repeats))
    return first, proof, timings, call, intact


def _timed_repeats(torch: Any, kernel: Kernel, path: str, args: CallArguments, pristine: Any,
                   k: Any, p: Any, indices: Any, first: Any, repeats: int) -> dict[str, Any]:
    """CUDA-event timings of ``repeats`` more calls, each from the pristine input, and
    whether every output is bit-identical to the first (empty when ``repeats`` is 0)."""
    per_call, identical = [], True
    work = torch.empty_like(pristine)
    for _ in range(repeats):
        work.copy_(pristine)
        begin = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        begin.record()
        again = kernel.call(path, args.logits(work), k, p, indices)
        end.record()
        torch.cuda.synchronize()
        per_call.append(begin.elapsed_time(end))
        identical = identical and bool(torch.equal(again.cpu().contiguous().view(torch.int32),
                                                   first.view(torch.int32)))
    if not per_call:
        return {}
    return {"repeats": repeats, "median_ms": round(statistics.median(per_call), 4),
            "min_ms": round(min(per_call), 4), "max_ms": round(max(per_call), 4),
            "repeat_outputs_bit_identical": identical}


def run_interpreter(kernel: Kernel, path: str, observer: Any, args: CallArguments, batch: int
                    ) -> tuple[Any, dict[str, Any], dict[str, Any], dict[str, Any], bool | None]:
    """One observed call in Triton's interpreter on CPU tensors (the family decides which
    entry: for vllm-triton's split and mixed paths, the internal functions the public entry
    calls on CUDA, in its order, with the requested SM count)."""
    buffer = args.buffer.clone()
    logits = args.logits(buffer)
    k, p = args.params("cpu")
    indices = None if args.indices is None else args.indices.clone()
    call = _recorded_call(logits, k, p, indices)
    started = time.perf_counter()
    with observer:
        out = kernel.call(path, logits, k, p, indices)
    timings = {"wall_s": round(time.perf_counter() - started, 3)}
    return (out.detach().contiguous(), observer.proof(batch), timings, call,
            args.padding_intact(buffer))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m harness.kernels.child REQUEST.json", file=sys.stderr)
        return 2
    request = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    out_dir = Path(request["out_dir"])
    fault = os.environ.get(FAULT_ENV) or None
    evidence = started_evidence(request, fault)
    evidence_path = out_dir / "evidence.json"
    _write_json(evidence_path, evidence)
    try:
        check_host(request["backend"])
        torch, kernel = load_kernel(request, evidence)
        _write_json(evidence_path, evidence)
        if fault == "abort":
            os.abort()
        if fault == "hang":
            time.sleep(10**6)
        cases_path = Path(request["cases"])
        index = json.loads(cases_path.read_text(encoding="utf-8"))
        if index.get("sampling") is not None:  # the manifest's declared draws, not the child's
            evidence.update(kernel.family.declare_sampling(index["sampling"]))
        evidence["cases"] = run_cases(torch, kernel, request, index, cases_path.parent,
                                      out_dir)
        failed = [r["id"] for r in evidence["cases"] if r["status"] != "ok"]
        evidence["status"] = "ok" if not failed else "failed"
        _write_json(evidence_path, evidence)
        if failed:
            path = kernel.path_of(failed[0])
            print(f"{path} path not proven for case {failed[0]}", file=sys.stderr)
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


def load_kernel(request: dict[str, Any], evidence: dict[str, Any]) -> tuple[Any, Kernel]:
    """Import the family and its pinned kernel module from the private copy, then torch
    and triton; record in ``evidence`` what was imported, from where, and on which
    device. Returns torch and the kernel."""
    backend = request["backend"]
    family = load_family(request["family"])
    tree = Path(request["tree"]).resolve()
    prefix = Path(request["pycache_prefix"]).resolve()
    if getattr(family, "env_prefixes_removed", ()):
        evidence["env_removed"] = [str(n) for n in request.get("env_removed") or []]
    build = request.get("build_dir")
    module, info = import_kernel(family, tree, prefix, request["side"]["kernel_path"],
                                 request["placeholders"],
                                 Path(build).resolve() if build else None)
    import numpy  # noqa: F401  (output bytes)
    import torch
    import triton

    if backend == "cuda" and not torch.cuda.is_available():
        raise KernelChildError("cuda backend: torch sees no CUDA device")
    dispatch = str(request.get("dispatch") or family.default_dispatch)
    if dispatch not in family.dispatch_paths:
        raise KernelChildError(f"unknown dispatch path {dispatch!r} for family {family.id}")
    evidence["dispatch"] = dispatch
    evidence.update(family.prepare(module, dispatch, backend))
    evidence.update(info)
    evidence.update(torch=torch.__version__, triton=triton.__version__,
                    device=_device_info(torch, backend, family),
                    num_sm_requested=request["num_sm"] if backend == "interpreter" else None)
    num_sm = int(request["num_sm"])
    paths = {str(c): str(v) for c, v in (request.get("paths") or {}).items()}
    unknown = sorted(set(paths.values()) - set(family.dispatch_paths))
    if unknown:
        raise KernelChildError(f"unknown dispatch path {unknown[0]!r} for family {family.id}")
    if paths:
        evidence["case_paths"] = paths
    kernel = Kernel(family, module, dispatch, {}, backend, num_sm, paths)
    for path in sorted({dispatch, *paths.values()}):
        try:
            kernel.observer(path)
        except AttributeError as err:
            evidence["declared_path_missing"] = True
            raise KernelChildError(f"the kernel module has no {path} path ({err})") from None
    return torch, kernel


def run_cases(torch: Any, kernel: Kernel, request: dict[str, Any], index: dict[str, Any],
              base: Path, out_dir: Path) -> list[dict[str, Any]]:
    """Every case of the index (inputs under ``base``), in order: its output file
    written, its record returned."""
    records = []
    for case in index["cases"]:
        out_bytes, record = run_case(torch, kernel, case, read_case(base, case),
                                     int(request["repeats"]))
        (out_dir / record["output"]).write_bytes(out_bytes)
        records.append(record)
    return records


if __name__ == "__main__":
    raise SystemExit(main())
