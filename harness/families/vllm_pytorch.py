"""vLLM's PyTorch top-k/top-p (``apply_top_k_top_p_pytorch``): family ``vllm-pytorch``.

vLLM runs this sort-based path where Triton is absent (``apply_top_k_top_p`` in
``vllm/v1/sample/ops/topk_topp_sampler.py``). It is plain torch, so it runs on a CPU for
real: no Triton interpreter is involved on this side, whatever backend the manifest names.

What to pin: the sampler file itself (``kernel_path``) and the wheel's ``METADATA`` (the
version). Importing the module runs vLLM's config, platform and model stack (313 files that
need pydantic, transformers and more); the two functions of the path need none of it. So the
child *loads the functions, not the module*: it parses the pinned file, compiles exactly the
definitions of :data:`FUNCTIONS` (their source bytes unchanged, the file's own name and line
numbers) into a fresh module whose only global is ``torch``, and refuses (fail closed) when a
definition is missing or reads any other global name (``LOAD_GLOBAL``/``LOAD_NAME`` of the
compiled code). No module-level statement of the file runs; the evidence says so
(``module_level_code_run: false``). The kernel file's sha256 binds the bytes compiled.

One dispatch path, ``sort``: the child calls
``apply_top_k_top_p_pytorch(logits, k, p)`` as vLLM passes them: ``k`` None when no row has
top-k (the child's convention), ``p`` None when no row has top-p (every p >= 1, here),
``allow_cpu_sync`` at its default False (the sort for every batch, as on a GPU without
Triton; a CPU server sends top-k-only batches to ``apply_top_k_only`` instead).
:class:`SortObserver` proves it by observing code objects only (``sys.setprofile``): the
entry ran exactly once, with ``allow_cpu_sync`` false and at least one of ``k``/``p`` given
(else the function returns its input unsorted), and ``apply_top_k_only`` never ran.
"""

from __future__ import annotations

import ast
import builtins
import dis
import re
import sys
import types
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Any

from ..core.errors import KernelChildError
from . import Family, register

SORT = "sort"
ENTRY = "apply_top_k_top_p_pytorch"
FUNCTIONS = (ENTRY, "apply_top_k_only")  # the definitions compiled from the pinned file
GLOBALS = ("torch",)  # the only global names they may read besides each other and builtins
_GLOBAL_OPS = {"LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL", "DELETE_GLOBAL"}


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def global_names(code: types.CodeType) -> set[str]:
    """Every global (or module-level) name the code and its nested code read or write."""
    found = set()
    for each in _codes(code):
        for ins in dis.get_instructions(each):
            if ins.opname in _GLOBAL_OPS:
                found.add(str(ins.argval))
    return found


def load_functions(path: Path, module_name: str, functions: Collection[str],
                   provided: dict[str, Any]) -> types.ModuleType:
    """A module holding exactly ``functions`` compiled from the file at ``path`` (their
    source unchanged), with ``provided`` as its only other globals. Refused: a missing
    definition, a decorator, or a global name outside ``functions``, ``provided`` and the
    builtins."""
    source = path.read_bytes()
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as err:
        raise KernelChildError(f"{path.name} is not valid Python ({err.msg})") from None
    defs = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    missing = [name for name in functions if name not in defs]
    if missing:
        raise AttributeError(f"{path.name} defines no {', '.join(missing)}")
    chosen: list[ast.stmt] = [defs[name] for name in functions]
    if any(defs[name].decorator_list for name in functions):
        raise KernelChildError(f"{path.name}: a decorated definition cannot be loaded alone")
    code = compile(ast.Module(body=chosen, type_ignores=[]), str(path), "exec",
                   dont_inherit=True)
    allowed = set(functions) | set(provided) | set(dir(builtins))
    unknown = sorted(global_names(code) - allowed)
    if unknown:
        raise KernelChildError(f"{path.name}: {', '.join(functions)} read globals "
                               f"{', '.join(unknown)} that loading them alone does not give")
    module = types.ModuleType(module_name, f"topp-gate: {', '.join(functions)} of {path.name}")
    module.__file__ = str(path)
    module.__dict__.update(provided)
    exec(code, module.__dict__)  # noqa: S102 - the pinned, hashed definitions, nothing else
    return module


class SortObserver:
    """Watches the entry's and ``apply_top_k_only``'s code objects (``sys.setprofile``)."""

    def __init__(self, module: Any) -> None:
        self.entry = module.apply_top_k_top_p_pytorch.__code__
        self.topk_only = module.apply_top_k_only.__code__
        self.reset()

    def reset(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.topk_only_calls = 0

    def _profile(self, frame: types.FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        if frame.f_code is self.entry:
            local = frame.f_locals
            self.calls.append({"k_is_none": local.get("k") is None,
                               "p_is_none": local.get("p") is None,
                               "allow_cpu_sync": bool(local.get("allow_cpu_sync"))})
        elif frame.f_code is self.topk_only:
            self.topk_only_calls += 1

    def __enter__(self) -> SortObserver:
        self.reset()
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(None)

    def proof(self, batch: int) -> dict[str, Any]:
        problems = []
        if len(self.calls) != 1:
            problems.append(f"{ENTRY} ran {len(self.calls)} times")
        else:
            call = self.calls[0]
            if call["allow_cpu_sync"]:
                problems.append(f"{ENTRY} ran with allow_cpu_sync")
            if call["k_is_none"] and call["p_is_none"]:
                problems.append(f"{ENTRY} ran with neither k nor p (no sort)")
        if self.topk_only_calls:
            problems.append("apply_top_k_only ran")
        call = self.calls[0] if len(self.calls) == 1 else {}
        return {
            "entry_point": ENTRY,
            "observed_by": "sys.setprofile on code objects",
            "entry_calls": len(self.calls),
            "k_given": not call.get("k_is_none", True),
            "p_given": not call.get("p_is_none", True),
            "topk_only_calls": self.topk_only_calls,
            "proven": not problems,
            "problems": problems,
        }


def _pinned_version(tree: Path) -> str | None:
    for metadata in sorted(tree.glob("vllm-*.dist-info/METADATA")):
        match = re.search(r"^Version:\s*(\S+)", metadata.read_text("utf-8", "replace"),
                          re.MULTILINE)
        if match:
            return match.group(1)
    return None


class VllmPytorch(Family):
    """vLLM's sort-based PyTorch top-k/top-p path (no Triton)."""

    id = "vllm-pytorch"
    package = "vllm"
    kernel_path = "vllm/v1/sample/ops/topk_topp_sampler.py"
    kernel_module = "vllm.v1.sample.ops.topk_topp_sampler"
    closure_roots = ("vllm.v1.sample.ops.topk_topp_sampler",)
    dispatch_paths = (SORT,)
    default_dispatch = SORT
    runs_module_code = False  # import_kernel loads FUNCTIONS, never the module's imports

    def closure(self, names: Collection[str], read: Callable[[str], bytes]) -> Any:
        """The sampler file alone: its functions are loaded, not its module."""
        from ..pins.closure import Closure

        return Closure(frozenset({self.kernel_path}) & set(names), frozenset(),
                       {"torch": frozenset({self.kernel_module})})

    def extra_files(self, names: Collection[str]) -> list[str]:
        return sorted(n for n in names if re.fullmatch(r"vllm-[^/]+\.dist-info/METADATA", n))

    def import_kernel(self, tree: Path) -> Any:
        import torch

        module = load_functions(tree / self.kernel_path, self.kernel_module, FUNCTIONS,
                                {"torch": torch})
        sys.modules[self.kernel_module] = module
        self._tree = tree
        return module

    def package_info(self, module: Any, loaded: list[str]) -> dict[str, Any]:
        tree = getattr(self, "_tree", None)
        return {
            "vllm_version": _pinned_version(tree) if tree is not None else None,
            "functions_loaded": list(FUNCTIONS),
            "globals_provided": list(GLOBALS),
            "module_level_code_run": False,
            "runs_on": "torch (no Triton)",
        }

    def observer(self, module: Any, dispatch: str, backend: str, num_sm: int) -> Any:
        return SortObserver(module)

    def call(self, module: Any, dispatch: str, backend: str, logits: Any, k: Any, p: Any,
             num_sm: int) -> Any:
        if p is not None and bool((p >= 1.0).all()):
            p = None  # vLLM passes no p when no row has top-p
        return module.apply_top_k_top_p_pytorch(logits, k, p)


FAMILY = register(VllmPytorch())
