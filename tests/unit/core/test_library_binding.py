"""The library a run-time built kernel loaded is bound to its pinned sources (issue 27 item
3): ``verify`` requires every case of a side to name one library sha256 and the recorded
``sources_sha256`` to be the one computed from the manifest's pinned tree digest and the
recorded build file; evidence older than the binding verifies as ``unbound (legacy
evidence)``, which ``--require-library-binding`` refuses. Real signed synthetic bundles,
written by the project's writer and signed with the test-only key (a signer that lies)."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.capture.bundle_writer import write_bundle
from harness.capture.signing import load_private_key
from harness.cli import main
from harness.core.digest import sha256_hex
from harness.core.errors import BindingMismatchError, MalformedEvidenceError
from harness.core.keys import load_public_key
from harness.core.verify import verify_bundle
from harness.core.verify_bindings import jit_sources_sha256
from harness.probes import fixture

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "assets"))
import synthetic  # noqa: E402

PUB = load_public_key(synthetic.SIGNING_PUB)
PINNED_TREE = synthetic.MANIFEST_V3["sources"]["sides"]["stock"]["tree_sha256"]
NINJA = "rule cuda_compile\n  command = nvcc -I${TREE}/flashinfer/data/include $in\n"
NINJA_SHA = sha256_hex(NINJA.encode())
LIBRARY = "a" * 64


def _library(sha: str = LIBRARY, sources: str | None = None, tree: str = PINNED_TREE,
             text: str | None = None) -> dict[str, Any]:
    lib = {"sha256": sha, "bytes": 4245184, "built_by_this_child": False,
           "build_ninja_sha256": NINJA_SHA, "sources_tree_sha256": tree,
           "sources_sha256": sources or jit_sources_sha256(tree, NINJA_SHA)}
    if text is not None:
        lib["build_ninja"] = text
    return lib


def _write(dest: Path, libraries: list[dict[str, Any] | None], *,
           family: str | None = "flashinfer") -> Path:
    """A v3 synthetic bundle whose sides' evidence names ``family`` and carries, case by
    case, ``libraries[i]`` in the path proof (None: no ``jit_library``)."""
    bundle = fixture.content(synthetic.MANIFEST_V3, sources=synthetic.SOURCES_V3)
    evidence = {}
    for side, raw in bundle.evidence.items():
        value = json.loads(raw)
        if family is not None:
            value["family"] = family
        for record, lib in zip(value["cases"], libraries, strict=True):
            if lib is not None:
                record["split"]["jit_library"] = lib
        evidence[side] = (json.dumps(value, indent=2) + "\n").encode()
    bundle = fixture.with_report(dataclasses.replace(bundle, evidence=evidence),
                                 synthetic.MANIFEST_V3)
    write_bundle(dest, bundle, load_private_key(synthetic.SIGNING_KEY),
                 max_bytes=synthetic.MANIFEST_V3["limits"]["max_bundle_bytes"])
    return dest


def test_a_bound_library_verifies_as_bound(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    out = _write(tmp_path / "b", [_library(text=NINJA), _library()])
    assert verify_bundle(out, PUB).library_binding == "bound"
    assert verify_bundle(out, PUB, require_library_binding=True).library_binding == "bound"
    assert main(["verify", str(out), "--pubkey", str(synthetic.SIGNING_PUB), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["library_binding"] == "bound"


def test_two_library_hashes_in_one_side_are_refused(tmp_path: Path):
    out = _write(tmp_path / "b", [_library(), _library(sha="b" * 64)])
    with pytest.raises(BindingMismatchError, match="stock loaded library across cases"):
        verify_bundle(out, PUB)
    assert main(["verify", str(out), "--pubkey", str(synthetic.SIGNING_PUB)]) == 4


@pytest.mark.parametrize("lie", ["sources", "tree", "ninja-text"])
def test_a_source_hash_not_computed_from_the_pin_is_refused(tmp_path: Path, lie: str):
    wrong = {"sources": _library(sources="c" * 64),
             "tree": _library(tree="d" * 64),
             "ninja-text": _library(text=NINJA + "# another flag\n")}[lie]
    out = _write(tmp_path / "b", [_library(), wrong])
    with pytest.raises(BindingMismatchError, match="stock case .*(sources|build file)"):
        verify_bundle(out, PUB)


def test_a_case_without_the_fields_beside_bound_ones_is_refused(tmp_path: Path):
    out = _write(tmp_path / "b", [_library(), {"sha256": LIBRARY, "bytes": 1}])
    with pytest.raises(MalformedEvidenceError, match="lacks the binding fields"):
        verify_bundle(out, PUB)


@pytest.mark.parametrize("libraries", [[None, None],
                                       [{"sha256": LIBRARY, "bytes": 1,
                                         "built_by_this_child": False}] * 2])
def test_legacy_evidence_verifies_as_unbound_unless_the_binding_is_required(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], libraries: list[Any]):
    out = _write(tmp_path / "b", libraries)
    assert verify_bundle(out, PUB).library_binding == "unbound (legacy evidence)"
    assert main(["verify", str(out), "--pubkey", str(synthetic.SIGNING_PUB)]) == 0
    assert "kernel library: unbound (legacy evidence)" in capsys.readouterr().out
    with pytest.raises(BindingMismatchError, match="--require-library-binding"):
        verify_bundle(out, PUB, require_library_binding=True)
    assert main(["verify", str(out), "--pubkey", str(synthetic.SIGNING_PUB),
                 "--require-library-binding", "--json"]) == 4
    result = json.loads(capsys.readouterr().out)
    assert result["verified"] is False and "unbound (legacy evidence)" in result["detail"]


def test_a_family_without_a_built_library_is_not_applicable(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]):
    out = _write(tmp_path / "b", [None, None], family="vllm-triton")
    assert verify_bundle(out, PUB, require_library_binding=True).library_binding == \
        "not applicable"
    assert main(["verify", str(out), "--pubkey", str(synthetic.SIGNING_PUB)]) == 0
    assert "kernel library" not in capsys.readouterr().out



def test_a_side_of_the_binding_that_loaded_no_library_is_unbound():
    """A child of the binding (its evidence says what its isolation checked) that stopped
    before its first case bound no library: never reported as bound, nor as legacy."""
    from harness.core.manifest import parse_manifest
    from harness.core.verify_bindings import check_library_binding

    manifest = parse_manifest(fixture.manifest_bytes(synthetic.MANIFEST_V3))
    stopped = {"family": "flashinfer", "isolation": {}, "cases": []}
    bound = {"family": "flashinfer", "cases": [{"id": "c", "split": {"jit_library":
                                                                      _library()}}]}
    assert check_library_binding(manifest, {"kernel_path": {
        "stock": stopped, "patched": bound}}) == "unbound (no library loaded)"
    assert check_library_binding(manifest, {"kernel_path": {
        "stock": bound, "patched": bound}}) == "bound"
    assert check_library_binding(manifest, {"kernel_path": {
        "stock": None, "patched": {"status": "kernel_crash", "reason": "x"}}}) == \
        "not applicable"
