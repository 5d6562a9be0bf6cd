"""Hostile bundles and arguments (issue 9): nothing hangs, memory stays bounded, nothing is
hidden, nothing drives the terminal, and no path looks like a verdict.

Defects git cannot store (a FIFO, an unreadable or empty folder, a very deep tree) are made
here, at test time, on a copy of the committed ``good`` fixture. Anything that could hang
runs in a subprocess with a timeout, so a regression fails instead of hanging the suite.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.capture.signing import load_private_key
from harness.core.errors import (
    BindingMismatchError,
    MalformedEvidenceError,
    SignatureError,
    UsageError,
)
from harness.core.keys import load_public_key
from harness.core.verify import verify_bundle

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "assets"))
import synthetic  # noqa: E402

TAMPER = ROOT / "tests" / "assets" / "tamper"
PUB = load_public_key(synthetic.SIGNING_PUB)
PUB_PATH = str(synthetic.SIGNING_PUB)
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
ESC = "\x1b"


@pytest.fixture
def copy(tmp_path) -> Path:
    target = tmp_path / "bundle"
    shutil.copytree(TAMPER / "good", target)
    return target


def _cli(*args: str, timeout: float = 60, prefix: tuple[str, ...] = ()
         ) -> subprocess.CompletedProcess[str]:
    """``topp-gate ARGS`` in a fresh interpreter, killed after ``timeout`` seconds."""
    return subprocess.run([*prefix, sys.executable, "-m", "harness", *args], env=ENV,
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout)


# --- nothing hangs: FIFOs are refused, never opened for reading ---------------------------


@pytest.mark.parametrize("name", ["receipt.dsse.json", "receipt.json", "manifest.json"])
def test_a_fifo_in_the_bundle_is_refused_without_hanging(copy, name):
    (copy / name).unlink()
    os.mkfifo(copy / name)
    done = _cli("verify", str(copy), "--pubkey", PUB_PATH, timeout=60)
    assert done.returncode == 4, done.stderr
    assert "malformed_evidence" in done.stderr and done.stderr.count("\n") == 1


@pytest.mark.parametrize("flag", ["--pubkey", "--frozen-manifest"])
def test_a_fifo_as_an_argument_is_a_usage_error_without_hanging(tmp_path, flag):
    fifo = tmp_path / ("x.pub" if flag == "--pubkey" else "m.json.sha256")
    os.mkfifo(fifo)
    args = ["verify", str(TAMPER / "good"), "--pubkey", PUB_PATH, flag, str(fifo)]
    done = _cli(*args, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "not a regular file" in done.stderr and done.stderr.count("\n") == 1


def test_a_fifo_as_the_manifest_or_its_hash_file_is_a_usage_error(tmp_path):
    manifest = tmp_path / "m.json"
    manifest.write_bytes((TAMPER / "good" / "manifest.json").read_bytes())
    os.mkfifo(tmp_path / "m.json.sha256")
    done = _cli("verify", str(TAMPER / "good"), "--pubkey", PUB_PATH,
                "--frozen-manifest", str(manifest), timeout=60)
    assert done.returncode == 2 and "not a regular file" in done.stderr, done.stderr


def test_run_key_as_a_fifo_is_a_usage_error_without_hanging(tmp_path):
    from harness.capture.signing import load_private_key as load

    fifo = tmp_path / "signing.key"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="not a regular file"):
        load(fifo, owner_only=True)


# --- the tree is exactly what the receipt implies -------------------------------------------


def test_an_extra_empty_folder_is_refused(copy):
    (copy / "outputs" / "scratch").mkdir()
    with pytest.raises(MalformedEvidenceError, match="folder the receipt does not imply"):
        verify_bundle(copy, PUB, workers=1)


def test_three_thousand_nested_folders_are_a_clean_refusal(copy):
    fd = os.open(copy / "inputs", os.O_RDONLY)
    try:
        for _ in range(3000):  # relative to a descriptor: no path is ever too long
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)
    try:
        done = _cli("verify", str(copy), "--pubkey", PUB_PATH, timeout=120)
    finally:
        _remove_chain(copy / "inputs", "d")
    assert done.returncode == 4, done.stderr
    assert "deeper than" in done.stderr and "Recursion" not in done.stderr


def _remove_chain(top, name):
    """Remove a deep chain top/name/name/... bottom-up through descriptors (pytest's own
    recursive cleanup of the temporary folder would hit Python's recursion limit)."""
    fds = [os.open(top, os.O_RDONLY)]
    try:
        while True:
            try:
                fds.append(os.open(name, os.O_RDONLY, dir_fd=fds[-1]))
            except FileNotFoundError:
                break
        for parent in reversed(fds[:-1]):
            os.rmdir(name, dir_fd=parent)
    finally:
        for fd in fds:
            os.close(fd)


def test_an_unreadable_folder_is_a_failure_not_skipped(copy):
    """Root reads any folder, so the verifier runs with the capabilities that bypass
    permissions dropped (setpriv); as an ordinary user the chmod alone is enough."""
    hidden = copy / "outputs" / "hidden"
    hidden.mkdir()
    (hidden / "payload.bin").write_bytes(b"not named by the receipt")
    hidden.chmod(0)
    prefix: tuple[str, ...] = ()
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("needs setpriv to drop CAP_DAC_OVERRIDE as root")
        prefix = (setpriv, "--bounding-set=-dac_override,-dac_read_search")
    try:
        done = _cli("verify", str(copy), "--pubkey", PUB_PATH, timeout=60, prefix=prefix)
    finally:
        hidden.chmod(0o755)
    assert done.returncode == 4, done.stderr
    assert "cannot read bundle folder 'outputs/hidden'" in done.stderr, done.stderr


# --- nothing raw reaches the terminal -------------------------------------------------------


def test_an_escape_named_file_is_refused_and_printed_escaped():
    done = _cli("verify", str(TAMPER / "escape_named_file"), "--pubkey", PUB_PATH)
    assert done.returncode == 4
    assert ESC not in done.stderr and ESC not in done.stdout
    assert "\\x1b[2K\\rverdict: PASS" in done.stderr
    assert done.stderr.count("\n") == 1


def test_an_escape_in_a_bundle_path_is_printed_escaped(tmp_path):
    target = tmp_path / f"bundle{ESC}[2K"
    shutil.copytree(TAMPER / "good", target)
    done = _cli("verify", str(target), "--pubkey", PUB_PATH, "--workers", "1")
    assert done.returncode == 0, done.stderr
    assert ESC not in done.stdout and "bundle\\x1b[2K" in done.stdout


# --- memory follows the layout, never the signer's declarations ------------------------------


@pytest.mark.parametrize("name", ["decompression_bomb_resigned",
                                  "decompression_bomb_true_size_resigned"])
def test_a_decompression_bomb_is_refused_before_inflating_with_bounded_memory(name):
    # measured by a fresh parent whose only child is this verify: this process's own
    # RUSAGE_CHILDREN maximum also holds every earlier test's children
    done = _cli("verify", str(TAMPER / name), "--pubkey", PUB_PATH, "--workers", "1",
                prefix=(sys.executable, "-c", _PEAK_OF_CHILD))
    assert done.returncode == 4 and "malformed_evidence" in done.stderr, done.stderr
    assert "inputs/forced-v64.logits.f32" in done.stderr
    peak_kib = int(done.stderr.rsplit("peak_kib=", 1)[1])
    assert 0 < peak_kib < 1 << 20  # KiB: under 1 GiB


# run argv[1:] as the only child, pass its output through, then say its peak RSS (KiB)
_PEAK_OF_CHILD = (
    "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
    "sys.stderr.write(f'peak_kib={resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}'); "
    "sys.exit(r.returncode)")


def test_the_bomb_is_refused_even_with_a_frozen_manifest(tmp_path):
    from harness.core.digest import sha256sum_line

    raw = (TAMPER / "good" / "manifest.json").read_bytes()
    (tmp_path / "m.json").write_bytes(raw)
    (tmp_path / "m.json.sha256").write_text(sha256sum_line(raw, "m.json"))
    with pytest.raises(MalformedEvidenceError, match="declares"):
        verify_bundle(TAMPER / "decompression_bomb_resigned", PUB,
                      frozen_manifest=tmp_path / "m.json")


@pytest.mark.slow
def test_verifying_a_full_size_case_stays_under_1_gib(tmp_path):
    """A bundle whose one case is at the verifier's ceiling (64 x 262144 float32 values per
    array): peak RSS of the verifying process, numpy path and 2 worker processes."""
    from harness.core.limits import MAX_CASE_VALUES

    manifest = json.loads(json.dumps(synthetic.MANIFEST))
    manifest["limits"].update(max_vocab=262144, max_bundle_bytes=1 << 30)
    manifest["cases"] = [{"id": "ordinary-big", "kind": "ordinary", "seed": 3,
                          "batch": 64, "vocab": 262144}]
    assert 64 * 262144 == MAX_CASE_VALUES
    script = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(ROOT / "tests" / "assets")!r})
        import synthetic
        synthetic.MANIFEST = json.loads({json.dumps(json.dumps(manifest))})
        synthetic.write(__import__("pathlib").Path({str(tmp_path / "big")!r}))
    """)
    subprocess.run([sys.executable, "-c", script], env=ENV, check=True, timeout=600)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(f"""
            import resource, subprocess, sys
            done = subprocess.run([sys.executable, "-m", "harness", "verify",
                                   {str(tmp_path / "big")!r}, "--pubkey", {PUB_PATH!r},
                                   "--workers", "2"], capture_output=True, text=True)
            print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
            print(done.stderr)
        """)], env=ENV, capture_output=True, text=True, timeout=600)
    code, peak_kib = done.stdout.split()[:2]
    assert code == "0", done.stdout
    assert int(peak_kib) < 1 << 20, f"peak RSS {int(peak_kib) >> 10} MiB"


def test_a_case_over_the_verifier_ceiling_is_refused_before_reading(tmp_path):
    from harness.core.verify_artifacts import check_sizes

    manifest = dict(synthetic.MANIFEST, cases=[{"id": "huge", "kind": "ordinary", "seed": 1,
                                                "batch": 64, "vocab": 262145}])
    from harness.core.manifest import case_layout

    layout = [case_layout(manifest["cases"][0])]

    class NoArtifacts:
        subjects: dict = {}

    with pytest.raises(MalformedEvidenceError, match="over this verifier's ceiling"):
        check_sizes(NoArtifacts(), layout, None, {"rows": []})  # type: ignore[arg-type]


# --- the DSSE envelope's shape before any cryptography -------------------------------------


class CountingKey:
    """The real public key, counting signature checks."""

    def __init__(self, key):
        self.key, self.calls = key, 0

    def verify(self, sig, message):
        self.calls += 1
        return self.key.verify(sig, message)

    def public_bytes(self, *args):
        return self.key.public_bytes(*args)


def test_500k_signatures_are_refused_before_any_is_checked(copy):
    from harness.core import dsse

    envelope = json.loads((copy / "receipt.dsse.json").read_bytes())
    real = envelope["signatures"][0]
    key = CountingKey(PUB)
    # 500k copies of the real signature: more than the envelope file may hold (16 MiB),
    # so counted by the DSSE reader itself
    envelope["signatures"] = [real] * 500_000
    with pytest.raises(MalformedEvidenceError, match="500000 signatures"):
        dsse.verify(json.dumps(envelope).encode(), key, exact=True)  # type: ignore[arg-type]
    # 500k short entries fit in the file: the verifier counts them before any crypto
    envelope["signatures"] = [real] + [{"sig": ""}] * 499_999
    (copy / "receipt.dsse.json").write_bytes(json.dumps(envelope).encode())
    with pytest.raises(MalformedEvidenceError, match="500000 signatures"):
        verify_bundle(copy, key, workers=1)  # type: ignore[arg-type]
    assert key.calls == 0


def _flip_spare_bits(sig: str) -> str:
    """Same 64 bytes, another spelling: a 64-byte value ends in one byte + '==', whose
    second character carries 4 unused bits."""
    import string

    alphabet = string.ascii_uppercase + string.ascii_lowercase + string.digits + "+/"
    assert sig.endswith("==")
    return sig[:-3] + alphabet[alphabet.index(sig[-3]) ^ 1] + "=="


@pytest.mark.parametrize("mutate", [
    lambda e: e["signatures"][0].update(sig=e["signatures"][0]["sig"].replace("+", "-")
                                        .replace("/", "_")),
    lambda e: e["signatures"][0].update(sig=e["signatures"][0]["sig"] + "AAAA"),
    lambda e: e["signatures"][0].update(sig=_flip_spare_bits(e["signatures"][0]["sig"])),
], ids=["urlsafe-alphabet", "long-signature", "spare-bits"])
def test_non_canonical_envelopes_are_refused_before_cryptography(copy, mutate):
    envelope = json.loads((copy / "receipt.dsse.json").read_bytes())
    before = json.dumps(envelope)
    mutate(envelope)
    if json.dumps(envelope) == before:
        pytest.skip("this mutation does not apply to the fixture's base64")
    (copy / "receipt.dsse.json").write_bytes(json.dumps(envelope).encode())
    key = CountingKey(PUB)
    with pytest.raises((MalformedEvidenceError, SignatureError)):
        verify_bundle(copy, key, workers=1)  # type: ignore[arg-type]
    assert key.calls == 0


# --- a dishonest signer ------------------------------------------------------------------------


def _write(tmp_path: Path, content) -> Path:
    synthetic_key = load_private_key(synthetic.SIGNING_KEY)
    from harness.capture.bundle_writer import write_bundle

    return write_bundle(tmp_path / "b", content, synthetic_key).path


def test_duplicate_keys_in_the_manifest_are_refused():
    with pytest.raises(MalformedEvidenceError, match="duplicate JSON key 'name'"):
        verify_bundle(TAMPER / "duplicate_key_manifest_resigned", PUB, workers=1)


def test_duplicate_keys_in_cases_json_are_refused(tmp_path):
    content = synthetic.content()
    cases = content.cases.replace(b'"schema": "topp-gate/cases/v1",',
                                  b'"schema": "x", "schema": "topp-gate/cases/v1",', 1)
    assert cases != content.cases
    bundle = _write(tmp_path, dataclasses.replace(content, cases=cases))
    with pytest.raises(BindingMismatchError, match="cases.json vs the case layout"):
        verify_bundle(bundle, PUB, workers=1)
    from harness.core.cases_index import parse_cases_index

    with pytest.raises(MalformedEvidenceError, match="duplicate JSON key"):
        parse_cases_index(cases)


@pytest.mark.parametrize("field", ["logits_sha256", "p_sha256", "output_sha256"])
def test_evidence_hashes_must_be_the_artifacts(tmp_path, field):
    content = synthetic.content()
    evidence = json.loads(content.evidence["patched"])
    evidence["cases"][0][field] = "0" * 64
    forged = dataclasses.replace(
        content, evidence={**content.evidence,
                           "patched": json.dumps(evidence, indent=2).encode() + b"\n"})
    bundle = _write(tmp_path, synthetic.rereport(forged))
    with pytest.raises(BindingMismatchError, match=f"patched kernel evidence {field}"):
        verify_bundle(bundle, PUB, workers=1)


def test_evidence_without_backend_is_refused(tmp_path):
    content = synthetic.content()
    evidence = json.loads(content.evidence["stock"])
    del evidence["backend"]
    forged = dataclasses.replace(
        content, evidence={**content.evidence,
                           "stock": json.dumps(evidence, indent=2).encode() + b"\n"})
    bundle = _write(tmp_path, synthetic.rereport(forged))
    with pytest.raises(MalformedEvidenceError, match="stock kernel-path evidence names no "
                                                    "backend"):
        verify_bundle(bundle, PUB, workers=1)


def test_a_report_stating_another_verdict_is_refused(tmp_path):
    content = synthetic.content(damage=True)  # a STOP
    assert content.verdict["verdict"] == "STOP"
    report = content.reports["report.md"].replace(b"STOP", b"PASS")
    assert report != content.reports["report.md"]
    bundle = _write(tmp_path, dataclasses.replace(content, reports={"report.md": report}))
    with pytest.raises(BindingMismatchError, match="report.md vs the report regenerated"):
        verify_bundle(bundle, PUB, workers=1)


def test_the_committed_bundles_reports_are_what_the_generator_makes():
    """The committed evidence keeps verifying with report.md bound (the same check runs
    in scripts/verify_committed.sh); here on the small smoke bundle."""
    bundle = next((ROOT / "evidence/bundles").glob("smoke-interpreter-*"))
    result = verify_bundle(bundle, load_public_key(ROOT / "evidence/keys/topp-gate-evidence.pub"),
                           workers=1)
    assert result.verdict["verdict"] == "STOP"
