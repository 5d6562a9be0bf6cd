"""The kernel module's import closure, found by static analysis of a file set.

Capture side (standard library only). A *file set* is what a wheel or a source tree holds:
the relative POSIX paths of its files and a way to read one. :func:`closure` walks the
module-level imports (``ast``) from a kernel family's roots (``Family.closure_roots``,
:mod:`harness.families`; for vLLM's Triton kernel: the kernel module,
``vllm.platforms.cuda`` and ``vllm.platforms.cpu``, and ``vllm.third_party.pynvml``) within
the family's package.

It follows every import at module level of a module in the closure, including those under
``try`` and ``if``, but not those under ``if TYPE_CHECKING:`` and not those inside function
bodies (vLLM imports its config and model stack lazily in functions the top-p path never
calls). A module the closure misses cannot be imported from the pinned tree, so a miss fails
closed when the kernel runs. Every parent package's ``__init__.py`` is included.

Compiled extensions are never part of a tree. Those the closure imports at module level are
returned as *placeholders*: the kernel child installs an empty module for exactly those
names and records that it did. A wheel names them by its ``.so`` files; a source checkout
that was not built in place names them in ``setup.py`` (``CMakeExtension(name="vllm...")``).
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Callable, Collection
from dataclasses import dataclass

from ..core.errors import SourcesError
from ..core.terminal import printable

# vLLM's Triton kernel (the default family's roots; harness.families.vllm_triton)
KERNEL_MODULE = "vllm.v1.sample.ops.topk_topp_triton"
ROOTS = (
    KERNEL_MODULE,
    "vllm.platforms.cuda",
    "vllm.platforms.cpu",
    "vllm.third_party.pynvml",
)
_SO = r"^(?P<mod>{package}/.+?)(\.abi3|\.cpython-[^./]+)?\.so$"
_CMAKE_EXTENSION = r"""CMakeExtension\(\s*name\s*=\s*["']({package}\.[\w.]+)["']"""


@dataclass(frozen=True)
class Closure:
    """What the kernel import needs from a file set."""

    files: frozenset[str]  # relative paths of the Python files
    placeholders: frozenset[str]  # compiled extension modules imported at module level
    third_party: dict[str, frozenset[str]]  # top-level package -> modules importing it


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def module_level_imports(tree: ast.Module, module: str, is_package: bool) -> list[str]:
    """Absolute names imported outside function bodies and ``TYPE_CHECKING`` blocks.

    ``from X import name`` yields both ``X`` and ``X.name`` (name may be a submodule).
    """
    found: list[str] = []

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                if isinstance(node, ast.ClassDef):
                    visit(node.body)  # class bodies run at import time
                continue
            if isinstance(node, ast.If) and _is_type_checking(node.test):
                visit(node.orelse)
                continue
            if isinstance(node, ast.Import):
                found.extend(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = module.split(".") if is_package else module.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    name = ".".join(base + ([node.module] if node.module else []))
                else:
                    name = node.module or ""
                found.append(name)
                found.extend(f"{name}.{alias.name}" for alias in node.names)
            for attr in ("body", "orelse", "finalbody"):
                child = getattr(node, attr, None)
                if isinstance(child, list):
                    visit(child)
            for handler in getattr(node, "handlers", []):
                visit(handler.body)

    visit(tree.body)
    return found


def compiled_modules(names: Collection[str], read: Callable[[str], bytes],
                     package: str = "vllm") -> set[str]:
    """Compiled extension modules of ``package`` in a file set: its ``.so`` files, else
    ``setup.py``."""
    so = re.compile(_SO.format(package=re.escape(package)))
    found = set()
    for name in names:
        match = so.match(name)
        if match:
            found.add(match["mod"].replace("/", "."))
    if not found and "setup.py" in names:
        text = read("setup.py").decode("utf-8", "replace")
        found.update(re.findall(_CMAKE_EXTENSION.format(package=re.escape(package)), text))
    return found


def _imports_of(path: str, source: bytes, module: str, is_package: bool) -> list[str]:
    """``module_level_imports`` of one file. A file Python cannot parse (a syntax error,
    null bytes, nesting deeper than the parser or this walk can follow) is bad input in
    the user's tree, not a fault of the harness: a typed error naming the file (exit 2)."""
    try:
        tree = ast.parse(source, filename=path)
        return module_level_imports(tree, module, is_package)
    except SyntaxError as err:
        where = f" line {err.lineno}" if err.lineno else ""
        raise SourcesError(f"{printable(path)}{where} is not valid Python "
                           f"({printable(err.msg or 'syntax error')}); the import closure "
                           "cannot be found") from None
    except (ValueError, RecursionError, MemoryError) as err:
        raise SourcesError(f"{printable(path)} cannot be parsed ({type(err).__name__}: nested "
                           "too deeply or not source text); the import closure cannot be "
                           "found") from None


def closure(names: Collection[str], read: Callable[[str], bytes], *,
            roots: Collection[str] = ROOTS, package: str = "vllm",
            bare: bool = False) -> Closure:
    """The import closure of ``roots`` (a family's) within ``package`` in the file set.

    ``bare``: no package ``__init__.py`` is part of the closure or followed (the kernel
    child gives each package of the tree a bare module whose ``__path__`` is its folder,
    so ``import package.module`` runs that module and what it imports, not the whole
    package's ``__init__``; FlashInfer's imports far more than its sampling module)."""
    names = set(names)
    compiled = compiled_modules(names, read, package)
    files: set[str] = set()
    placeholders: set[str] = set()
    third: dict[str, set[str]] = {}
    todo = list(roots)
    seen: set[str] = set()
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        if module in compiled:
            placeholders.add(module)
            continue
        base = module.replace(".", "/")
        if f"{base}/__init__.py" in names:
            if bare:
                continue  # a bare package: its folder only
            path, is_package = f"{base}/__init__.py", True
        elif f"{base}.py" in names:
            path, is_package = f"{base}.py", False
        else:
            continue  # an attribute imported with "from X import name", not a module
        files.add(path)
        parts = module.split(".")
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))
        for name in _imports_of(path, read(path), module, is_package):
            top = name.split(".")[0]
            if top == package:
                todo.append(name)
            elif top and top not in sys.stdlib_module_names:
                third.setdefault(top, set()).add(module)
    return Closure(frozenset(files), frozenset(placeholders),
                   {top: frozenset(mods) for top, mods in third.items()})


def unmet_imports(files: Collection[str], names: Collection[str], read: Callable[[str], bytes],
                  package: str = "vllm", compiled: Collection[str] | None = None,
                  ) -> list[tuple[str, str, int]]:
    """(module, file, line) of each module of ``package`` that a closure file imports
    unconditionally (a statement of the module's own body: not under ``try``, ``if``, a
    function or a class) and that the file set neither holds (as a module or a package) nor
    names as a compiled extension. Such an import fails when that file is imported (issue 37:
    an exported tree has no ``.so`` file and no ``setup.py``, so on CUDA ``import
    vllm._C_stable_libtorch`` in ``vllm/platforms/cuda.py`` crashed both sides).
    Only what is surely a module is checked: ``import X`` and the ``X`` of ``from X import
    name`` (``name`` may be an attribute). ``compiled``: the compiled extensions' names
    (a pin's placeholders), else those the file set names (:func:`compiled_modules`)."""
    names = set(names)
    compiled = set(compiled) if compiled is not None else compiled_modules(names, read, package)
    unmet: list[tuple[str, str, int]] = []
    for path in sorted(files):
        if not path.endswith(".py"):
            continue
        is_package = path.endswith("/__init__.py")
        module = (path[: -len("/__init__.py")] if is_package else path[:-3]).replace("/", ".")
        try:
            tree = ast.parse(read(path), filename=path)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue  # refused by name where the closure reads it
        for node in tree.body:
            wanted: list[str] = []
            if isinstance(node, ast.Import):
                wanted = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = module.split(".") if is_package else module.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    wanted = [".".join(base + ([node.module] if node.module else []))]
                else:
                    wanted = [node.module or ""]
            for name in wanted:
                if name.split(".")[0] != package or name in compiled:
                    continue
                base_path = name.replace(".", "/")
                if f"{base_path}.py" in names or f"{base_path}/__init__.py" in names \
                        or any(n.startswith(f"{base_path}/") for n in names):
                    continue
                unmet.append((name, path, node.lineno))
    return unmet
