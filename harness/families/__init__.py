"""Kernel families: one module per implementation a gate can judge, one table of them.

A *family* owns everything that is specific to one kernel implementation:

* what to pin: the package of its tree (``vllm``), its pip distribution
  (``distribution``: ``sources pin NAME==X`` picks the family by it), its kernel file
  (``kernel_path``), the roots of its import closure or its own ``closure()`` (the files it
  needs: FlashInfer adds the CUDA sources its JIT compiles), which compiled extensions become
  placeholders, and any extra files the import needs (vLLM reads its ``.dist-info``);
* how the kernel child imports it (``kernel_module``, from a private copy of the pinned
  tree, through ``import_kernel(tree)``; :mod:`harness.kernels.child` is generic);
* the one call it makes with ``(logits, k, p)``: the kernel child passes them as vLLM's
  V2 sampler does, ``k`` None when no row has a top-k (every k is the vocabulary), ``p``
  None when no row has a top-p (every p is 1.0);
* which path ``manifest new`` should declare for a kernel source, per side
  (``guess_dispatch``) and per case (``guess_case_path``), read from the source bytes;
* which dispatch paths it can take (``dispatch_paths``; the first is what the CLI offers
  first) and how each is proven by observation (``observer``), case by case (a case may
  take another path than its side's: ``prepare`` and ``observer`` are called with the
  case's path): the proof is written into each case's record as
  ``record[path] = {"proven": ..., ...}`` and read back by
  :func:`harness.core.names.proven_cases`.

The table maps a family id (``^[a-z][a-z0-9-]{0,31}$``, the ``family`` field of a pin file
and of a manifest side; absent means :data:`DEFAULT`) to its :class:`Family`. vLLM's Triton
top-k/top-p (:mod:`.vllm_triton`, id ``vllm-triton``), its PyTorch sort path
(:mod:`.vllm_pytorch`, ``vllm-pytorch``) and FlashInfer's sampling kernels
(:mod:`.flashinfer`, ``flashinfer``) are built in. A family defined
elsewhere (a test-only one, a new backend under development) is added from outside the
package with :func:`register`::

    from harness import families

    class MyFamily(families.Family):
        id = "my-kernel"
        ...

    FAMILY = MyFamily()
    families.register(FAMILY, path=Path(__file__).parent)

The module that defines a family must expose it as ``FAMILY`` and import nothing heavy at
module level (the parent process never imports torch for it). ``path`` is the folder the
kernel child adds to ``sys.path`` to import that module by its ``__name__`` (``None`` when it
is importable already, as the built-in ones are). Registration is per process: the runner
passes the family's id, module and path to the child in its request.

Standard library only at import time.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..core.errors import UsageError

DEFAULT = "vllm-triton"
FAMILY_ID = re.compile(r"[a-z][a-z0-9-]{0,31}")
_BUILTIN = {
    DEFAULT: "harness.families.vllm_triton",
    "vllm-pytorch": "harness.families.vllm_pytorch",
    "flashinfer": "harness.families.flashinfer",
}


class Observer(Protocol):
    """Watches one call (``with observer: family.call(...)``), then proves a path."""

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc: object) -> None: ...

    def proof(self, batch: int) -> dict[str, Any]:
        """``{"proven": bool, "problems": [...], ...}`` for the call just observed."""
        ...


class Family:
    """One kernel implementation. Subclasses set the class attributes and the child-side
    methods; the parent side reads only the attributes (no torch import)."""

    id: str = ""
    package: str = ""  # top-level package of the pinned tree; all its modules must come from it
    kernel_path: str = ""  # the kernel file, relative to the tree
    kernel_module: str = ""  # what the child imports (the module of kernel_path)
    closure_roots: tuple[str, ...] = ()  # import-closure roots (kernel_module first)
    dispatch_paths: tuple[str, ...] = ()  # the paths a side of this family may declare
    default_dispatch: str = ""
    distribution: str = "vllm"  # the pip name ``sources pin NAME==X`` downloads
    # the kernel is built at run time by a tool whose cache is keyed by paths and times
    # (FlashInfer's JIT): its private copy is a stable one (:mod:`..private_tree`), shared
    # by the two sides of a run when they pin the same files
    stable_copy: bool = False
    # paths that draw tokens rather than mask them: only rule set support/v1 judges a draw
    sampling_paths: tuple[str, ...] = ()
    # paths whose entry takes an index array (a case's declared ``indices``); other paths
    # refuse a case that declares one
    index_paths: tuple[str, ...] = ()
    # whether the child imports the kernel's module, running its module-level imports; a
    # family that loads chosen functions from the file (vLLM's PyTorch path) runs none, so
    # a module it names but never imports cannot stop it (``pr``'s check_importable)
    runs_module_code: bool = True

    # --- pinning (parent side) ---

    def closure(self, names: Collection[str], read: Callable[[str], bytes]) -> Any:
        """The files the child imports (a :class:`harness.pins.closure.Closure`): by
        default the static import closure of ``closure_roots`` within ``package``."""
        from ..pins.closure import closure

        return closure(names, read, roots=self.closure_roots, package=self.package)

    def extra_files(self, names: Collection[str]) -> list[str]:
        """Files outside the import closure that the import still reads (metadata)."""
        return []

    def placeholder_ok(self, name: str) -> bool:
        """Whether ``name`` may be replaced by an empty placeholder module."""
        return name.startswith(self.package + ".")

    # --- manifest new (parent side; the kernel's source bytes, never an import) ---

    def guess_dispatch(self, kernel: bytes) -> str:
        """The path a side of this kernel source takes by default (a manifest side's
        ``dispatch`` when ``manifest new`` is not told one)."""
        return self.default_dispatch

    def guess_case_path(self, kernel: bytes, batch: int, vocab: int, ks: list[int],
                        ps: list[float]) -> str | None:
        """The path one case takes with this kernel source, from its per-row top-k ``ks``
        (the vocabulary: no top-k) and float32 ``ps`` (1.0: no top-p); None when the
        family cannot tell (the side's ``dispatch`` then applies)."""
        return None

    # --- the kernel child (may import torch; never called in the parent) ---

    def import_kernel(self, tree: Path) -> Any:
        """Import ``kernel_module`` from the private copy ``tree`` (first on ``sys.path``);
        a family may import less than the whole package (it says so in its evidence)."""
        import importlib

        return importlib.import_module(self.kernel_module)

    def package_info(self, module: Any, loaded: list[str]) -> dict[str, Any]:
        """Evidence fields about the imported package (its version, modules loaded)."""
        return {}

    def prepare(self, module: Any, dispatch: str, backend: str) -> dict[str, Any]:
        """Anything to set up before the cases run; returns evidence fields."""
        return {}

    def observer(self, module: Any, dispatch: str, backend: str, num_sm: int) -> Observer:
        """The observer proving ``dispatch``; ``AttributeError`` when the module lacks it."""
        raise NotImplementedError

    def declare_sampling(self, sampling: Mapping[str, Any]) -> dict[str, Any]:
        """The manifest's declared draws of every sampling call (``draws_per_row``,
        ``seed``, ``offset``: the cases index's ``sampling``), given before any case runs;
        returns evidence fields. A family that draws nothing ignores them (``manifest new``
        refuses a declaration that no case's path reads)."""
        return {}

    def check_case(self, module: Any, dispatch: str, case: dict[str, Any]) -> None:
        """Refuse (``KernelChildError``) a case that cannot take ``dispatch``."""

    def call(self, module: Any, dispatch: str, backend: str, logits: Any, k: Any, p: Any,
             num_sm: int) -> Any:
        """The kernel on ``(logits, k, p)``: the masked logits (a tensor on logits' device)."""
        raise NotImplementedError

    def driver_version(self) -> str | None:
        return None


@dataclass(frozen=True)
class Entry:
    family: Family
    module: str  # importable module defining FAMILY
    path: str | None  # folder the child puts on sys.path to import it

    def request(self) -> dict[str, Any]:
        """How the kernel child finds this family (part of its request)."""
        return {"id": self.family.id, "module": self.module, "path": self.path}


_TABLE: dict[str, Entry] = {}


def register(family: Family, *, path: Path | str | None = None) -> Family:
    """Add ``family`` to the table (its module is ``type(family).__module__``).

    Registering the same id twice with another family is refused; the same family again
    is a no-op. Returns the family."""
    if not isinstance(family.id, str) or not FAMILY_ID.fullmatch(family.id):
        raise UsageError(f"family id {family.id!r} does not match {FAMILY_ID.pattern}")
    if not family.dispatch_paths or family.default_dispatch not in family.dispatch_paths:
        raise UsageError(f"family {family.id}: its default dispatch path is not one of its paths")
    if not family.kernel_module or family.kernel_module != family.closure_roots[:1][0]:
        raise UsageError(f"family {family.id}: the kernel module must be the first closure root")
    entry = Entry(family, type(family).__module__, None if path is None else str(path))
    known = _TABLE.get(family.id)
    if known is not None and known != entry:
        raise UsageError(f"family {family.id} is already registered by {known.module}")
    _TABLE[family.id] = entry
    return family


def entry(family_id: str) -> Entry:
    """The table's entry for ``family_id`` (built-in families are loaded on first use)."""
    if family_id not in _TABLE and family_id in _BUILTIN:
        import importlib

        importlib.import_module(_BUILTIN[family_id])
    try:
        return _TABLE[family_id]
    except KeyError:
        known = ", ".join(sorted(set(_TABLE) | set(_BUILTIN)))
        raise UsageError(f"unknown kernel family {family_id!r}; known: {known}") from None


def get(family_id: str | None = None) -> Family:
    """The family ``family_id`` (``None``: the default, ``vllm-triton``)."""
    return entry(DEFAULT if family_id is None else family_id).family


# pip distribution -> the family ``sources pin NAME==X`` pins unless told (--family)
_DISTRIBUTIONS = {"vllm": DEFAULT, "flashinfer-python": "flashinfer"}


def for_distribution(name: str) -> str | None:
    """The default family of a pip distribution name (``vllm``, ``flashinfer-python``)."""
    return _DISTRIBUTIONS.get(re.sub(r"[-_.]+", "-", name).lower())


def of_side(entry_data: Any) -> str:
    """The family id a manifest side entry or pin document names (absent: the default)."""
    value = entry_data.get("family", DEFAULT) if isinstance(entry_data, Mapping) else DEFAULT
    return str(value)
