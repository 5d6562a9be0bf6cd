"""Pin files: closure discovery, the pin schema, `sources pin` on a wheel and a source tree."""

from __future__ import annotations

import json
import subprocess
import zipfile
from pathlib import Path

import pytest

from harness.cli import main
from harness.core.digest import sha256_hex
from harness.core.errors import EvidenceDriftError, SourcesError
from harness.pins import pinning
from harness.pins.closure import closure, module_level_imports
from harness.pins.pinfile import load_pin_file, parse_pin_file
from harness.pins.sources import KERNEL_PATH, load_pins, tree_digest

ROOT = Path(__file__).resolve().parents[3]
PINS = ROOT / "evidence/pins"

KERNEL = b'''import torch
from vllm.triton_utils import triton
from vllm.platforms import current_platform

def apply_top_k_top_p_triton(logits, k, p):
    import vllm.model_executor.big_stack  # lazy: never part of the closure
    return logits
'''
FILES = {
    "vllm/__init__.py": b"from .version import __version__\n",
    "vllm/version.py": b"__version__ = '9.9.9'\n",
    "vllm/triton_utils/__init__.py": b"import triton\nfrom typing import TYPE_CHECKING\n"
                                     b"if TYPE_CHECKING:\n    import vllm.config\n",
    "vllm/platforms/__init__.py": b"current_platform = None\n",
    "vllm/platforms/cuda.py": b"import vllm._C  # compiled\ntry:\n    import vllm.extra\n"
                              b"except ImportError:\n    pass\n",
    "vllm/platforms/cpu.py": b"import psutil\n",
    "vllm/extra.py": b"class A:\n    import regex\n",
    "vllm/config.py": b"x = 1\n",
    "vllm/model_executor/__init__.py": b"",
    "vllm/model_executor/big_stack.py": b"import transformers\n",
    "vllm/v1/__init__.py": b"",
    "vllm/v1/sample/__init__.py": b"",
    "vllm/v1/sample/ops/__init__.py": b"",
    KERNEL_PATH: KERNEL,
    "vllm/_C.abi3.so": b"\x7fELF",
    "vllm-9.9.9.dist-info/METADATA": b"Name: vllm\nVersion: 9.9.9\n",
}
EXPECTED = {
    "vllm/__init__.py", "vllm/version.py", "vllm/triton_utils/__init__.py",
    "vllm/platforms/__init__.py", "vllm/platforms/cuda.py", "vllm/platforms/cpu.py",
    "vllm/extra.py", "vllm/v1/__init__.py", "vllm/v1/sample/__init__.py",
    "vllm/v1/sample/ops/__init__.py", KERNEL_PATH,
}


def _write_tree(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def test_pin_schema_ships_byte_identical():
    packaged = (ROOT / "harness/core/schemas/pin.schema.json").read_bytes()
    assert (ROOT / "schemas/pin.schema.json").read_bytes() == packaged


def test_closure_follows_module_level_imports_only():
    found = closure(FILES.keys(), FILES.__getitem__)
    assert set(found.files) == EXPECTED  # no lazy import, no TYPE_CHECKING import
    assert set(found.placeholders) == {"vllm._C"}
    assert set(found.third_party) == {"torch", "triton", "psutil", "regex"}


def test_module_level_imports_resolve_relative_names():
    import ast

    tree = ast.parse("from .a import b\nfrom .. import c\n")
    assert module_level_imports(tree, "vllm.x.y", False) == [
        "vllm.x.a", "vllm.x.a.b", "vllm", "vllm.c"]


def test_committed_pins_are_valid_and_match_the_default_pins():
    pins = sorted(PINS.glob("vllm-[0-9]*.json"))  # vLLM Triton pins (not vllm-pytorch-*)
    assert len(pins) == 25  # 0.17.0 (first release with the kernel file) .. 0.33.0
    for path in pins:
        pin = load_pin_file(path)
        assert path.name == f"vllm-{pin.version}.json"
        assert pin.data["files"][KERNEL_PATH] == pin.data["kernel_sha256"]
    default = load_pins()
    for name, version in (("stock", "0.30.0"), ("patched", "0.33.0")):
        side = load_pin_file(PINS / f"vllm-{version}.json").side(name)
        assert dict(side.files) == dict(default.side(name).files)
        assert side.wheel_sha256 == default.side(name).wheel_sha256
        assert side.placeholders == default.side(name).placeholders


def test_a_pin_whose_tree_digest_lies_is_refused():
    data = json.loads((PINS / "vllm-0.30.0.json").read_bytes())
    data["tree_sha256"] = "0" * 64
    with pytest.raises(SourcesError, match="tree_sha256"):
        parse_pin_file(json.dumps(data).encode())
    data = json.loads((PINS / "vllm-0.30.0.json").read_bytes())
    data["origin"]["kind"] = "sdist"
    with pytest.raises(SourcesError, match="schema violation"):
        parse_pin_file(json.dumps(data).encode())


def test_a_pin_file_with_other_bytes_than_frozen_is_drift(tmp_path):
    with pytest.raises(EvidenceDriftError):
        load_pin_file(PINS / "vllm-0.30.0.json", expected_sha256="0" * 64)


def test_pin_of_a_local_wheel_records_its_sha256_and_caches_the_tree(tmp_path):
    wheel = tmp_path / "vllm-9.9.9-cp38-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for rel, data in FILES.items():
            archive.writestr(rel, data)
    out = tmp_path / "pin.json"
    result = pinning.pin(str(wheel), out, cache=tmp_path / "cache")
    pin = load_pin_file(out)
    assert pin.origin == {"kind": "wheel", "wheel": wheel.name,
                          "wheel_sha256": sha256_hex(wheel.read_bytes())}
    assert set(pin.data["files"]) == EXPECTED | {"vllm-9.9.9.dist-info/METADATA"}
    assert pin.data["placeholders"] == ["vllm._C"]
    assert result.tree == tmp_path / "cache/trees" / tree_digest(pin.data["files"])
    assert (result.tree / KERNEL_PATH).read_bytes() == KERNEL
    with pytest.raises(Exception, match="never overwritten"):
        pinning.pin(str(wheel), out, cache=tmp_path / "cache")


def test_pin_of_a_source_tree_records_commit_and_clean_flag(tmp_path):
    files = {k: v for k, v in FILES.items() if not k.endswith((".so", "METADATA"))}
    files["setup.py"] = b'ext_modules = [CMakeExtension(name="vllm._C")]\n'
    tree = _write_tree(tmp_path / "vllm-src", files)
    _git(tree, "init", "-q")
    _git(tree, "-c", "user.email=t@t", "-c", "user.name=t", "add", ".")
    _git(tree, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "x")
    commit = _git(tree, "rev-parse", "HEAD")
    cache = tmp_path / "cache"
    assert main(["sources", "--cache", str(cache), "pin", str(tree), "--out",
                 str(tmp_path / "clean.json")]) == 0
    pin = load_pin_file(tmp_path / "clean.json")
    assert pin.origin == {"kind": "source-tree", "commit": commit, "clean": True}
    assert pin.data["placeholders"] == ["vllm._C"]  # named by setup.py, no .so built
    assert set(pin.data["files"]) == EXPECTED
    (tree / KERNEL_PATH).write_bytes(KERNEL + b"# my change\n")
    assert main(["sources", "--cache", str(cache), "pin", str(tree), "--out",
                 str(tmp_path / "dirty.json")]) == 0
    dirty = load_pin_file(tmp_path / "dirty.json")
    assert dirty.origin["clean"] is False and dirty.origin["commit"] == commit
    assert dirty.data["kernel_sha256"] == sha256_hex(KERNEL + b"# my change\n")


def test_a_spec_without_the_kernel_file_exits_2_naming_the_version(tmp_path, capsys):
    files = {k: v for k, v in FILES.items() if k != KERNEL_PATH}
    wheel = tmp_path / "vllm-0.16.0-cp38-abi3-manylinux_2_31_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for rel, data in files.items():
            archive.writestr(rel, data)
    code = main(["sources", "--cache", str(tmp_path / "c"), "pin", str(wheel), "--out",
                 str(tmp_path / "p.json")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "vLLM 0.16.0 does not ship" in err
    assert not (tmp_path / "p.json").exists()
