"""End to end on CPU: the frozen smoke manifest through `topp-gate run` in Triton's
interpreter with the real pinned vLLM kernels, then `topp-gate verify`, then a comparison
with the committed smoke bundle (evidence/bundles/smoke-interpreter-*): same captured
inputs, same kernel outputs, same per-row results, same verdict.

This is CI's end-to-end test. It needs the pinned wheels (scripts/test fetches them).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.core.errors import EXIT_OK, EXIT_STOP
from harness.core.keys import load_public_key
from harness.core.verify import open_bundle

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "evidence/manifests/smoke-interpreter.json"
KEYS = ROOT / "tests/assets/keys"
EVIDENCE_KEY = ROOT / "evidence/keys/topp-gate-evidence.pub"

pytestmark = [pytest.mark.slow, pytest.mark.sources]


def _committed_smoke_bundle() -> Path:
    bundles = sorted((ROOT / "evidence/bundles").glob("smoke-interpreter-*"))
    assert bundles, "no committed smoke bundle"
    return bundles[-1]


def _subjects(bundle: Path) -> dict[str, str]:
    statement = json.loads((bundle / "receipt.json").read_bytes())
    return {s["name"]: s["digest"]["sha256"] for s in statement["subject"]}


RUN_CODES: dict[Path, int] = {}


@pytest.fixture(scope="module")
def fresh_bundle(tmp_path_factory: pytest.TempPathFactory, signing_key: Path) -> Path:
    out = tmp_path_factory.mktemp("e2e") / "smoke"
    code = main(["run", "--manifest", str(MANIFEST), "--out", str(out),
                 "--key", str(signing_key)])
    assert code in (EXIT_OK, EXIT_STOP)
    RUN_CODES[out] = code
    return out


def test_fresh_run_verifies_offline(fresh_bundle: Path, capsys: pytest.CaptureFixture[str]):
    code = main(["verify", str(fresh_bundle), "--pubkey", str(KEYS / "test-only-signing.pub"),
                 "--frozen-manifest", str(MANIFEST)])
    out = capsys.readouterr().out
    # verify exits with the verified verdict's code: the same as the run's (1 for a STOP)
    assert code == RUN_CODES[fresh_bundle], out
    assert "identical to the receipt" in out


def test_fresh_run_refuses_the_wrong_key(fresh_bundle: Path):
    assert main(["verify", str(fresh_bundle), "--pubkey",
                 str(KEYS / "test-only-other.pub")]) == 4


def _kernel_runtime(bundle: Path) -> dict[str, tuple[str, str, str]]:
    """Per side: the (python, torch, triton) its kernel evidence says ran."""
    found = {}
    for side in ("stock", "patched"):
        evidence = json.loads((bundle / "outputs" / side / "evidence.json").read_bytes())
        found[side] = (evidence["python"], evidence["torch"], evidence["triton"])
    return found


def test_fresh_run_reproduces_the_committed_smoke_bundle(fresh_bundle: Path):
    """What must hold on any torch, Triton and Python (nixpkgs' included, docs/nix.md):
    the same manifest, the same captured input bytes (torch's CPU generator), the same
    per-row gate results and the same verdict as the committed smoke bundle."""
    committed = _committed_smoke_bundle()
    fresh = _subjects(fresh_bundle)
    old = _subjects(committed)
    data = [n for n in old if n in ("cases.json", "manifest.json") or n.startswith("inputs/")]
    assert data
    assert {n: fresh.get(n) for n in data} == {n: old[n] for n in data}
    fresh_view = open_bundle(fresh_bundle, load_public_key(KEYS / "test-only-signing.pub"))
    old_view = open_bundle(committed, load_public_key(EVIDENCE_KEY))
    fresh_rows = json.loads(fresh_view.raw("results/rows.json"))
    old_rows = json.loads(old_view.raw("results/rows.json"))
    assert fresh_rows == old_rows
    old_verdict = json.loads((committed / "receipt.json").read_bytes())["predicate"]["verdict"]
    new_verdict = json.loads((fresh_bundle / "receipt.json").read_bytes())["predicate"]["verdict"]
    assert new_verdict == old_verdict


def test_fresh_run_has_the_committed_kernel_output_bytes_on_the_same_runtime(fresh_bundle):
    """Byte-identical kernel outputs are required only where Python, torch and Triton are
    the versions the committed bundle ran (its kernel evidence says which): another Triton
    may order a reduction differently and still keep the same tokens."""
    committed = _committed_smoke_bundle()
    if _kernel_runtime(fresh_bundle) != _kernel_runtime(committed):
        pytest.skip(f"this runtime {_kernel_runtime(fresh_bundle)['stock']} is not the "
                    f"committed bundle's {_kernel_runtime(committed)['stock']}")
    fresh = _subjects(fresh_bundle)
    old = _subjects(committed)
    outputs = [n for n in old if ".out.f32" in n]
    assert outputs
    assert {n: fresh.get(n) for n in outputs} == {n: old[n] for n in outputs}


def test_an_unusable_output_location_is_refused_before_anything_runs(tmp_path, capsys,
                                                                     signing_key):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    code = main(["run", "--manifest", str(MANIFEST), "--out", str(blocker / "bundle"),
                 "--key", str(signing_key)])
    assert code == 2
    assert "for the bundle" in capsys.readouterr().err


def test_missing_parent_folders_are_created(tmp_path):
    from harness.capture.run import _prepare_parent

    _prepare_parent(tmp_path / "runs" / "deep" / "bundle")
    assert (tmp_path / "runs" / "deep").is_dir()
    assert not (tmp_path / "runs" / "deep" / "bundle").exists()
