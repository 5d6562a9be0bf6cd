"""The trusted core (harness/core/) is a visible boundary: it imports only the standard
library, jsonschema, cryptography, rfc8785 (numpy only lazily, as the optional fast path) and
itself (numpy and python-flint only lazily, as optional paths); never the capture side,
the diagnostics, torch, triton, rich or vLLM. The diagnostics (harness/diagnostics/, outside
the core digest) keep the same rules, and may import the core as well as themselves."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "harness" / "core"
DIAGNOSTICS = ROOT / "harness" / "diagnostics"
ALLOWED_TOP = {"jsonschema", "cryptography", "rfc8785", "harness"}
FORBIDDEN = ("torch", "triton", "rich", "vllm", "matplotlib", "harness.capture",
             "harness.commands", "harness.probes")
# numpy: the fast path (bit-identical by test); flint: the exact-real diagnostic's extra
OPTIONAL = ("numpy", "flint")
CORE_FILES = sorted(p for p in CORE.rglob("*.py"))
DIAGNOSTIC_FILES = sorted(p for p in DIAGNOSTICS.rglob("*.py"))
# what harness modules each folder may import: the core only itself; diagnostics the core too
INSIDE = {CORE: ("harness.core",), DIAGNOSTICS: ("harness.core", "harness.diagnostics")}


def _imports(tree: ast.AST, package: str = "harness.core") -> list[tuple[str, bool]]:
    """(module, at module level?) for every import in ``tree`` (a module of ``package``);
    relative ones resolved."""
    found = []
    top_level = {id(node) for node in getattr(tree, "body", [])}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, id(node) in top_level) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                found.append((node.module or "", id(node) in top_level))
            else:
                base = package if node.level == 1 else "harness"
                found.append((f"{base}.{node.module}" if node.module else base,
                              id(node) in top_level))
    return found


@pytest.mark.parametrize("path", CORE_FILES + DIAGNOSTIC_FILES,
                         ids=lambda p: str(p.relative_to(ROOT / "harness")))
def test_core_module_imports_stay_inside_the_boundary(path):
    folder = CORE if path.is_relative_to(CORE) else DIAGNOSTICS
    package = "harness." + folder.name
    for module, top in _imports(ast.parse(path.read_text("utf-8")), package):
        first = module.split(".")[0]
        assert not module.startswith(FORBIDDEN), f"{path.name} imports {module}"
        if module.startswith("harness"):
            assert module.startswith(INSIDE[folder]) or module == "harness", module
        elif first in OPTIONAL:
            assert not top, f"{path.name} imports {first} at module level (optional only)"
        elif first not in ALLOWED_TOP:
            assert first in sys.stdlib_module_names, f"{path.name} imports {module}"


@pytest.mark.parametrize(("files", "outside"), [
    (CORE_FILES, ("harness.capture", "harness.commands", "harness.diagnostics")),
    (DIAGNOSTIC_FILES, ("harness.capture", "harness.commands")),
], ids=["core", "diagnostics"])
def test_importing_the_whole_core_loads_nothing_heavy(files, outside):
    names = [".".join(p.relative_to(ROOT).with_suffix("").parts) for p in files]
    script = ("import sys\n" + "".join(f"import {n}\n" for n in names) +
              "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
              "('torch', 'triton', 'rich', 'vllm', 'numpy', 'matplotlib', 'flint') "
              f"or m.startswith({outside!r}))\n"
              "print(bad)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# Names that hold, build or read a private key: the core verifies with public keys only.
PRIVATE_KEY_NAMES = frozenset({
    "Ed25519PrivateKey", "X25519PrivateKey", "Ed448PrivateKey", "PrivateFormat",
    "load_pem_private_key", "load_der_private_key", "load_ssh_private_key",
    "generate_private_key", "from_private_bytes", "private_bytes", "private_bytes_raw",
})


def _private_key_names(tree: ast.AST) -> list[str]:
    """Every private-key name ``tree`` imports, reads or calls, and every ``.generate()``
    (how a cryptography private key is made)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.alias):
            names = {node.name.split(".")[-1], node.asname or ""}
        elif isinstance(node, ast.Name):
            names = {node.id}
        elif isinstance(node, ast.Attribute):
            names = {node.attr}
            if node.attr == "generate":
                found.append("generate")
        else:
            continue
        found += sorted(names & PRIVATE_KEY_NAMES)
    return found


@pytest.mark.parametrize("path", CORE_FILES, ids=lambda p: str(p.relative_to(CORE)))
def test_core_module_names_no_private_key(path):
    assert _private_key_names(ast.parse(path.read_text("utf-8"))) == []


def test_the_private_key_check_sees_what_it_looks_for():
    tree = ast.parse("from cryptography.hazmat.primitives.asymmetric import ed25519\n"
                     "from cryptography.hazmat.primitives.serialization import "
                     "load_pem_private_key as load\n"
                     "key = ed25519.Ed25519PrivateKey.generate()\n")
    assert sorted(_private_key_names(tree)) == ["Ed25519PrivateKey", "generate",
                                                "load_pem_private_key"]


def test_importing_the_whole_core_binds_no_private_key_type():
    """After importing every core module, no name of any of them is (or refers to) a
    private-key class or loader, and the capture side's signing module was never loaded."""
    names = [".".join(p.relative_to(ROOT).with_suffix("").parts) for p in CORE_FILES]
    script = (
        "import sys\n" + "".join(f"import {n}\n" for n in names) +
        "from cryptography.hazmat.primitives.asymmetric import ed25519\n"
        "from cryptography.hazmat.primitives import serialization\n"
        "private = (ed25519.Ed25519PrivateKey, serialization.load_pem_private_key)\n"
        "bad = sorted(f'{m}.{k}' for m, mod in list(sys.modules.items())\n"
        "             if m.startswith('harness.core')\n"
        "             for k, v in vars(mod).items() if any(v is p for p in private))\n"
        "bad += [m for m in sys.modules if m.startswith('harness.capture')]\n"
        "print(bad)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
