"""Build-time check of nix/triton-libcuda.nix: the meaning of libcuda_dirs(), not its name.

    python triton_libcuda_check.py DRIVER_PY APPENDED_PY

DRIVER_PY is triton-bin's triton/backends/nvidia/driver.py (before or after APPENDED_PY,
nix/triton_libcuda.py, is appended). Fails, naming why, when
  - driver.py defines no module-level libcuda_dirs();
  - nixpkgs' own libcuda_dirs() (the first definition) returns anything but a list of
    folders: a string (later nixpkgs return '/run/opengl-driver/lib/libcuda.so', one file),
    or nothing; the callers in driver.py and our wrapper both take a list of folders;
  - the wrapper, run on its own over a stand-in original, does not return
    [TRITON_LIBCUDA_PATH] when that folder holds libcuda.so.1, or does not refuse a folder
    without it, or passes a string from the original through.
tests/unit/test_flake.py runs it on this machine's Triton and on the later nixpkgs patch.
"""

from __future__ import annotations

import ast
import functools
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path


def _returns(fn: ast.FunctionDef) -> list[ast.Return]:
    found: list[ast.Return] = []
    stack: list[ast.AST] = list(fn.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue  # a nested function's returns are its own
        if isinstance(node, ast.Return):
            found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return found


def _is_text(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (str, bytes))
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp):
        return _is_text(node.left) or _is_text(node.right)
    return False


def source_problems(text: str) -> list[str]:
    """What is wrong with the first module-level libcuda_dirs() of driver.py's TEXT."""
    tree = ast.parse(text)
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "libcuda_dirs"]
    if not defs:
        return ["driver.py defines no libcuda_dirs()"]
    problems = []
    returns = _returns(defs[0])
    if not returns:
        problems.append("libcuda_dirs() has no return statement")
    for ret in returns:
        if ret.value is None or (isinstance(ret.value, ast.Constant) and ret.value.value is None):
            problems.append(f"libcuda_dirs() returns nothing (line {ret.lineno})")
        elif _is_text(ret.value):
            problems.append(
                f"libcuda_dirs() returns a string, not a list of folders (line {ret.lineno}: "
                f"{ast.unparse(ret.value)})")
        elif isinstance(ret.value, (ast.Dict, ast.Set, ast.Tuple, ast.DictComp, ast.SetComp)):
            problems.append(f"libcuda_dirs() returns a {type(ret.value).__name__.lower()}, "
                            f"not a list (line {ret.lineno})")
    return problems


def _wrapper(appended: str, original: Callable[[], object]) -> Callable[[], object]:
    namespace: dict[str, object] = {"functools": functools, "libcuda_dirs": original}
    exec(compile(appended, "triton_libcuda.py", "exec"), namespace)  # noqa: S102
    wrapped = namespace["libcuda_dirs"]
    assert callable(wrapped)
    return wrapped


def wrapper_problems(appended: str) -> list[str]:
    """Run the appended wrapper alone: the variable's folder must hold libcuda.so.1."""
    problems = []
    saved = os.environ.get("TRITON_LIBCUDA_PATH")
    try:
        with tempfile.TemporaryDirectory() as folder:
            good, empty = Path(folder, "driver"), Path(folder, "empty")
            good.mkdir()
            empty.mkdir()
            (good / "libcuda.so.1").write_bytes(b"")
            os.environ["TRITON_LIBCUDA_PATH"] = str(good)
            got = _wrapper(appended, lambda: ["/elsewhere"])()
            if got != [str(good)]:
                problems.append(f"with TRITON_LIBCUDA_PATH={good} the wrapper returned {got!r}")
            os.environ["TRITON_LIBCUDA_PATH"] = str(empty)
            try:
                got = _wrapper(appended, lambda: ["/elsewhere"])()
                problems.append(f"TRITON_LIBCUDA_PATH without libcuda.so.1 gave {got!r}")
            except RuntimeError:
                pass
            del os.environ["TRITON_LIBCUDA_PATH"]
            got = _wrapper(appended, lambda: [str(good)])()
            if got != [str(good)]:
                problems.append(f"without the variable the wrapper returned {got!r}")
            try:
                got = _wrapper(appended, lambda: "/run/opengl-driver/lib/libcuda.so")()
                problems.append(f"a string from the original passed through: {got!r}")
            except RuntimeError:
                pass
    finally:
        if saved is None:
            os.environ.pop("TRITON_LIBCUDA_PATH", None)
        else:
            os.environ["TRITON_LIBCUDA_PATH"] = saved
    return problems


def main(argv: list[str]) -> int:
    driver, appended = argv
    problems = source_problems(Path(driver).read_text()) + wrapper_problems(
        Path(appended).read_text())
    for problem in problems:
        print(f"topp-gate: {driver}: {problem}; update nix/triton-libcuda.nix", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
