"""The code that ran is the code that was pinned (issue 17), with real vLLM trees in
Triton's interpreter.

Each attack puts other code where a kernel child would import it while the pin still
names the pinned files; the shadow code, if it runs, leaves a marker file. The child
imports only a private copy of the pinned files (read through no link, hashed after
copying) with bytecode read only from a fresh empty prefix, so no marker appears and the
evidence names exactly the pinned bytes:

* a ``__pycache__`` folder link inside a ``--sources`` tree (refused by the tree check, and
  ignored by a child given that tree);
* a stale shadowing ``.pyc`` beside a source file, planted after the tree was checked;
* a closure file changed after the check, while the run builds its cases (signed bundle).
"""

from __future__ import annotations

import importlib._bootstrap_external as external
import json
import shutil
from pathlib import Path

import pytest

from harness.capture import run as run_module
from harness.cli import main
from harness.core.errors import EvidenceDriftError
from harness.kernels.runner import run_side
from harness.pins import sources
from harness.pins.pinfile import load_pin_file

ROOT = Path(__file__).resolve().parents[2]
PINS = ROOT / "evidence/pins"
KEYS = ROOT / "tests/assets/keys"
KERNEL = "vllm/v1/sample/ops/topk_topp_triton.py"
VOCAB = 1024

pytestmark = [pytest.mark.slow, pytest.mark.sources]


def _side(version: str = "0.30.0") -> sources.Side:
    return load_pin_file(PINS / f"vllm-{version}.json").side("stock")


def _tree_copy(side: sources.Side, dest: Path) -> Path:
    """A writable copy of the side's verified tree (from the cache), as --sources reads it."""
    tree = dest / side.digest
    shutil.copytree(sources.resolve_tree(side, cache=sources.cache_root()), tree)
    return tree


def _shadow_code(marker: Path) -> bytes:
    return f"\nopen({str(marker)!r}, 'w').close()\n".encode()


def _plant_pyc(source: Path, pyc: Path, marker: Path) -> None:
    """Bytecode of ``source`` plus the marker line, with a header naming the source's time
    and size: the import system takes it for the source's own cache."""
    info = source.stat()
    code = compile(source.read_bytes() + _shadow_code(marker), str(source), "exec",
                   dont_inherit=True)
    pyc.parent.mkdir(parents=True, exist_ok=True)
    pyc.write_bytes(external._code_to_timestamp_pyc(code, int(info.st_mtime), info.st_size))


def _cases(root: Path) -> Path:
    import torch

    logits = torch.randn(2, VOCAB, generator=torch.Generator().manual_seed(3))
    logits[0, 5] = 1e30
    (root / "l.f32").write_bytes(logits.numpy().astype("<f4").tobytes())
    p = torch.tensor([0.9, 0.5], dtype=torch.float32)
    (root / "p.f32").write_bytes(p.numpy().astype("<f4").tobytes())
    path = root / "cases.json"
    path.write_text(json.dumps({"schema": "topp-gate/cases/v1", "cases": [{
        "id": "c", "kind": "forced", "batch": 2, "vocab": VOCAB, "logits": "l.f32",
        "p": "p.f32", "rows": []}]}))
    return path


def _assert_pinned_ran(result, side: sources.Side, marker: Path) -> None:
    assert result.ok, (result.reason, result.stderr_tail)
    assert not marker.exists(), "code outside the pinned files ran"
    assert result.evidence["kernel_sha256"] == side.kernel_sha256
    assert result.evidence["tree_sha256"] == side.digest


def test_a_pycache_folder_link_in_a_sources_tree(tmp_path: Path):
    side = _side()
    tree = _tree_copy(side, tmp_path / "sources")
    marker = tmp_path / "shadow-ran"
    kernel = tree / KERNEL
    elsewhere = tmp_path / "elsewhere"
    _plant_pyc(kernel, Path(external.cache_from_source(str(elsewhere / kernel.name))), marker)
    (kernel.parent / "__pycache__").symlink_to(elsewhere / "__pycache__",
                                               target_is_directory=True)
    with pytest.raises(EvidenceDriftError, match="link"):
        sources.resolve_tree(side, cache=tmp_path / "cache", sources=tmp_path / "sources")
    # a child given that tree anyway (checked earlier, linked since) imports the copy only
    result = run_side(side, tree, "interpreter", 2, _cases(tmp_path), tmp_path / "out",
                      timeout_s=600)
    _assert_pinned_ran(result, side, marker)


def test_a_stale_shadowing_pyc_beside_a_source_file(tmp_path: Path):
    side = _side()
    tree = _tree_copy(side, tmp_path / "sources")
    sources.verify_tree(side, tree)  # checked, then the bytecode appears
    marker = tmp_path / "shadow-ran"
    kernel = tree / KERNEL
    _plant_pyc(kernel, Path(external.cache_from_source(str(kernel))), marker)
    result = run_side(side, tree, "interpreter", 2, _cases(tmp_path), tmp_path / "out",
                      timeout_s=600)
    _assert_pinned_ran(result, side, marker)


def test_a_closure_file_changed_while_the_run_builds_its_cases(tmp_path: Path, signing_key,
                                                                monkeypatch):
    export = tmp_path / "sources"
    assert main(["sources", "export", str(export), "--pin", str(PINS / "vllm-0.30.0.json"),
                 "--pin", str(PINS / "vllm-0.33.0.json")]) == 0
    manifest = tmp_path / "m.json"
    assert main(["manifest", "new", "--stock", str(PINS / "vllm-0.30.0.json"),
                 "--patched", str(PINS / "vllm-0.33.0.json"), "--matrix",
                 "forced-interpreter", "--out", str(manifest)]) == 0
    stock = _side("0.30.0")
    closure_file = export / stock.digest / "vllm/v1/sample/ops/__init__.py"
    assert "vllm/v1/sample/ops/__init__.py" in stock.files
    marker = tmp_path / "changed-file-ran"
    real_write_cases = run_module.write_cases

    def change_then_build(*args, **kwargs):  # after the tree check, before any child
        with closure_file.open("ab") as handle:
            handle.write(_shadow_code(marker))
        return real_write_cases(*args, **kwargs)

    monkeypatch.setattr(run_module, "write_cases", change_then_build)
    out = tmp_path / "bundle"
    code = main(["run", "--manifest", str(manifest), "--out", str(out), "--key",
                 str(signing_key), "--sources", str(export)])
    assert code in (0, 1)
    assert not marker.exists(), "a closure file changed after the check ran"
    predicate = json.loads((out / "receipt.json").read_bytes())["predicate"]
    evidence = predicate["kernel_path"]["stock"]
    assert evidence["tree_sha256"] == stock.digest  # the bytes imported: the pinned ones
    assert evidence["kernel_sha256"] == stock.kernel_sha256
    assert main(["verify", str(out), "--pubkey", str(KEYS / "test-only-signing.pub"),
                 "--frozen-manifest", str(manifest)]) == code
