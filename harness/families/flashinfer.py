"""FlashInfer's sampling kernels (``flashinfer/sampling.py``): family ``flashinfer``.

vLLM 0.33.0 samples with FlashInfer 0.7.2.post1 by default on CUDA
(``top_p_sampling_from_probs`` for top-p only, ``top_k_top_p_sampling_from_logits`` for
top-k and top-p); SGLang uses it too. ``sources pin flashinfer-python==0.7.2.post1`` pins it.
FlashInfer 0.6.0 and 0.6.1 run too (``evidence/pins/flashinfer-0.6.0.json``, ``-0.6.1.json``),
to replay FlashInfer PR #2325 (0.6.1's ``include/flashinfer/topk.cuh`` clears the multi-CTA
radix histogram for the next row; 0.6.0's does not); where the releases differ, it is said
below.

What to pin (:meth:`FlashInfer.closure`): the import closure of ``flashinfer.sampling``
with *bare packages* (no package ``__init__.py``: FlashInfer's own imports nearly all of the
78 MB package; the child gives each package folder a bare module instead and records it),
17 Python files for 0.7.2.post1 (12 for 0.6.x), plus what its JIT compiles with nvcc:
``csrc/sampling.cu``, ``renorm.cu``, ``flashinfer_sampling_binding.cu``, ``sampling_utils.h``,
``tvm_ffi_utils.h`` and all of ``data/include/``, every file hashed. What is pinned of CUB and
libcu++ (CCCL) depends on the release:

* 0.7.2.post1 bundles CCCL in the wheel (``data/cccl/``: ``cub``, ``libcudacxx/include``,
  ``thrust``) and puts those folders first (``-I``, ahead of the toolkit's): they are pinned,
  every header by its sha256 (2668 files, about 26 MB raw);
* 0.6.0 and 0.6.1 bundle no CCCL: their ``jit/cpp_ext.py`` (``get_system_includes``) reads
  CUB and libcu++ from the machine's CUDA toolkit, ``-isystem $cuda_home/include/cccl``.
  Those headers are not pinned: the build file's hash (``build_ninja_sha256``, below) binds
  the include path (``cuda_home = ...`` and that flag), not the headers' contents
  (188 and 194 files, about 3 MB raw).

In both, the rest of the toolkit (``$cuda_home/include``: ``cuda_runtime.h``,
``curand_kernel.h``, ``cuda_fp16.h``, ...; nvcc itself), Python's include folder and the
separate ``apache-tvm-ffi`` wheel's headers (``tvm/ffi``, ``dlpack``; not pinned here, the
device script installs the wheel) are bound the same way: by path in the build file, not by
content.

Dispatch paths (one FlashInfer function each, called on CUDA tensors), and what a row of
the child's output holds: the captured logit, bit for bit, at every token the function
keeps or draws, -inf elsewhere; so the verifier judges every path from bytes, by the
manifest's rule set (``serve/v1`` for the deterministic ones, ``support/v1`` for the
samplers):

* ``top-p-renorm`` (``top_p_renorm_probs(probs, p)``), ``top-k-renorm``
  (``top_k_renorm_probs(probs, k)``): kept = output probability nonzero;
* ``top-k-mask`` (``top_k_mask_logits(logits, k)``): kept = output finite;
* ``top-p-sampling`` (``top_p_sampling_from_probs(probs, p, indices, deterministic=True,
  seed, offset)``), ``top-k-sampling`` (``top_k_sampling_from_probs(probs, k, indices,
  deterministic=True, seed, offset)``) and ``top-k-top-p-sampling``
  (``top_k_top_p_sampling_from_logits(logits, k, p, indices, deterministic=True, seed,
  offset)``): :data:`DRAWS` draws per row in one call (``indices`` repeats the batch; k and
  p stay one per input row, which FlashInfer reads at ``indices[i]``), with Philox seed
  :data:`SEED` and offset 0; kept = the tokens drawn; the per-row counts are recorded in the
  case's evidence (``draws``). A manifest that declares its draws (``sampling``, from
  ``pr-flashinfer-v3`` on) sets the draws per row, the seed and the offset instead
  (:meth:`FlashInfer.declare_sampling`, read from the cases index before any case runs);
  each sampling case's proof records the three it drew with (``draws_per_row``, ``seed``,
  ``offset``), and ``verify`` requires the declared ones.

Which sampler a batch gets (``manifest new``'s per-case guess, :meth:`FlashInfer.
guess_case_path`) is what vLLM 0.33.0's ``flashinfer_sample``
(``vllm/v1/sample/ops/topk_topp_sampler.py``) calls: ``top_p_sampling_from_probs`` when no
row of the batch has top-k, ``top_k_sampling_from_probs`` when no row has top-p, else
``top_k_top_p_sampling_from_logits`` for the whole batch (rows without top-k carry k = V,
rows without top-p carry p = 1).

The JIT keys its build on the sources' absolute paths and times, so the family asks for a
stable private copy (``stable_copy``): the module is built once per machine and pinned tree,
and every later child (the other side of a run, the next run) finds ninja's build up to
date and loads it.

Only what was built from the pinned sources runs (issue 27). FlashInfer's ``jit/env.py``
(0.6.x and 0.7.x alike) imports any ``flashinfer_jit_cache`` (AOT shared objects that replace
the JIT build) or ``flashinfer_cubin`` package it finds, and reads ``FLASHINFER_*``
variables (the workspace, the cubin folder, ``FLASHINFER_DISABLE_VERSION_CHECK``, ...).
0.7.x lists the jit cache's providers (``FLASHINFER_AOT_PROVIDERS``); 0.6.x has no such list
and takes the jit cache's ``get_jit_cache_dir()`` as ``FLASHINFER_AOT_DIR`` instead. Both
load ``FLASHINFER_AOT_DIR/<name>/<name>.so`` (0.7.x also a provider's), when it exists,
instead of building. So:

* the runner removes every ``FLASHINFER_*`` variable from the child's environment; the
  evidence names those removed (``env_removed``, names only);
* the child refuses to start when ``importlib.util.find_spec`` finds
  ``flashinfer_jit_cache`` or ``flashinfer_cubin`` on its path (``blocked_modules``;
  :func:`harness.kernels.child.check_isolation`);
* before the import, the child sets ``FLASHINFER_WORKSPACE_BASE`` to the stable copy's build
  folder (``<copy>.build``, 0700, this user's): ninja's build file and the shared object
  live there; after it (:func:`check_aot_env`), ``FLASHINFER_AOT_DIR`` must be the copy's
  own ``flashinfer/data/aot`` and nothing may exist there, 0.7.x's provider list must be
  empty (0.6.x has none), neither package may have been imported, and the sampling module
  must not be AOT (:func:`_check_spec`, at the first proof);
* every shared object FlashInfer asks ``tvm_ffi.load_module`` to load must be a regular
  file under that build folder, reached through no link (anything else is refused, the
  child stops with one line); the file is opened, hashed from that descriptor, and must be
  the very file (device, inode) the loader then opens.

Each case's proof records ``jit_library``: the loaded library's ``sha256`` and ``bytes``,
whether this child built it (``built_by_this_child``), ``build_ninja_sha256``,
``sources_tree_sha256`` and ``sources_sha256``, where

* ``build_ninja_sha256`` is the sha256 of the ``build.ninja`` the JIT wrote and ran
  (``cached_ops/sampling/build.ninja``: every nvcc and link command, flag, include folder
  and source), with the build folder's absolute path replaced by ``${BUILD}`` and the copy's
  by ``${TREE}``; its text is recorded once per child (``build_ninja``, in the first case).
  0.6.0 writes its outputs relative to ``cached_ops`` (``$name/$name.so``), 0.6.1 and
  0.7.2.post1 as absolute paths in the build folder (``${BUILD}/...``);
* ``sources_tree_sha256`` is the pinned tree digest of the copy (``sha256  path`` lines of
  every pinned file, sorted: the pin's ``tree_sha256``); every input the build reads from
  the tree (the three ``.cu`` files, the two headers, ``include/``, for 0.7.2.post1 the
  CCCL headers; all pinned files, and the copy holds nothing else) is in it by its pinned
  sha256; what the build reads from outside the tree (for 0.6.x CCCL too) is not;
* ``sources_sha256`` is the sha256 of the UTF-8 JSON
  ``{"algorithm":"topp-gate/flashinfer-jit-sources/v1","build_ninja_sha256":N,
  "tree_sha256":T}`` (keys sorted, no spaces): :func:`sources_sha256`.

``verify`` (``harness.core.verify_bindings.check_library_binding``) requires every case of a
side to name one library sha256, and ``sources_sha256`` to be the one computed from that
side's pinned ``tree_sha256`` (the manifest's) and the recorded build file hash. Evidence
written before these fields existed verifies as ``unbound (legacy evidence)``.

``probs`` is ``logits.softmax(dim=-1, dtype=torch.float32)`` computed in the child on the
device, exactly as vLLM's ``flashinfer_sample`` computes it right before the call; its sha256
is recorded per case (``probs_sha256``). The verifier binds it only as part of the signed
evidence and does not recompute it (a torch op; the oracle runs on the captured logits).

Each path is proven by observing code objects only: the FlashInfer entry ran exactly once.
CUDA only (FlashInfer has no CPU path): the interpreter backend refuses every path.
"""

from __future__ import annotations

import inspect
import os
import re
import stat
import sys
import time
import types
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from ..core.errors import KernelChildError
from . import Family, register

TOP_P_RENORM = "top-p-renorm"
TOP_K_RENORM = "top-k-renorm"
TOP_K_MASK = "top-k-mask"
TOP_P_SAMPLING = "top-p-sampling"
TOP_K_SAMPLING = "top-k-sampling"
TOP_K_TOP_P_SAMPLING = "top-k-top-p-sampling"
ENTRIES = {
    TOP_P_RENORM: "top_p_renorm_probs",
    TOP_K_RENORM: "top_k_renorm_probs",
    TOP_K_MASK: "top_k_mask_logits",
    TOP_P_SAMPLING: "top_p_sampling_from_probs",
    TOP_K_TOP_P_SAMPLING: "top_k_top_p_sampling_from_logits",
    TOP_K_SAMPLING: "top_k_sampling_from_probs",
}
SAMPLING = (TOP_P_SAMPLING, TOP_K_SAMPLING, TOP_K_TOP_P_SAMPLING)
DRAWS = 64  # draws per row of a sampling path, for a manifest that declares none
SEED = 20261201  # the Philox seed of every sampling call (offset 0), likewise

CSRC = ("csrc/sampling.cu", "csrc/renorm.cu", "csrc/flashinfer_sampling_binding.cu",
        "csrc/sampling_utils.h", "csrc/tvm_ffi_utils.h")
HEADER_DIRS = ("include/", "cccl/cub/", "cccl/libcudacxx/include/", "cccl/thrust/")
DATA = "flashinfer/data/"


def jit_files(names: Collection[str]) -> set[str]:
    """The CUDA sources and headers the sampling module's JIT build reads."""
    found = {DATA + c for c in CSRC} & set(names)
    found |= {n for n in names if any(n.startswith(DATA + d) for d in HEADER_DIRS)}
    return found


def sampler_for(vocab: int, ks: list[int], ps: list[float]) -> str:
    """vLLM 0.33.0's ``flashinfer_sample``: top-p sampling when no row has top-k (k is
    None), top-k sampling when no row has top-p (p is None), else top-k-then-top-p."""
    if all(k >= vocab for k in ks):
        return TOP_P_SAMPLING
    if all(p >= 1.0 for p in ps):
        return TOP_K_SAMPLING
    return TOP_K_TOP_P_SAMPLING


class EntryObserver:
    """Counts starts of one FlashInfer entry's code object (``sys.setprofile``)."""

    def __init__(self, entry: Callable[..., Any], name: str) -> None:
        self.code = inspect.unwrap(entry).__code__
        self.name = name
        self.calls = 0

    def _profile(self, frame: types.FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code is self.code:
            self.calls += 1

    def __enter__(self) -> EntryObserver:
        self.calls = 0
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(None)

    def proof(self, batch: int) -> dict[str, Any]:
        problems = [] if self.calls == 1 else [f"{self.name} ran {self.calls} times"]
        return {"entry_point": self.name, "observed_by": "sys.setprofile on code objects",
                "entry_calls": self.calls, "proven": not problems, "problems": problems}


class FlashInfer(Family):
    """FlashInfer's top-k/top-p renorm, mask and sampling kernels (JIT-built with nvcc)."""

    id = "flashinfer"
    package = "flashinfer"
    distribution = "flashinfer-python"
    kernel_path = "flashinfer/sampling.py"
    kernel_module = "flashinfer.sampling"
    closure_roots = ("flashinfer.sampling",)
    dispatch_paths = tuple(ENTRIES)
    default_dispatch = TOP_P_SAMPLING
    stable_copy = True
    sampling_paths = SAMPLING
    index_paths = SAMPLING  # the paths whose entry takes an index array (``indices``)
    # what must not reach the child (runner and child: ..kernels.runner, ..kernels.child)
    env_prefixes_removed = ("FLASHINFER_",)
    blocked_modules = ("flashinfer_jit_cache", "flashinfer_cubin")
    # set in the kernel child by the call just made (read by its observer's proof)
    _draws: list[list[list[int]]] | None = None
    _probs_sha256: str | None = None
    # (draws per row, Philox seed, offset) of every sampling call: the manifest's when the
    # cases index declares them (declare_sampling), else the constants
    drawing: tuple[int, int, int] = (DRAWS, SEED, 0)

    def closure(self, names: Collection[str], read: Callable[[str], bytes]) -> Any:
        from ..pins.closure import Closure, closure

        found = closure(names, read, roots=self.closure_roots, package=self.package,
                        bare=True)
        return Closure(found.files | frozenset(jit_files(names)), found.placeholders,
                       found.third_party)

    def guess_case_path(self, kernel: bytes, batch: int, vocab: int, ks: list[int],
                        ps: list[float]) -> str | None:
        """The sampler vLLM 0.33.0's ``flashinfer_sample`` calls for this batch."""
        return sampler_for(vocab, ks, ps)

    def extra_files(self, names: Collection[str]) -> list[str]:
        return sorted(n for n in names if re.fullmatch(
            r"flashinfer_python-[^/]+\.dist-info/METADATA", n))

    def before_import(self, tree: Path, build: Path | None) -> dict[str, Any]:
        """The JIT workspace is the stable copy's build folder (the child's environment has
        no ``FLASHINFER_*`` left: the runner removed them and the child checked)."""
        if build is None:
            raise KernelChildError("FlashInfer needs a stable copy's build folder; the "
                                   "request names none")
        try:
            info = os.lstat(build)
        except OSError as err:
            raise KernelChildError(f"build folder {build}: {err.strerror}") from None
        if (not os.path.isdir(build) or os.path.islink(build) or info.st_uid != os.getuid()
                or info.st_mode & 0o077):
            raise KernelChildError(f"build folder {build} is not a 0700 folder of this user")
        os.environ["FLASHINFER_WORKSPACE_BASE"] = str(build)
        _STATE.update(build=build, tree=tree)
        return {"jit_workspace": "the stable copy's build folder (FLASHINFER_WORKSPACE_BASE)"}

    def import_kernel(self, tree: Path) -> Any:
        """Bare package modules for every folder of the copy's ``flashinfer`` that holds a
        module (no ``__init__.py`` runs), then ``import flashinfer.sampling``; then the
        checks that no AOT library can replace the build from the pinned sources, and the
        load guard (module docstring)."""
        module = self._import_bare(tree)
        _check_no_aot(tree)
        return module

    def _import_bare(self, tree: Path) -> Any:
        import importlib

        self._bare = bare_packages(tree, self.package)
        self._tree = tree
        return importlib.import_module(self.kernel_module)

    def package_info(self, module: Any, loaded: list[str]) -> dict[str, Any]:
        version = None
        for metadata in sorted(self._tree.glob("flashinfer_python-*.dist-info/METADATA")):
            match = re.search(r"^Version:\s*(\S+)", metadata.read_text("utf-8", "replace"),
                              re.MULTILINE)
            version = match.group(1) if match else None
        tvm_ffi = sys.modules.get("tvm_ffi")
        return {"flashinfer_version": version, "bare_packages": self._bare,
                "flashinfer_modules_loaded": len(loaded) - len(self._bare),
                "tvm_ffi_version": getattr(tvm_ffi, "__version__", None),
                "draws_per_row": self.drawing[0], "seed": self.drawing[1]}

    def declare_sampling(self, sampling: Mapping[str, Any]) -> dict[str, Any]:
        """Draw with the manifest's declared draws per row, seed and offset (the cases
        index's ``sampling``); returns them as evidence fields."""
        values = [sampling.get(name) for name in ("draws_per_row", "seed", "offset")]
        ints = [v for v in values if type(v) is int and 0 <= v < 1 << 64]
        if len(ints) != 3 or ints[0] < 1:
            raise KernelChildError(f"cases index: declared sampling {dict(sampling)!r} is not "
                                   "draws_per_row >= 1 and a uint64 seed and offset")
        self.drawing = (ints[0], ints[1], ints[2])
        return {"draws_per_row": ints[0], "seed": ints[1], "offset": ints[2]}

    def prepare(self, module: Any, dispatch: str, backend: str) -> dict[str, Any]:
        if backend != "cuda":
            raise KernelChildError("FlashInfer runs on CUDA only; the interpreter backend "
                                   "has no FlashInfer path")
        return {"flashinfer_entry": ENTRIES[dispatch]}

    def observer(self, module: Any, dispatch: str, backend: str, num_sm: int) -> Any:
        return _Recording(EntryObserver(getattr(module, ENTRIES[dispatch]), ENTRIES[dispatch]),
                          self)

    def call(self, module: Any, dispatch: str, backend: str, logits: Any, k: Any, p: Any,
             num_sm: int, indices: Any = None) -> Any:
        import torch

        batch, vocab = logits.shape
        if k is None:
            k = torch.full((batch,), vocab, dtype=torch.int32, device=logits.device)
        k = k.to(logits.device)  # int32 unless the case's call pattern declares int64
        fn = getattr(module, ENTRIES[dispatch])
        probs = None
        if dispatch in (TOP_P_RENORM, TOP_K_RENORM, TOP_P_SAMPLING, TOP_K_SAMPLING):
            probs = logits.softmax(dim=-1, dtype=torch.float32)
            self._probs_sha256 = _tensor_sha256(probs)
        if dispatch == TOP_P_RENORM:
            kept = fn(probs, p) > 0
        elif dispatch == TOP_K_RENORM:
            kept = fn(probs, k) > 0
        elif dispatch == TOP_K_MASK:
            kept = torch.isfinite(fn(logits, k))
        else:
            # output j draws from row order[j], with that row's top-k and top-p: FlashInfer
            # reads a parameter tensor per input row (its length must be the batch's;
            # sampling.cuh indexes it by indices[j]). Without a declared index array the
            # order is the batch; with one (repeated, out of order, more or fewer outputs
            # than rows) it is that array, in its declared integer type.
            order = (torch.arange(batch, device=logits.device, dtype=torch.int32)
                     if indices is None else indices.to(logits.device))
            width = int(order.shape[0])
            draws, seed, offset = self.drawing
            repeated = order.repeat(draws)
            if dispatch == TOP_P_SAMPLING:
                drawn = fn(probs, p, indices=repeated, deterministic=True, seed=seed,
                           offset=offset)
            elif dispatch == TOP_K_SAMPLING:
                drawn = fn(probs, k, indices=repeated, deterministic=True, seed=seed,
                           offset=offset)
            else:
                drawn = fn(logits, k, p, indices=repeated, deterministic=True, seed=seed,
                           offset=offset)
            drawn = drawn.view(draws, width).to(torch.int64)
            self._draws = _count_draws(drawn.cpu(), order.cpu().to(torch.int64), batch)
            kept = torch.zeros_like(logits, dtype=torch.bool)
            rows = order.to(torch.int64).repeat(draws)
            kept[rows, drawn.reshape(-1)] = True
        return torch.where(kept, logits, torch.full_like(logits, float("-inf")))


def _tensor_sha256(tensor: Any) -> str:
    from ..core.digest import sha256_hex

    return sha256_hex(tensor.detach().cpu().contiguous().numpy().astype("<f4").tobytes())


def _count_draws(drawn: Any, order: Any, batch: int) -> list[list[list[int]]]:
    """Per input row, ``[[token, count], ...]`` in token order, over every output that drew
    from it (``drawn``: [draws, outputs], ``order``: each output's input row)."""
    rows = []
    for row in range(batch):
        tokens, counts = drawn[:, order == row].unique(return_counts=True)
        rows.append([[int(t), int(c)] for t, c in zip(tokens.tolist(), counts.tolist(),
                                                       strict=True)])
    return rows


class _Recording:
    """The entry observer, plus the draws and the probs digest of the call it watched."""

    def __init__(self, inner: EntryObserver, family: FlashInfer) -> None:
        self.inner, self.family = inner, family

    def __enter__(self) -> _Recording:
        self.family._draws = None
        self.family._probs_sha256 = None
        self.inner.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.inner.__exit__(*exc)

    def proof(self, batch: int) -> dict[str, Any]:
        proof = self.inner.proof(batch)
        draws = getattr(self.family, "_draws", None)
        if draws is not None:  # the child moves "draws" into the case record
            count, seed, offset = self.family.drawing
            proof.update(draws=draws, draws_per_row=count, seed=seed, offset=offset)
        probs = getattr(self.family, "_probs_sha256", None)
        if probs is not None:
            proof["probs_sha256"] = probs
        proof["jit_library"] = jit_library()
        return proof


_CHILD_STARTED = time.time()
SOURCES_ALGORITHM = "topp-gate/flashinfer-jit-sources/v1"
# the child's build folder and tree (before_import), the libraries loaded (path -> record),
# the loads refused, and whether the build file's text was recorded already
_STATE: dict[str, Any] = {}
_LOADED: dict[str, dict[str, Any]] = {}
_REFUSED: list[str] = []


def bare_packages(tree: Path, package: str) -> list[str]:
    """A bare module (no ``__init__`` run) in ``sys.modules`` for every folder of
    ``tree/package`` that holds a module, and its parents; their names."""
    root = tree / package
    folders = {root}
    for source in root.rglob("*.py"):  # every folder holding a module, and its parents
        folders.update(p for p in source.parents if p.is_relative_to(root))
    bare = []
    for folder in sorted(folders):
        name = ".".join(folder.relative_to(tree).parts)
        module = types.ModuleType(name, "topp-gate: bare package (no __init__ run)")
        module.__path__ = [str(folder)]
        module.__topp_gate_placeholder__ = True  # type: ignore[attr-defined]
        sys.modules[name] = module
        bare.append(name)
    return bare


def sources_sha256(tree_sha256: str, build_ninja_sha256: str) -> str:
    """The hash of the JIT's inputs (module docstring); ``harness.core.verify_bindings``
    computes the same (a test holds the two equal)."""
    import json

    from ..core.digest import sha256_hex

    text = json.dumps({"algorithm": SOURCES_ALGORITHM, "build_ninja_sha256": build_ninja_sha256,
                       "tree_sha256": tree_sha256}, sort_keys=True, separators=(",", ":"))
    return sha256_hex(text.encode("utf-8"))


def normalized_ninja(text: str, build: Path, tree: Path) -> str:
    """The build file with the machine's absolute folders replaced by fixed tokens."""
    return text.replace(str(build), "${BUILD}").replace(str(tree), "${TREE}")


def _check_no_aot(tree: Path) -> None:
    """After the pinned import: no AOT provider or cubin package was imported, and every
    library load is guarded. (The sampling module's spec is checked at the first proof,
    :func:`_check_spec`: making it needs a CUDA device, which the interpreter backend's
    child has not; that child stops at ``prepare``, in one line.)"""
    build = _STATE.get("build")
    if build is None:
        raise KernelChildError("FlashInfer imported without its build folder")
    check_aot_env(sys.modules.get("flashinfer.jit.env"), tree)
    loaded = [n for n in ("flashinfer_jit_cache", "flashinfer_cubin") if n in sys.modules]
    if loaded:
        raise KernelChildError(f"{loaded[0]} was imported; refused")
    _guard_loads(sys.modules["flashinfer.jit.core"].tvm_ffi, build)


def check_aot_env(env: Any, tree: Path) -> str:
    """What the imported ``flashinfer.jit.env`` (``env``) says of AOT libraries must leave
    the JIT build from the copy ``tree`` as the only source of the sampling module; returns
    which form was checked, raises :class:`KernelChildError` otherwise (fail closed).

    Both forms compute ``FLASHINFER_AOT_DIR``, the folder a prebuilt ``<name>/<name>.so``
    is taken from before any JIT build (0.6.x ``JitSpec.is_aot``, 0.7.x
    ``get_aot_artifacts``' fallback). It must be the copy's own ``flashinfer/data/aot``
    (``Path(env.py).resolve().parents[1] / "data" / "aot"``: what both compute when no
    ``flashinfer_jit_cache`` is importable; 0.6.x's ``_get_aot_dir`` returns that package's
    ``get_jit_cache_dir()`` instead), and nothing may exist at that path (no pin holds it).

    * 0.7.x (``FLASHINFER_AOT_PROVIDERS`` defined): the providers must be ``()`` and
      ``FLASHINFER_AOT_DIRS`` (where it is defined) only the copy's own folder;
    * 0.6.x (no ``FLASHINFER_AOT_PROVIDERS``): the folder check above is all there is."""
    if env is None:
        raise KernelChildError("FlashInfer's jit.env was not imported; refused")
    own = Path(os.path.realpath(tree)) / "flashinfer" / "data" / "aot"
    aot_dir = getattr(env, "FLASHINFER_AOT_DIR", None)
    if not isinstance(aot_dir, Path) or aot_dir != own:
        raise KernelChildError(f"FlashInfer's AOT folder {str(aot_dir)[:200]} is not the "
                               "pinned copy's own flashinfer/data/aot; refused")
    if os.path.lexists(own):
        raise KernelChildError("the pinned copy holds flashinfer/data/aot (AOT libraries "
                               "that replace the JIT build); refused")
    if hasattr(env, "FLASHINFER_AOT_PROVIDERS"):
        if env.FLASHINFER_AOT_PROVIDERS != ():
            raise KernelChildError("FlashInfer found an AOT provider (flashinfer_jit_cache); "
                                   "refused")
        dirs = getattr(env, "FLASHINFER_AOT_DIRS", (own,))
        if not isinstance(dirs, tuple) or dirs != (own,):
            raise KernelChildError("FlashInfer's AOT folders are not the pinned copy's own "
                                   "flashinfer/data/aot alone; refused")
        return "FLASHINFER_AOT_PROVIDERS == (), FLASHINFER_AOT_DIR absent in the copy"
    return "no FLASHINFER_AOT_PROVIDERS (0.6.x), FLASHINFER_AOT_DIR absent in the copy"


def _check_spec(spec: Any, build: Path, tree: Path) -> None:
    """The sampling module is a JIT build (not AOT) in the build folder, of sources in the
    pinned copy."""
    if getattr(spec, "is_aot", False) or not Path(spec.jit_library_path).resolve(
            ).is_relative_to(build):
        raise KernelChildError("the sampling module is not built in the stable copy's build "
                               "folder; refused")
    sources = [Path(s).resolve() for s in getattr(spec, "sources", ())]
    outside = [str(s) for s in sources if not s.is_relative_to(tree)]
    if outside:
        raise KernelChildError(f"sampling source outside the pinned copy: {outside[0]}")


def _guard_loads(tvm_ffi: Any, build: Path) -> None:
    """Wrap ``tvm_ffi.load_module``: a library outside ``build`` (or a link, or not a
    regular file) is refused; an allowed one is hashed from the descriptor opened here,
    which must be the file the loader then opens (same device and inode)."""
    original = tvm_ffi.load_module
    if getattr(original, "__topp_gate_guard__", False):
        return

    def load_module(path: Any, *args: Any, **kwargs: Any) -> Any:
        key = str(path)
        try:
            record = _hash_library(Path(key), build)
        except KernelChildError as err:
            _REFUSED.append(err.detail)
            raise
        module = original(path, *args, **kwargs)
        after = os.stat(key)
        if (after.st_dev, after.st_ino) != record.pop("_id"):
            _REFUSED.append(f"{key} changed while it was loaded")
            raise KernelChildError(f"library {key} changed while it was loaded; refused")
        _LOADED[str(Path(key).resolve())] = record
        return module

    load_module.__topp_gate_guard__ = True  # type: ignore[attr-defined]
    tvm_ffi.load_module = load_module


def _hash_library(path: Path, build: Path) -> dict[str, Any]:
    from ..core.digest import sha256_hex

    resolved = Path(os.path.realpath(path))
    if not path.is_absolute() or resolved != path or not resolved.is_relative_to(build):
        raise KernelChildError(f"refused to load {str(path)[:200]}: not a library of the "
                               "stable copy's build folder (or reached through a link)")
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise KernelChildError(f"refused to load {path}: not a regular file")
        data = handle.read()
    return {"sha256": sha256_hex(data), "bytes": len(data),
            "built_by_this_child": info.st_mtime >= _CHILD_STARTED,
            "_id": (info.st_dev, info.st_ino)}


def jit_library() -> dict[str, Any]:
    """The sampling module's shared object this child loaded through the guard, bound to
    the pinned sources (module docstring). Raises :class:`KernelChildError` when a load
    was refused or the library was not loaded through the guard."""
    from ..core.digest import sha256_hex

    if _REFUSED:
        raise KernelChildError(_REFUSED[0])
    build, tree = _STATE.get("build"), _STATE.get("tree")
    if build is None or tree is None:
        raise KernelChildError("FlashInfer ran without its build folder")
    spec = sys.modules["flashinfer.jit.sampling"].gen_sampling_module()
    _check_spec(spec, build, tree)
    record = _LOADED.get(str(Path(spec.jit_library_path).resolve()))
    if record is None:
        raise KernelChildError("the sampling library was not loaded from the stable copy's "
                               "build folder through the guarded loader")
    if "tree_sha256" not in _STATE:
        from ..pins.tree_digest import copy_digest, tree_digest

        _STATE["tree_sha256"] = tree_digest(copy_digest(tree))
    try:
        text = Path(spec.ninja_path).read_text(encoding="utf-8")
    except OSError as err:
        raise KernelChildError(f"cannot read the JIT build file: {err.strerror}") from None
    ninja = normalized_ninja(text, build, tree)
    ninja_sha = sha256_hex(ninja.encode("utf-8"))
    out = {**record, "build_ninja_sha256": ninja_sha,
           "sources_tree_sha256": _STATE["tree_sha256"],
           "sources_sha256": sources_sha256(_STATE["tree_sha256"], ninja_sha)}
    if _STATE.get("ninja_recorded") != ninja_sha:
        _STATE["ninja_recorded"] = ninja_sha
        out["build_ninja"] = ninja
    return out


FAMILY = register(FlashInfer())
