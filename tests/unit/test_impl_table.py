"""scripts/impl_table.py: the implementation table of docs/implementations.md, generated from
the committed receipts (signature checked on open), and the version 3 manifests ``manifest
new`` writes for other families (scripts/impl_manifests.py uses it)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("impl_table", ROOT / "scripts/impl_table.py")
assert _spec and _spec.loader
impl_table = importlib.util.module_from_spec(_spec)
sys.modules["impl_table"] = impl_table
_spec.loader.exec_module(impl_table)


def test_the_committed_table_is_the_generated_one():
    assert impl_table.main(["--check", str(ROOT / "docs/implementations.md")]) == 0
    text = impl_table.generate()
    assert "| vllm-pytorch 0.33.0 `sort` | vllm-triton 0.33.0 `split` |" in text
    assert "**STOP**" in text and "noncanonical_tie" in text
    # the Triton bundle of the deployment matrix sits beside the implementations on its inputs
    lines = [line for line in text.splitlines() if "vocab 32000, 128256, 151936, 262144" in line]
    assert any("<!-- deploy-vllm-0.33.0-cuda -->" in line for line in lines)
    assert any("<!-- h200-deploy-vllm-pytorch-0.33.0-sort-cuda -->" in line for line in lines)


def test_no_bundle_yet_is_said_and_a_stale_readme_is_refused(tmp_path):
    empty = impl_table.generate(tmp_path / "none", beside=())
    assert "no implementation bundle committed yet" in empty
    readme = tmp_path / "README.md"
    readme.write_text(f"x\n{impl_table.BEGIN}\nold\n{impl_table.END}\ny\n")
    assert impl_table.main(["--check", str(readme)]) == 1
    assert impl_table.main(["--write", str(readme)]) == 0
    assert impl_table.main(["--check", str(readme)]) == 0
    assert readme.read_text().startswith("x\n") and readme.read_text().endswith("y\n")


@pytest.mark.sources
def test_manifest_new_writes_version_3_for_another_family(tmp_path):
    from harness.capture.manifest_new import SideSpec, new_manifest
    from harness.core.manifest import load_manifest

    pin = ROOT / "evidence/pins/vllm-pytorch-0.33.0.json"
    matrix = json.loads((ROOT / "harness/data/matrices/forced-interpreter.json").read_text())
    spec = tmp_path / "m.json"
    spec.write_text(json.dumps(matrix))
    out = new_manifest({"stock": SideSpec(pin), "patched": SideSpec(pin, "sort")}, str(spec),
                       tmp_path / "gate.json")
    manifest = load_manifest(out)
    assert manifest.data["schema"] == "topp-gate/manifest/v3"
    assert manifest.rules == "seed/v2"  # no traffic case: the default of manifest new
    assert {s["family"] for s in manifest.sources["sides"].values()} == {"vllm-pytorch"}
    assert {manifest.dispatch(s) for s in ("stock", "patched")} == {"sort"}
    from harness.core.errors import UsageError

    with pytest.raises(UsageError, match="has no path 'split'"):
        new_manifest({"stock": SideSpec(pin, "split"), "patched": SideSpec(pin)}, str(spec),
                     tmp_path / "bad.json")
