"""A tree whose kernel cannot be imported on CUDA is refused before any child runs (issue 37,
item 4).

An exported tree (``sources export``) holds the closure's Python files but neither the
compiled extensions' ``.so`` files nor ``setup.py``, so its pin names no placeholder and
``import vllm._C`` at the top of ``vllm/platforms/cuda.py`` fails in a CUDA kernel child:
both sides crashed and the answer blamed the change. ``pr`` on CUDA now refuses such a pin
with the module, file and line, naming the release to give instead; in Triton's interpreter
the kernel uses the CPU platform, so the same tree runs there (docs/ci.md's recipes gate
exported trees so). The same tree with its ``setup.py`` (or a wheel's ``.so``) passes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.core.errors import UsageError
from harness.pins import pinning
from harness.pins.closure import unmet_imports
from harness.pr import flow

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_pinning import FILES, _write_tree  # noqa: E402

EXPORTED = {k: v for k, v in FILES.items() if not k.endswith(".so")}
SETUP_PY = b'ext_modules = [CMakeExtension(name="vllm._C")]\n'
EXPORT = Path("/tmp/topp-gate-test-export")


def _pin(tmp_path: Path, files: dict[str, bytes]) -> Path:
    tree = _write_tree(tmp_path / "tree", files)
    out = tmp_path / "pin.json"
    pinning.pin(str(tree), out, cache=tmp_path / "cache")
    return out


def test_an_exported_tree_is_refused_on_cuda_and_runs_in_the_interpreter(tmp_path):
    pin = _pin(tmp_path, EXPORTED)
    with pytest.raises(UsageError, match=r"the base \(pin.json: vllm 9.9.9\) cannot be imported "
                       r"on CUDA: vllm/platforms/cuda.py line 1 imports vllm\._C,.*"
                       r"\(vllm==9\.9\.9\).*--backend interpreter"):
        flow.check_importable(pin, "base", "cuda", tmp_path / "cache", None)
    flow.check_importable(pin, "base", "interpreter", tmp_path / "cache", None)


def test_the_same_tree_with_its_setup_py_passes_on_cuda(tmp_path):
    pin = _pin(tmp_path, {**EXPORTED, "setup.py": SETUP_PY})
    flow.check_importable(pin, "base", "cuda", tmp_path / "cache", None)


def test_only_unconditional_imports_of_the_package_count():
    files = {**EXPORTED, "vllm/platforms/cuda.py":
             b"try:\n    import vllm._C\nexcept ImportError:\n    pass\n"
             b"if x:\n    import vllm._D\nfrom vllm import _E\nimport vllm.missing.mod\n"}
    assert unmet_imports(["vllm/platforms/cuda.py"], files, files.__getitem__) == [
        ("vllm.missing.mod", "vllm/platforms/cuda.py", 8)]
    assert unmet_imports(["vllm/platforms/cuda.py"], FILES, FILES.__getitem__) == []


@pytest.mark.skipif(not EXPORT.is_dir(), reason="no exported trees (topp-gate sources export)")
def test_pr_of_two_exported_trees_on_cuda_is_refused_before_anything_runs(
        tmp_path, signing_key, capsys, monkeypatch):
    trees = sorted(p for p in EXPORT.iterdir() if (p / "vllm").is_dir())
    monkeypatch.setattr(flow, "choose_backend", lambda requested: "cuda")  # as on a GPU
    out = tmp_path / "out"
    assert main(["pr", str(trees[0]), "--change", str(trees[-1]), "--key", str(signing_key),
                 "--out", str(out), "--cache", str(tmp_path / "cache")]) == 2
    err = capsys.readouterr().err
    assert "the base" in err and "_C_stable_libtorch" in err and "the change broke" not in err
    assert not out.exists()


@pytest.mark.sources
def test_the_pytorch_paths_pinned_tree_passes_on_cuda_its_module_imports_never_run():
    # vLLM's PyTorch path pins the sampler file alone, and its child loads the functions,
    # never the module: the file's own top-level imports (vllm._aiter_ops, ...) are neither
    # pinned nor run. The check refused this tree on the first GPU call of issue 39.
    from harness.families import get
    from harness.pins.pinfile import load_pin_file
    from harness.pins.sources import cache_root, resolve_tree

    pin = Path(__file__).resolve().parents[3] / "evidence/pins/vllm-pytorch-0.33.0.json"
    side = load_pin_file(pin).side("stock")
    try:
        tree = resolve_tree(side, cache=cache_root())
    except Exception as err:  # noqa: BLE001 - the tree is fetched by 'sources pin'
        pytest.skip(f"vLLM 0.33.0's PyTorch tree is not in the cache ({err})")
    files = sorted(side.files)
    assert unmet_imports(files, files, lambda rel: (tree / rel).read_bytes(), "vllm")
    assert get("vllm-pytorch").runs_module_code is False
    flow.check_importable(pin, "base", "cuda", None, None)
