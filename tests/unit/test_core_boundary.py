"""The trusted core (harness/core/) is a visible boundary: it imports only the standard
library, jsonschema, cryptography, rfc8785 (numpy only lazily, as the optional fast path) and
itself (numpy and python-flint only lazily, as optional paths); never the capture side,
torch, triton, rich or vLLM."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "harness" / "core"
ALLOWED_TOP = {"jsonschema", "cryptography", "rfc8785", "harness"}
FORBIDDEN = ("torch", "triton", "rich", "vllm", "matplotlib", "harness.capture",
             "harness.commands", "harness.probes")
# numpy: the fast path (bit-identical by test); flint: the exact-real diagnostic's extra
OPTIONAL = ("numpy", "flint")
CORE_FILES = sorted(p for p in CORE.rglob("*.py"))


def _imports(tree: ast.AST) -> list[tuple[str, bool]]:
    """(module, at module level?) for every import in ``tree``; relative ones resolved."""
    found = []
    top_level = {id(node) for node in getattr(tree, "body", [])}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, id(node) in top_level) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                found.append((node.module or "", id(node) in top_level))
            else:
                base = "harness.core" if node.level == 1 else "harness"
                found.append((f"{base}.{node.module}" if node.module else base,
                              id(node) in top_level))
    return found


@pytest.mark.parametrize("path", CORE_FILES, ids=lambda p: str(p.relative_to(CORE)))
def test_core_module_imports_stay_inside_the_boundary(path):
    for module, top in _imports(ast.parse(path.read_text("utf-8"))):
        first = module.split(".")[0]
        assert not module.startswith(FORBIDDEN), f"{path.name} imports {module}"
        if module.startswith("harness"):
            assert module.startswith("harness.core") or module == "harness", module
        elif first in OPTIONAL:
            assert not top, f"{path.name} imports {first} at module level (optional only)"
        elif first not in ALLOWED_TOP:
            assert first in sys.stdlib_module_names, f"{path.name} imports {module}"


def test_importing_the_whole_core_loads_nothing_heavy():
    names = [".".join(p.relative_to(ROOT).with_suffix("").parts) for p in CORE_FILES]
    script = ("import sys\n" + "".join(f"import {n}\n" for n in names) +
              "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
              "('torch', 'triton', 'rich', 'vllm', 'numpy', 'matplotlib') "
              "or m.startswith(('harness.capture', 'harness.commands')))\n"
              "print(bad)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
