"""FlashInfer 0.6.0 and 0.6.1 next to 0.7.2.post1, on a CPU, with each release's real
``flashinfer/jit/env.py`` (and, where apache-tvm-ffi and nvidia-ml-py are importable, its
real ``jit/core.py``, ``jit/cpp_ext.py`` and ``sampling.py``) imported from a copy of the
committed pin's tree through the family's bare packages.

0.6.x has no ``FLASHINFER_AOT_PROVIDERS``: an AOT library comes from ``FLASHINFER_AOT_DIR``
(the package's ``data/aot``, or a ``flashinfer_jit_cache``'s ``get_jit_cache_dir()``), which
``JitSpec.is_aot`` tests before any JIT build. :func:`flashinfer.check_aot_env` accepts it only
as the copy's own, absent ``flashinfer/data/aot``. The trees come from the topp-gate cache
(``sources pin`` put the wheels there) or from the registry: marked ``sources``."""

from __future__ import annotations

import importlib
import inspect
import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from harness.core.errors import KernelChildError
from harness.families import flashinfer
from harness.pins import sources
from harness.pins.pinfile import load_pin_file

ROOT = Path(__file__).resolve().parents[3]
OLD = ("0.6.0", "0.6.1")
ALL = (*OLD, "0.7.2.post1")

pytestmark = [pytest.mark.sources]


def _copy(version: str, tmp_path: Path) -> Path:
    """A private copy of the committed pin's verified tree (the wheel fetched if needed)."""
    side = load_pin_file(ROOT / f"evidence/pins/flashinfer-{version}.json").side("stock")
    cache = sources.cache_root()
    sources.fetch_wheel(side, cache, quiet=True)
    copy = tmp_path / "copy"
    shutil.copytree(sources.resolve_tree(side, cache=cache), copy)
    return copy


def _forget() -> None:
    for name in [n for n in sys.modules
                 if n == "flashinfer" or n.startswith(("flashinfer.", "flashinfer_"))]:
        del sys.modules[name]


@contextmanager
def _pinned(tree: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The child's setting: no FLASHINFER_* but the workspace (a 0700 build folder), bare
    packages for the copy; every flashinfer module forgotten afterwards."""
    for name in [n for n in os.environ if n.startswith("FLASHINFER_")]:
        monkeypatch.delenv(name)
    build = tree.with_name(tree.name + ".build")
    build.mkdir(mode=0o700)
    monkeypatch.setenv("FLASHINFER_WORKSPACE_BASE", str(build))
    saved = {n: m for n, m in sys.modules.items()
             if n == "flashinfer" or n.startswith(("flashinfer.", "flashinfer_"))}
    _forget()
    try:
        yield build
    finally:
        _forget()
        sys.modules.update(saved)


def _env(tree: Path) -> object:
    flashinfer.bare_packages(tree, "flashinfer")
    return importlib.import_module("flashinfer.jit.env")


def _own(tree: Path) -> Path:
    return Path(os.path.realpath(tree)) / "flashinfer" / "data" / "aot"


@pytest.mark.parametrize("version", ALL)
def test_the_real_env_of_each_release_passes_with_the_copys_own_absent_aot_folder(
        version: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    tree = _copy(version, tmp_path)
    with _pinned(tree, monkeypatch):
        env = _env(tree)
        assert Path(env.__file__) == tree / "flashinfer/jit/env.py"
        assert env.FLASHINFER_AOT_DIR == _own(tree)
        form = flashinfer.check_aot_env(env, tree)
        if version in OLD:  # the attribute 0.7.x's check read is not there at all
            assert not hasattr(env, "FLASHINFER_AOT_PROVIDERS")
            assert form.startswith("no FLASHINFER_AOT_PROVIDERS (0.6.x)")
        else:
            assert env.FLASHINFER_AOT_PROVIDERS == ()
            assert form.startswith("FLASHINFER_AOT_PROVIDERS == ()")


@pytest.mark.parametrize("how", ["folder", "file", "dangling-link"])
@pytest.mark.parametrize("version", ALL)
def test_anything_at_the_copys_aot_folder_is_refused(version: str, how: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch):
    tree = _copy(version, tmp_path)
    with _pinned(tree, monkeypatch):
        env = _env(tree)
        aot = _own(tree)
        if how == "folder":
            (aot / "sampling").mkdir(parents=True)
            (aot / "sampling" / "sampling.so").write_bytes(b"not built from the pins")
        elif how == "file":
            aot.write_bytes(b"")
        else:
            aot.symlink_to(tmp_path / "nowhere")
        with pytest.raises(KernelChildError, match="holds flashinfer/data/aot"):
            flashinfer.check_aot_env(env, tree)


@pytest.mark.parametrize("version", OLD)
def test_a_jit_cache_package_moves_the_06_aot_folder_and_is_refused(
        version: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The attack is real on 0.6.x: its ``jit/env.py`` imports a ``flashinfer_jit_cache``
    found on the path and takes its folder as ``FLASHINFER_AOT_DIR`` (no provider tuple to
    look at). The check refuses that folder even where the package itself were missed."""
    tree = _copy(version, tmp_path)
    site, marker, elsewhere = tmp_path / "site", tmp_path / "planted-ran", tmp_path / "aot"
    (site / "flashinfer_jit_cache").mkdir(parents=True)
    (site / "flashinfer_jit_cache" / "__init__.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n__version__ = {version + '+cu130'!r}\n"
        f"def get_jit_cache_dir():\n    return {str(elsewhere)!r}\n")
    monkeypatch.syspath_prepend(str(site))
    with _pinned(tree, monkeypatch):
        env = _env(tree)
        assert marker.exists(), "the pinned jit/env.py did not import the planted package"
        assert env.FLASHINFER_AOT_DIR == elsewhere
        with pytest.raises(KernelChildError, match="is not the pinned copy's own"):
            flashinfer.check_aot_env(env, tree)


def test_a_07_provider_is_still_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    tree = _copy("0.7.2.post1", tmp_path)
    site = tmp_path / "site"
    (site / "flashinfer_jit_cache").mkdir(parents=True)
    (site / "flashinfer_jit_cache" / "__init__.py").write_text(
        "import types\n__version__ = '0.7.2.post1'\n"
        "def get_jit_cache_providers():\n"
        "    return [types.SimpleNamespace(provider_id='p', distribution='d',\n"
        f"        version=__version__, jit_cache_dir={str(tmp_path / 'aot')!r},\n"
        "        cuda_architectures=['sm90a'], modules=['sampling'])]\n")
    monkeypatch.syspath_prepend(str(site))
    with _pinned(tree, monkeypatch):
        env = _env(tree)
        assert len(env.FLASHINFER_AOT_PROVIDERS) == 1
        with pytest.raises(KernelChildError, match="found an AOT provider"):
            flashinfer.check_aot_env(env, tree)


def test_no_env_module_is_refused(tmp_path: Path):
    with pytest.raises(KernelChildError, match="not imported"):
        flashinfer.check_aot_env(None, tmp_path)


# --- the whole pinned import (needs apache-tvm-ffi and nvidia-ml-py; no GPU) ---------------


@pytest.fixture
def tvm_ffi(monkeypatch: pytest.MonkeyPatch):
    module = pytest.importorskip("tvm_ffi")
    pytest.importorskip("pynvml")
    monkeypatch.setattr(module, "load_module", module.load_module)  # the guard wraps it
    monkeypatch.setattr(flashinfer, "_STATE", {})
    return module


ENTRY_PARAMS = {
    "top_p_renorm_probs": ["probs", "top_p"],
    "top_k_renorm_probs": ["probs", "top_k"],
    "top_k_mask_logits": ["logits", "top_k"],
    "top_p_sampling_from_probs": ["probs", "top_p", "indices", "deterministic", "seed",
                                  "offset"],
    "top_k_sampling_from_probs": ["probs", "top_k", "indices", "deterministic", "seed",
                                  "offset"],
    "top_k_top_p_sampling_from_logits": ["logits", "top_k", "top_p", "indices",
                                         "deterministic", "seed", "offset"],
}


@pytest.mark.parametrize("version", OLD)
def test_the_child_imports_06_sampling_through_bare_packages_with_the_guard(
        version: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tvm_ffi):
    tree = _copy(version, tmp_path)
    family = flashinfer.FAMILY
    with _pinned(tree, monkeypatch) as build:
        family.before_import(tree, build)
        module = family.import_kernel(tree)  # the AOT check and the load guard included
        assert Path(module.__file__) == tree / "flashinfer/sampling.py"
        info = family.package_info(module, [n for n in sys.modules
                                            if n.startswith("flashinfer")])
        assert info["flashinfer_version"] == version
        assert info["flashinfer_modules_loaded"] == 12
        assert info["bare_packages"] == ["flashinfer", "flashinfer.jit"]
        assert getattr(tvm_ffi.load_module, "__topp_gate_guard__", False)
        core = sys.modules["flashinfer.jit.core"]
        assert core.tvm_ffi is tvm_ffi  # JitSpec.load calls the guarded loader
        for name, params in ENTRY_PARAMS.items():  # what call() passes, by position and name
            found = list(inspect.signature(getattr(module, name)).parameters)
            positional = 3 if name == "top_k_top_p_sampling_from_logits" else 2
            assert found[:positional] == params[:positional], (name, found)
            assert set(params[positional:]) <= set(found), (name, found)
        # the spec FlashInfer itself would build: AOT exactly when the copy's folder holds it
        spec = core.JitSpec("sampling", [], None, None, None, None)
        assert spec.aot_path == _own(tree) / "sampling" / "sampling.so"
        assert not spec.is_aot
        spec.aot_path.parent.mkdir(parents=True)
        spec.aot_path.write_bytes(b"planted")
        assert spec.is_aot
        with pytest.raises(KernelChildError, match="holds flashinfer/data/aot"):
            flashinfer._check_no_aot(tree)


@pytest.mark.parametrize("version", OLD)
def test_the_06_build_file_takes_cccl_from_the_toolkit_and_normalizes(
        version: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tvm_ffi):
    """0.6.x's ``build.ninja`` as its own ``JitSpec.write_ninja`` writes it (an nvcc that
    only answers ``--version`` stands in for the toolkit; the archs are named): CUB and
    libcu++ come from ``$cuda_home/include/cccl`` (the path is in the file, the headers are
    not pinned); 0.6.0's outputs are relative to ``cached_ops``, 0.6.1's absolute in the build
    folder; after :func:`flashinfer.normalized_ninja` neither machine folder is left."""
    tree = _copy(version, tmp_path)
    cuda = tmp_path / "cuda"
    (cuda / "bin").mkdir(parents=True)
    (cuda / "bin" / "nvcc").write_text(
        "#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n")
    (cuda / "bin" / "nvcc").chmod(0o755)
    monkeypatch.setenv("CUDA_HOME", str(cuda))
    with _pinned(tree, monkeypatch) as build:
        monkeypatch.setenv("FLASHINFER_CUDA_ARCH_LIST", "9.0a")
        flashinfer.bare_packages(tree, "flashinfer")
        spec = importlib.import_module("flashinfer.jit.sampling").gen_sampling_module()
        spec.write_ninja()
        text = spec.ninja_path.read_text("utf-8")
    assert spec.ninja_path.is_relative_to(build)
    assert f"cuda_home = {cuda}" in text
    assert "-isystem $cuda_home/include/cccl" in text and "data/cccl" not in text
    ninja = flashinfer.normalized_ninja(text, build, tree)
    assert str(build) not in ninja and str(tree) not in ninja
    assert "${TREE}/flashinfer/data/csrc/sampling.cu" in ninja
    objects = [line.split(":")[0] for line in ninja.splitlines() if line.startswith("build ")]
    cached = "${BUILD}/.cache/flashinfer/" + version + "/90a/cached_ops/sampling/"
    if version == "0.6.0":
        assert objects[-1] == "build $name/$name.so"
    else:
        assert objects[-1] == f"build {cached}sampling.so"
    assert spec.jit_library_path == build / (cached[len("${BUILD}/"):] + "sampling.so")
