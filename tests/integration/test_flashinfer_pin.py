"""FlashInfer pinned like a vLLM release (no GPU needed): ``sources pin
flashinfer-python==0.7.2.post1`` picks the family from the distribution, finds the import
closure of ``flashinfer.sampling`` with bare packages (no package ``__init__``) plus the CUDA
sources and headers its JIT compiles, and hashes every file. The wheel comes from the cache
(``sources pin`` put it there) or from the registry."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harness import families
from harness.cli import main
from harness.core.errors import KernelChildError
from harness.pins import sources
from harness.pins.pinfile import load_pin_file

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "evidence/pins/flashinfer-0.7.2.post1.json"

pytestmark = [pytest.mark.sources]


def _spec() -> str:
    cached = sorted(sources.cache_root().glob(
        "wheels/*/flashinfer_python-0.7.2.post1-py3-none-any.whl"))
    return str(cached[0]) if cached else "flashinfer-python==0.7.2.post1"


@pytest.fixture(scope="module")
def pinned(tmp_path_factory):
    out = tmp_path_factory.mktemp("pin") / "flashinfer.json"
    assert main(["sources", "pin", _spec(), "--out", str(out)]) == 0
    return load_pin_file(out)


def test_the_distribution_picks_the_family_and_the_pin_is_the_committed_one(pinned):
    assert families.for_distribution("flashinfer-python") == "flashinfer"
    assert families.for_distribution("flashinfer_python") == "flashinfer"
    assert pinned.data["family"] == "flashinfer"
    assert pinned.data["version"] == "0.7.2.post1"
    assert pinned.raw == COMMITTED.read_bytes()


def test_the_closure_is_sampling_and_its_jit_sources_not_the_package(pinned):
    files = pinned.data["files"]
    python = sorted(p for p in files if p.endswith(".py"))
    assert "flashinfer/sampling.py" in python and "flashinfer/jit/sampling.py" in python
    assert not any(p.endswith("__init__.py") for p in python)  # bare packages
    assert len([p for p in python if not p.startswith("flashinfer/data/")]) == 17
    for src in ("sampling.cu", "renorm.cu", "flashinfer_sampling_binding.cu",
                "sampling_utils.h", "tvm_ffi_utils.h"):
        assert f"flashinfer/data/csrc/{src}" in files
    assert "flashinfer/data/include/flashinfer/sampling.cuh" in files
    assert any(p.startswith("flashinfer/data/cccl/cub/") for p in files)
    assert not any(p.startswith("flashinfer/data/cutlass/") for p in files)
    assert "flashinfer_python-0.7.2.post1.dist-info/METADATA" in files
    tree = sources.resolve_tree(pinned.side("stock"), cache=sources.cache_root())
    size = sum((tree / p).stat().st_size for p in files)
    assert size < 40 << 20, size  # it travels to the GPU machine (64 MiB a call)


def test_the_interpreter_has_no_flashinfer_path():
    family = families.get("flashinfer")
    assert family.dispatch_paths == ("top-p-renorm", "top-k-renorm", "top-k-mask",
                                     "top-p-sampling", "top-k-top-p-sampling",
                                     "top-k-sampling")
    from harness.core.errors import KernelChildError

    with pytest.raises(KernelChildError, match="CUDA only"):
        family.prepare(None, "top-p-sampling", "interpreter")
    assert json.loads(COMMITTED.read_text())["origin"]["wheel_sha256"] == (
        "bfdc18b9e1e4d8d0730fe4343dc0e284cd0c160086de80f99888bc4867922d49")


def test_the_child_imports_flashinfer_sampling_without_its_package_init(pinned, tmp_path,
                                                                       monkeypatch):
    """Needs apache-tvm-ffi (for this Python) and nvidia-ml-py importable; no GPU."""
    pytest.importorskip("tvm_ffi")
    pytest.importorskip("pynvml")
    import shutil
    import sys

    from harness.families import flashinfer

    tree = tmp_path / "copy"
    shutil.copytree(sources.resolve_tree(pinned.side("stock"), cache=sources.cache_root()),
                    tree)
    build = tmp_path / "copy.build"
    build.mkdir(mode=0o700)
    family = families.get("flashinfer")
    import tvm_ffi

    monkeypatch.setattr(flashinfer, "_STATE", {})
    monkeypatch.setattr(tvm_ffi, "load_module", tvm_ffi.load_module)  # the guard wraps it
    monkeypatch.setenv("FLASHINFER_WORKSPACE_BASE", "restored after the test")
    sys.path.insert(0, str(tree))
    try:
        family.before_import(tree, build)  # the JIT workspace: the build folder
        module = family.import_kernel(tree)
        assert Path(module.__file__) == tree / "flashinfer/sampling.py"
        info = family.package_info(module, [n for n in sys.modules
                                            if n.startswith("flashinfer")])
        assert info["flashinfer_version"] == "0.7.2.post1"
        assert info["flashinfer_modules_loaded"] == 17 and "flashinfer" in info["bare_packages"]
        for entry in ("top_p_renorm_probs", "top_k_renorm_probs", "top_k_mask_logits",
                      "top_p_sampling_from_probs", "top_k_top_p_sampling_from_logits",
                      "top_k_sampling_from_probs"):
            assert callable(getattr(module, entry))
    finally:
        sys.path.remove(str(tree))
        for name in [n for n in sys.modules if n == "flashinfer" or n.startswith("flashinfer.")]:
            del sys.modules[name]


def test_a_planted_jit_cache_runs_in_the_pinned_import_unless_the_child_refuses_it(
        pinned, tmp_path, monkeypatch):
    """The attack is real: FlashInfer 0.7.2.post1's own ``jit/env.py`` imports a
    ``flashinfer_jit_cache`` found on the path (its code runs during ``import
    flashinfer.sampling``); the child's isolation check finds it first, without running it.
    Needs apache-tvm-ffi and nvidia-ml-py importable; no GPU."""
    pytest.importorskip("tvm_ffi")
    pytest.importorskip("pynvml")
    import shutil

    import tvm_ffi

    from harness.families import flashinfer
    from harness.kernels.child import check_isolation

    tree = tmp_path / "copy"
    shutil.copytree(sources.resolve_tree(pinned.side("stock"), cache=sources.cache_root()),
                    tree)
    site, marker = tmp_path / "site", tmp_path / "planted-code-ran"
    (site / "flashinfer_jit_cache").mkdir(parents=True)
    (site / "flashinfer_jit_cache" / "__init__.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n__version__ = '0.7.2.post1'\n"
        "def get_jit_cache_providers():\n    return []\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(tree))
    family = families.get("flashinfer")
    with pytest.raises(KernelChildError, match="flashinfer_jit_cache is importable"):
        check_isolation(family)
    assert not marker.exists()
    monkeypatch.setattr(flashinfer, "_STATE", {})
    monkeypatch.setattr(tvm_ffi, "load_module", tvm_ffi.load_module)
    monkeypatch.setenv("FLASHINFER_WORKSPACE_BASE", "restored after the test")
    build = tmp_path / "copy.build"
    build.mkdir(mode=0o700)
    try:
        family.before_import(tree, build)
        family._import_bare(tree)  # the pinned import, without the child's check
        assert marker.exists(), "the pinned jit/env.py did not import the planted package"
    finally:
        for name in [n for n in sys.modules if n.startswith(("flashinfer", "flashinfer_"))]:
            del sys.modules[name]


class _StandIn:
    """FlashInfer's five entries' contracts in plain torch, on CPU: only to exercise the
    family's glue (inputs as vLLM gives them, draws per row, the output rows), never judged
    as FlashInfer."""

    @staticmethod
    def _check_param(param, reference):
        """FlashInfer 0.7.2.post1's check_tensor_param (csrc/sampling_utils.h): one value per
        input row, whatever ``indices`` holds (sampling.cuh reads it at indices[i])."""
        if param.ndim != 1 or param.shape[0] != reference.shape[0]:
            raise ValueError("Sampling parameter tensor batch size mismatch")

    @staticmethod
    def top_p_sampling_from_probs(probs, top_p, indices=None, deterministic=True, seed=None,
                                  offset=None):
        import torch

        _StandIn._check_param(top_p, probs)
        assert indices.ndim == 1 and deterministic
        g = torch.Generator().manual_seed(seed)
        return torch.multinomial(probs[indices.long()], 1, generator=g).view(-1).to(
            indices.dtype)

    @staticmethod
    def top_k_sampling_from_probs(probs, top_k, indices=None, deterministic=True, seed=None,
                                  offset=None):
        _StandIn._check_param(top_k, probs)
        return _StandIn.top_p_sampling_from_probs(probs, top_k.float(), indices,
                                                  deterministic, seed, offset)

    @staticmethod
    def top_k_top_p_sampling_from_logits(logits, top_k, top_p, indices=None,
                                         deterministic=True, seed=None, offset=None):
        _StandIn._check_param(top_k, logits)
        _StandIn._check_param(top_p, logits)
        return _StandIn.top_p_sampling_from_probs(logits.softmax(-1), top_p, indices,
                                                  deterministic, seed, offset)


def _loaded_library(tmp_path, monkeypatch, data=b"\x7fELF first build"):
    """A stand-in sampling module spec whose library (under a 0700 build folder) was loaded
    through the family's real load guard, as the child does after the pinned import."""
    import types

    from harness.families import flashinfer

    build, tree = tmp_path / "copy.build", tmp_path / "copy" / "tree"
    build.mkdir(mode=0o700)
    (tree / "flashinfer").mkdir(parents=True)
    (tree / "flashinfer" / "sampling.py").write_bytes(b"# pinned\n")
    so = build / "cached_ops" / "sampling" / "sampling.so"
    so.parent.mkdir(parents=True)
    so.write_bytes(data)
    ninja = so.parent / "build.ninja"
    ninja.write_text(f"build {so}: link {tree}/flashinfer/data/csrc/sampling.cu\n")
    spec = types.SimpleNamespace(jit_library_path=str(so), ninja_path=str(ninja))
    module = types.SimpleNamespace(gen_sampling_module=lambda: spec)
    monkeypatch.setitem(sys.modules, "flashinfer.jit.sampling", module)
    monkeypatch.setattr(flashinfer, "_STATE", {"build": build, "tree": tree})
    monkeypatch.setattr(flashinfer, "_LOADED", {})
    monkeypatch.setattr(flashinfer, "_REFUSED", [])
    loader = types.SimpleNamespace(load_module=lambda path: path)
    flashinfer._guard_loads(loader, build)
    loader.load_module(str(so))
    return so, tree


def test_a_sampling_path_writes_its_draws_as_a_mask_and_records_the_counts(tmp_path,
                                                                           monkeypatch):
    import torch

    from harness.families.flashinfer import DRAWS, EntryObserver, _Recording

    _loaded_library(tmp_path, monkeypatch)
    family = families.get("flashinfer")
    logits = torch.tensor([[5.0, 4.0, -30.0, -30.0], [0.0, 0.0, 0.0, 0.0]])
    p = torch.tensor([0.9, 0.9])
    for path, entry in (("top-p-sampling", _StandIn.top_p_sampling_from_probs),
                        ("top-k-sampling", _StandIn.top_k_sampling_from_probs),
                        ("top-k-top-p-sampling", _StandIn.top_k_top_p_sampling_from_logits)):
        observer = _Recording(EntryObserver(entry, entry.__name__), family)
        with observer:
            out = family.call(_StandIn, path, "cuda", logits, None, p, 1)
        proof = observer.proof(2)
        assert proof["proven"] and proof["seed"] == 20261201
        draws = proof["draws"]
        assert [sum(c for _, c in row) for row in draws] == [DRAWS, DRAWS]
        for row, counts in enumerate(draws):
            drawn = {t for t, _ in counts}
            assert {i for i in range(4) if out[row, i] != float("-inf")} == drawn
            assert all(out[row, i] == logits[row, i] for i in drawn)


def test_the_sampler_of_a_batch_is_the_one_vllm_0_33_calls():
    """vLLM 0.33.0's flashinfer_sample (vllm/v1/sample/ops/topk_topp_sampler.py): k None ->
    top_p_sampling_from_probs, p None -> top_k_sampling_from_probs, else
    top_k_top_p_sampling_from_logits; a row without top-k carries k = V, without top-p 1.0."""
    family = families.get("flashinfer")
    guess = family.guess_case_path
    assert guess(b"", 2, 100, [100, 100], [0.9, 0.5]) == "top-p-sampling"
    assert guess(b"", 2, 100, [20, 100], [1.0, 1.0]) == "top-k-sampling"
    assert guess(b"", 2, 100, [20, 100], [1.0, 0.9]) == "top-k-top-p-sampling"
    assert guess(b"", 1, 100, [20], [0.9]) == "top-k-top-p-sampling"
    assert family.stable_copy  # the JIT build is keyed by the copy's paths and times


def test_the_jit_library_record_binds_the_guarded_load_to_the_pinned_sources(
        tmp_path, monkeypatch):
    """What the evidence records of FlashInfer's JIT-built object: its sha256 as read from
    the descriptor the load guard opened, and the sources hash of the pinned tree and the
    build file (machine folders replaced by tokens; its text once per child)."""
    import hashlib

    from harness.core.verify_bindings import jit_sources_sha256
    from harness.families import flashinfer
    from harness.kernels.child import copy_digest, tree_digest

    so, tree = _loaded_library(tmp_path, monkeypatch)
    first = flashinfer.jit_library()
    ninja = "build ${BUILD}/cached_ops/sampling/sampling.so: link " \
        "${TREE}/flashinfer/data/csrc/sampling.cu\n"
    assert first["sha256"] == hashlib.sha256(b"\x7fELF first build").hexdigest()
    assert first["bytes"] == 16 and first["built_by_this_child"] is True
    assert first["build_ninja"] == ninja
    assert first["build_ninja_sha256"] == hashlib.sha256(ninja.encode()).hexdigest()
    assert first["sources_tree_sha256"] == tree_digest(copy_digest(tree))
    assert first["sources_sha256"] == jit_sources_sha256(first["sources_tree_sha256"],
                                                         first["build_ninja_sha256"])
    again = flashinfer.jit_library()
    assert "build_ninja" not in again  # the text once per child
    assert again == {k: v for k, v in first.items() if k != "build_ninja"}
    monkeypatch.setattr(flashinfer, "_LOADED", {})
    with pytest.raises(KernelChildError, match="not loaded from the stable copy"):
        flashinfer.jit_library()
