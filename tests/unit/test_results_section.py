"""scripts/results_section.py: the README results section, generated from real bundles
(SYNTHETIC ones here, written by the real bundle writer with the test-only key)."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "assets"))

import synthetic  # noqa: E402

from harness.bundle import write_bundle  # noqa: E402
from harness.keys import load_private_key  # noqa: E402

_spec = importlib.util.spec_from_file_location("results_section",
                                               ROOT / "scripts" / "results_section.py")
assert _spec and _spec.loader
results_section = importlib.util.module_from_spec(_spec)
sys.modules["results_section"] = results_section
_spec.loader.exec_module(results_section)


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """evidence/bundles-like layout: one interpreter bundle and one 'cuda' bundle holding
    the same captured bytes (the synthetic manifest with its backend changed)."""
    root = tmp_path_factory.mktemp("bundles")
    synthetic.write(root / "smoke")
    cuda_manifest = dict(synthetic.MANIFEST, name="synthetic-cuda",
                         backend={**synthetic.MANIFEST["backend"], "required": "cuda"})
    content = dataclasses.replace(
        synthetic.content(), manifest=(json.dumps(cuda_manifest, indent=2) + "\n").encode())
    write_bundle(root / "h200", content, load_private_key(synthetic.SIGNING_KEY),
                 max_bytes=synthetic.MANIFEST["limits"]["max_bundle_bytes"])
    return root


def _readme(tmp_path: Path, section: str) -> Path:
    readme = tmp_path / "README.md"
    readme.write_text(f"# title\n\nintro\n\n{section}\n## After\n\ntext\n", "utf-8")
    return readme


def test_section_holds_the_figures(bundles: Path) -> None:
    text = results_section.generate(bundles)
    assert text.startswith(results_section.BEGIN + "\n## Results")
    assert text.endswith(results_section.END + "\n")
    assert "### synthetic-test-fixture" in text and "### synthetic-cuda" in text
    assert "- Verdict: **PASS** over 7 rows (0 stopped)" in text
    # the synthetic stock side masks every forced row: it lost the token on all 4 at 1e30
    assert ("stock lost the forced token on 4 of 4 rows (forced values 1e30); "
            "patched held on 4 of 4") in text
    assert "Triton's interpreter on the CPU (not GPU evidence)" in text
    assert "0 better, 3 equal, 0 worse" in text
    assert "### CUDA (`h200`) against the interpreter (`smoke`)" in text
    assert "- 7 row(s) share case id, label and identical captured logits" in text
    assert "- stock: same kept count on 7 of 7, identical kept set on 7 of 7." in text


def test_check_passes_on_current_and_fails_on_stale(bundles: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    section = results_section.generate(bundles)
    readme = _readme(tmp_path, section)
    assert results_section.main(["--bundles", str(bundles), "--check", str(readme)]) == 0

    stale = _readme(tmp_path, section.replace("**PASS**", "**STOP**", 1))
    assert results_section.main(["--bundles", str(bundles), "--check", str(stale)]) == 1
    assert "out of date" in capsys.readouterr().err

    assert results_section.main(["--bundles", str(bundles), "--write", str(stale)]) == 0
    assert results_section.main(["--bundles", str(bundles), "--check", str(stale)]) == 0
    assert stale.read_text("utf-8").endswith("\n## After\n\ntext\n")


def test_check_refuses_missing_markers_and_tampered_bundles(bundles: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]
                                                            ) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# no markers\n", "utf-8")
    assert results_section.main(["--bundles", str(bundles), "--check", str(readme)]) == 2
    assert "results:begin" in capsys.readouterr().err

    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(bundles / "smoke", copy / "smoke")
    rows = copy / "smoke" / "results" / "rows.json"
    rows.write_bytes(rows.read_bytes().replace(b"true", b"True", 1))  # same size, new bytes
    assert results_section.main(["--bundles", str(copy)]) == 2
    assert "does not match its receipt digest" in capsys.readouterr().err


def test_no_bundles_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert results_section.main(["--bundles", str(tmp_path)]) == 2
    assert "no bundle" in capsys.readouterr().err
