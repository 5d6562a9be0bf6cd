"""A tree whose kernel import cannot work is refused at pinning (issue 37, item 4).

An exported tree (``sources export``) holds the closure's Python files but neither the
compiled extensions' ``.so`` files nor ``setup.py``, so ``import vllm._C`` at the top of
``vllm/platforms/cuda.py`` fails in the kernel child: both sides crashed and the answer
blamed the change. Pinning such a tree is now refused with the module, file and line, and
names what to pin instead; the same tree with its ``setup.py`` (or a wheel's ``.so``) pins.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.core.errors import SourcesError
from harness.pins import pinning
from harness.pins.closure import unmet_imports

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_pinning import FILES, _write_tree  # noqa: E402

EXPORTED = {k: v for k, v in FILES.items() if not k.endswith(".so")}
SETUP_PY = b'ext_modules = [CMakeExtension(name="vllm._C")]\n'
EXPORT = Path("/tmp/topp-gate-test-export")


def test_an_exported_tree_without_the_compiled_names_is_refused_at_pinning(tmp_path, capsys):
    tree = _write_tree(tmp_path / "tree", EXPORTED)
    with pytest.raises(SourcesError, match=r"vllm/platforms/cuda.py line 1 imports vllm\._C,"):
        pinning.pin(str(tree), tmp_path / "pin.json", cache=tmp_path / "cache")
    assert main(["sources", "pin", str(tree), "--out", str(tmp_path / "pin.json"),
                 "--cache", str(tmp_path / "cache")]) == 2
    err = capsys.readouterr().err
    assert "vllm==9.9.9" in err and "Traceback" not in err
    assert not (tmp_path / "pin.json").exists()


def test_the_same_tree_with_its_setup_py_pins():
    with_setup = {**EXPORTED, "setup.py": SETUP_PY}
    assert unmet_imports(["vllm/platforms/cuda.py"], with_setup, with_setup.__getitem__) == []
    assert unmet_imports(["vllm/platforms/cuda.py"], FILES, FILES.__getitem__) == []


def test_only_unconditional_imports_of_the_package_count():
    files = {**EXPORTED, "vllm/platforms/cuda.py":
             b"try:\n    import vllm._C\nexcept ImportError:\n    pass\n"
             b"if x:\n    import vllm._D\nfrom vllm import _E\nimport vllm.missing.mod\n"}
    assert unmet_imports(["vllm/platforms/cuda.py"], files, files.__getitem__) == [
        ("vllm.missing.mod", "vllm/platforms/cuda.py", 8)]


@pytest.mark.skipif(not EXPORT.is_dir(), reason="no exported trees (topp-gate sources export)")
def test_pr_of_two_exported_trees_is_refused_before_anything_runs(tmp_path, signing_key, capsys):
    trees = sorted(p for p in EXPORT.iterdir() if (p / "vllm").is_dir())
    out = tmp_path / "out"
    assert main(["pr", str(trees[0]), "--change", str(trees[-1]), "--backend", "interpreter",
                 "--key", str(signing_key), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "_C_stable_libtorch" in err and "the change broke" not in err
    assert not out.exists()
