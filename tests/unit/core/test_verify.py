"""The offline verifier on synthetic bundles: good passes, every defect is refused with a
typed error, parallel equals serial, and the verifier loads no torch/triton/vLLM."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.core.errors import (
    BindingMismatchError,
    HarnessDriftError,
    MalformedEvidenceError,
    SignatureError,
    UsageError,
    VerificationError,
    VerificationInternalError,
)
from harness.core.keys import load_public_key
from harness.core.verify import verify_bundle

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "assets"))
import synthetic  # noqa: E402

PUB = load_public_key(synthetic.SIGNING_PUB)


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    return synthetic.write(tmp_path_factory.mktemp("v") / "good").path


@pytest.fixture
def copy(good, tmp_path) -> Path:
    target = tmp_path / "bundle"
    shutil.copytree(good, target)
    return target


def test_good_bundle_verifies(good):
    result = verify_bundle(good, PUB, strict=True, workers=1)
    assert result.verdict == {"verdict": "PASS", "reasons": [], "rows": 7, "rows_stopped": 0}
    assert result.rows == 7 and result.cases == 2 and result.artifacts == 14
    assert result.harness_matches
    assert result.keyid == "9aee0a6518caf58e952a7e10af43dd29795e4e42ba536283eb89080650b99752"


def test_parallel_rerun_equals_serial_and_pure_equals_fast(good):
    # Each mode must reproduce the receipt's rows exactly, so they agree with each other.
    results = [verify_bundle(good, PUB, workers=w, fast=f) for w in (1, 2) for f in (False, True)]
    assert len({(r.verdict["verdict"], r.rows, r.manifest_sha256) for r in results}) == 1
    assert [r.workers for r in results] == [1, 1, 2, 2]


def test_a_stop_bundle_verifies_and_reports_stop(tmp_path):
    written = synthetic.write(tmp_path / "stop", damage=True)
    assert written.statement["predicate"]["verdict"]["verdict"] == "STOP"
    result = verify_bundle(written.path, PUB, workers=1)
    assert result.verdict["verdict"] == "STOP"
    assert "missing_oracle_token" in result.verdict["reasons"]


def test_a_failed_side_has_no_output_file_and_still_verifies(tmp_path):
    written = synthetic.write(tmp_path / "timeout", stock_failure="timeout")
    assert not (written.path / "outputs/stock/ordinary-s1-b3-v100.out.f32.mask.xz").exists()
    result = verify_bundle(written.path, PUB, workers=1)
    assert result.verdict["verdict"] == "STOP" and "timeout" in result.verdict["reasons"]


def test_wrong_public_key_is_a_signature_error(good):
    with pytest.raises(SignatureError):
        verify_bundle(good, load_public_key(synthetic.OTHER_PUB))


def test_frozen_manifest_matching_and_not(good, tmp_path):
    manifest = tmp_path / "synthetic.json"
    raw = (good / "manifest.json").read_bytes()
    manifest.write_bytes(raw)
    from harness.core.digest import sha256sum_line

    (tmp_path / "synthetic.json.sha256").write_text(sha256sum_line(raw, "synthetic.json"))
    result = verify_bundle(good, PUB, frozen_manifest=manifest)
    assert result.frozen_manifest == result.manifest_sha256
    assert verify_bundle(good, PUB, frozen_manifest=tmp_path / "synthetic.json.sha256"
                         ).frozen_manifest == result.manifest_sha256
    other = tmp_path / "other.json.sha256"
    other.write_text("0" * 64 + "  other.json\n")
    with pytest.raises(BindingMismatchError) as info:
        verify_bundle(good, PUB, frozen_manifest=other)
    # labelled the right way round: the frozen hash is what the auditor said
    assert f"the frozen manifest says {'0' * 64}, found {result.manifest_sha256}" in str(
        info.value)
    # everything wrong with the argument itself is a usage error (exit 2), not exit 4
    with pytest.raises(UsageError, match="No such file"):
        verify_bundle(good, PUB, frozen_manifest=tmp_path / "missing.json")
    with pytest.raises(UsageError, match="No such file"):
        verify_bundle(good, PUB, frozen_manifest=tmp_path / "missing.json.sha256")
    (tmp_path / "edited.json").write_bytes(raw + b" ")
    (tmp_path / "edited.json.sha256").write_text(sha256sum_line(raw, "edited.json"))
    with pytest.raises(UsageError, match="does not match its own"):
        verify_bundle(good, PUB, frozen_manifest=tmp_path / "edited.json")
    (tmp_path / "unfrozen.json").write_bytes(raw)
    with pytest.raises(UsageError, match="no frozen hash file"):
        verify_bundle(good, PUB, frozen_manifest=tmp_path / "unfrozen.json")


def test_symlinked_artifact_is_refused(copy, tmp_path):
    target = copy / "report.md"
    moved = tmp_path / "report.md"
    shutil.move(target, moved)
    target.symlink_to(moved)
    with pytest.raises(MalformedEvidenceError, match="symbolic link"):
        verify_bundle(copy, PUB)


def test_unexpected_exception_inside_verification_fails_closed(good, monkeypatch):
    import harness.core.verify as verify_module

    def boom(*a, **k):
        raise ZeroDivisionError("bug")

    monkeypatch.setattr(verify_module, "check_files", boom)
    with pytest.raises(VerificationInternalError, match="ZeroDivisionError"):
        verify_bundle(good, PUB)


def test_harness_difference_is_reported_and_fatal_only_when_strict(good, monkeypatch):
    import harness.core.provenance as provenance_module

    monkeypatch.setattr(provenance_module, "installed_digest",
                        lambda algorithm: {"algorithm": algorithm, "sha256": "f" * 64,
                                           "files": 1})
    lax = verify_bundle(good, PUB)
    assert not lax.harness_matches and lax.harness_local == "f" * 64
    with pytest.raises(HarnessDriftError):
        verify_bundle(good, PUB, strict=True)


# --- committed tamper fixtures (one defect per named directory) ----------------------------

TAMPER = ROOT / "tests" / "assets" / "tamper"
EXPECTED = json.loads((TAMPER / "EXPECTED.json").read_text())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_committed_tamper_fixture(name):
    expected = EXPECTED[name]
    if expected["code"] is None:
        assert verify_bundle(TAMPER / name, PUB).verdict["verdict"] == "PASS"
        return
    with pytest.raises(VerificationError) as info:
        verify_bundle(TAMPER / name, PUB, strict=expected["strict"])
    assert info.value.code == expected["code"], str(info.value)
    assert "\n" not in str(info.value)


def test_fixtures_regenerate_with_the_same_outcomes(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    import make_tamper_fixtures

    names = make_tamper_fixtures.build(tmp_path)
    assert sorted(names) == sorted(EXPECTED)
    assert json.loads((tmp_path / "EXPECTED.json").read_text()) == EXPECTED
    for name in names:
        committed = {p.relative_to(TAMPER / name): p for p in (TAMPER / name).rglob("*")}
        fresh = {p.relative_to(tmp_path / name): p for p in (tmp_path / name).rglob("*")}
        assert sorted(committed) == sorted(fresh), name
        for rel, path in committed.items():  # byte for byte: regenerate, then commit
            if path.is_file():
                assert path.read_bytes() == fresh[rel].read_bytes(), f"{name}/{rel}"
        if EXPECTED[name]["code"] is None:
            continue
        with pytest.raises(VerificationError) as info:
            verify_bundle(tmp_path / name, PUB, strict=EXPECTED[name]["strict"])
        assert info.value.code == EXPECTED[name]["code"]


def test_every_file_of_a_bundle_is_bound(copy):
    """One flipped bit at the start, middle and end of every file: always refused."""
    files = sorted(p for p in copy.rglob("*") if p.is_file())
    assert len(files) == 16
    for path in files:
        original = path.read_bytes()
        for offset in {0, len(original) // 2, len(original) - 1}:
            data = bytearray(original)
            data[offset] ^= 0x01
            path.write_bytes(bytes(data))
            with pytest.raises(VerificationError):
                verify_bundle(copy, PUB, workers=1)
        path.write_bytes(original)
    verify_bundle(copy, PUB, workers=1)


# --- the verifier's dependency surface -----------------------------------------------------


def test_verifier_loads_no_torch_triton_or_vllm(good):
    script = textwrap.dedent(f"""
        import sys
        import harness.core.verify
        from harness.cli import main
        rc = main(["verify", {str(good)!r}, "--pubkey", {str(synthetic.SIGNING_PUB)!r},
                   "--workers", "1"])
        heavy = sorted(m for m in sys.modules
                       if m.split(".")[0] in ("torch", "triton", "vllm"))
        print("RC", rc, "HEAVY", heavy)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "RC 0 HEAVY []" in done.stdout, done.stdout + done.stderr


def test_verifier_works_without_numpy(good):
    """The base install has no numpy: the pure paths must verify the same bundle."""
    script = textwrap.dedent(f"""
        import sys
        class NoNumpy:
            def find_spec(self, name, path=None, target=None):
                if name == "numpy" or name.startswith("numpy."):
                    raise ImportError("numpy blocked for this test")
        sys.meta_path.insert(0, NoNumpy())
        from harness.cli import main
        rc = main(["verify", {str(good)!r}, "--pubkey", {str(synthetic.SIGNING_PUB)!r},
                   "--workers", "2"])
        print("RC", rc, "NUMPY", "numpy" in sys.modules)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert "RC 0 NUMPY False" in done.stdout, done.stdout + done.stderr


def test_open_bundle_gives_digest_checked_bytes(good, copy):
    from harness.core.verify import open_bundle

    view = open_bundle(good, PUB)
    assert view.stored_path("manifest.json") == "manifest.json"
    assert view.raw("manifest.json") == (good / "manifest.json").read_bytes()
    assert len(view.raw("outputs/patched/forced-v64.out.f32")) == 4 * 4 * 64
    stored = open_bundle(copy, PUB).stored_path("inputs/forced-v64.logits.f32")
    data = bytearray((copy / stored).read_bytes())
    data[-1] ^= 1
    (copy / stored).write_bytes(bytes(data))
    with pytest.raises(BindingMismatchError):
        open_bundle(copy, PUB).raw("inputs/forced-v64.logits.f32")
    with pytest.raises(MalformedEvidenceError):
        view.raw("inputs/none.logits.f32")


def test_kernel_drift_in_evidence_must_have_stopped_the_run(tmp_path):
    import dataclasses
    import json as json_module

    from harness.capture.bundle_writer import write_bundle
    from harness.capture.signing import load_private_key

    content = synthetic.content()
    drifted = {side: json_module.dumps({**json_module.loads(content.evidence[side]),
                                        "kernel_sha256": "2" * 64}).encode()
               for side in ("stock", "patched")}
    key = load_private_key(synthetic.SIGNING_KEY)
    silent = dataclasses.replace(content, evidence=drifted)
    write_bundle(tmp_path / "silent", silent, key)
    with pytest.raises(BindingMismatchError, match="without a stop"):
        verify_bundle(tmp_path / "silent", PUB, workers=1)
    from harness.core.gate import verdict

    honest = synthetic.rereport(dataclasses.replace(
        silent, run_stops=["evidence_drift"], verdict=verdict(content.rows, ["evidence_drift"])))
    write_bundle(tmp_path / "honest", honest, key)
    assert verify_bundle(tmp_path / "honest", PUB, workers=1).verdict["verdict"] == "STOP"


def test_split_path_flags_are_bound_to_the_kernel_evidence(tmp_path):
    """A signer cannot mark cases off the split path (which relaxes the forced-row rule)
    while the kernel evidence proves the split path, nor drop the proof without a stop."""
    import dataclasses
    import json as json_module

    from harness.capture.bundle_writer import write_bundle
    from harness.capture.signing import load_private_key

    content = synthetic.content()
    key = load_private_key(synthetic.SIGNING_KEY)
    flags_off = {case_id: False for case_id in content.split_path}
    relaxed = dataclasses.replace(content, split_path=flags_off)
    write_bundle(tmp_path / "relaxed", relaxed, key)
    with pytest.raises(BindingMismatchError, match="split-path flag vs the kernel evidence"):
        verify_bundle(tmp_path / "relaxed", PUB, workers=1)

    unproven = {side: json_module.dumps({
        **json_module.loads(content.evidence[side]),
        "cases": [{"id": c, "split": {"proven": False}} for c in content.case_ids]}).encode()
        for side in ("stock", "patched")}
    silent = dataclasses.replace(relaxed, evidence=unproven)
    write_bundle(tmp_path / "silent", silent, key)
    with pytest.raises(BindingMismatchError, match="without split-path proof"):
        verify_bundle(tmp_path / "silent", PUB, workers=1)
