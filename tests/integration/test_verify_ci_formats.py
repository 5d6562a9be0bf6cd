"""``verify --vsa`` and ``--junit`` (issue 29 item 4), on real bundles: the VSA against a JSON
Schema written from the SLSA VSA v1 text (tests/assets/ci-schemas/slsa-vsa-v1.schema.json)
and its DSSE signature checked with the public key by an independent PAE; the JUnit file
against the Jenkins xunit plugin's junit-10.xsd (tests/assets/junit/, MIT) with xmlschema."""

from __future__ import annotations

import base64
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from harness.capture.signing import write_keypair
from harness.cli import main
from harness.core.errors import EXIT_OK, EXIT_STOP, EXIT_USAGE, EXIT_VERIFY

xmlschema = pytest.importorskip("xmlschema")

ROOT = Path(__file__).resolve().parents[2]
ASSETS = ROOT / "tests" / "assets"
GOOD = ASSETS / "tamper" / "good"  # a PASS, signed by the test-only key
TEST_PUB = ASSETS / "keys" / "test-only-signing.pub"
STOP = ROOT / "evidence" / "bundles" / "smoke-interpreter-20261129"  # a committed STOP
REFUSED = ASSETS / "tamper" / "input_bit_flipped"
VSA_SCHEMA = json.loads((ASSETS / "ci-schemas" / "slsa-vsa-v1.schema.json").read_text())
JUNIT_XSD = ASSETS / "junit" / "junit-10.xsd"


@pytest.fixture
def vsa_key(tmp_path):
    (tmp_path / "keys").mkdir()
    private, public, _ = write_keypair(tmp_path / "keys" / "ci")
    return private, public


def _pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding, written here from the DSSE spec (byte lengths)."""
    t = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def _open_vsa(path: Path, public: Path) -> dict:
    envelope = json.loads(path.read_text())
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    payload = base64.b64decode(envelope["payload"])
    [signature] = envelope["signatures"]
    key = load_pem_public_key(public.read_bytes())
    key.verify(base64.b64decode(signature["sig"]), _pae(envelope["payloadType"], payload))
    return json.loads(payload)


def _verify_json(bundle: Path, *extra: str, capsys) -> dict:
    capsys.readouterr()  # what earlier commands printed
    main(["verify", str(bundle), "--json", *extra])
    return json.loads(capsys.readouterr().out)


def test_a_verified_pass_gets_a_signed_passed_vsa_of_the_vsa_v1_shape(tmp_path, vsa_key, capsys):
    private, public = vsa_key
    out = tmp_path / "vsa.json"
    code = main(["verify", str(GOOD), "--pubkey", str(TEST_PUB), "--vsa", str(out),
                 "--vsa-key", str(private), "--vsa-verifier-id", "https://ci.example/verify"])
    assert code == EXIT_OK
    assert "VSA (PASSED) written" in capsys.readouterr().err
    vsa = _open_vsa(out, public)
    jsonschema.Draft202012Validator(VSA_SCHEMA).validate(vsa)
    facts = _verify_json(GOOD, "--pubkey", str(TEST_PUB), capsys=capsys)
    predicate = vsa["predicate"]
    assert predicate["verificationResult"] == "PASSED"
    assert predicate["verifier"]["id"] == "https://ci.example/verify"
    assert vsa["subject"][0]["digest"] == {"sha256": facts["payload_sha256"]}
    assert predicate["resourceUri"].endswith(facts["payload_sha256"])
    assert predicate["policy"]["uri"] == f"urn:topp-gate:rules:{facts['rules']}"
    assert predicate["policy"]["digest"] == {"sha256": facts["manifest_sha256"]}
    import hashlib
    envelope = (GOOD / "receipt.dsse.json").read_bytes()
    assert predicate["inputAttestations"] == [{
        "name": "receipt.dsse.json",
        "digest": {"sha256": hashlib.sha256(envelope).hexdigest()}}]
    assert not any(level.startswith("SLSA_") for level in predicate["verifiedLevels"])


def test_a_verified_stop_gets_a_failed_vsa_and_a_junit_failure_per_stopped_row(
        tmp_path, vsa_key, capsys):
    private, public = vsa_key
    vsa_out, junit_out = tmp_path / "vsa.json", tmp_path / "junit.xml"
    code = main(["verify", str(STOP), "--vsa", str(vsa_out), "--vsa-key", str(private),
                 "--junit", str(junit_out)])
    assert code == EXIT_STOP
    vsa = _open_vsa(vsa_out, public)
    jsonschema.Draft202012Validator(VSA_SCHEMA).validate(vsa)
    assert vsa["predicate"]["verificationResult"] == "FAILED"
    assert vsa["predicate"]["verifiedLevels"] == ["FAILED"]

    xmlschema.XMLSchema(str(JUNIT_XSD)).validate(str(junit_out))
    facts = _verify_json(STOP, capsys=capsys)
    suite = ET.parse(junit_out).getroot().find("testsuite")
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["verdict"] == "STOP" and properties["rules"] == facts["rules"]
    cases = suite.findall("testcase")
    assert len(cases) == facts["rows"] and suite.get("tests") == str(facts["rows"])
    failed = [c for c in cases if c.find("failure") is not None]
    assert len(failed) == facts["rows_stopped"] == int(suite.get("failures"))
    by_reason: dict[str, int] = {}
    for case in failed:
        for reason in case.find("failure").get("message").split(", "):
            by_reason[reason] = by_reason.get(reason, 0) + 1
    assert by_reason == facts["stopped_rows_by_reason"]
    assert all("/" in c.get("classname") and "[" in c.get("name") for c in cases)


def test_junit_of_a_pass_validates_and_has_no_failure(tmp_path):
    out = tmp_path / "junit.xml"
    assert main(["verify", str(GOOD), "--pubkey", str(TEST_PUB), "--junit", str(out)]) == 0
    xmlschema.XMLSchema(str(JUNIT_XSD)).validate(str(out))
    root = ET.parse(out).getroot()
    assert root.find("testsuite").get("failures") == "0"
    assert root.find(".//failure") is None


def test_junit_xsd_refuses_a_wrong_file(tmp_path):
    """The vendored schema does reject: a testsuite without its required counts."""
    bad = tmp_path / "bad.xml"
    bad.write_text('<testsuites><testsuite name="x"><testcase name="r"/></testsuite>'
                   "</testsuites>")
    assert not xmlschema.XMLSchema(str(JUNIT_XSD)).is_valid(str(bad))


def test_a_refused_bundle_writes_neither_file_and_says_so(tmp_path, vsa_key, capsys):
    private, _ = vsa_key
    vsa_out, junit_out = tmp_path / "vsa.json", tmp_path / "junit.xml"
    code = main(["verify", str(REFUSED), "--pubkey", str(TEST_PUB), "--vsa", str(vsa_out),
                 "--vsa-key", str(private), "--junit", str(junit_out)])
    assert code == EXIT_VERIFY
    err = capsys.readouterr().err
    assert "no --vsa and --junit file written" in err and "binding_mismatch" in err
    assert not vsa_out.exists() and not junit_out.exists()
    assert list(tmp_path.iterdir()) == [tmp_path / "keys"]  # no temporary file left either


@pytest.mark.parametrize("args,needle", [
    (["--vsa", "{tmp}/v.json"], "--vsa OUT and --vsa-key KEY go together"),
    (["--vsa-key", "{key}"], "--vsa OUT and --vsa-key KEY go together"),
    (["--junit", "{tmp}/no/such/folder/j.xml"], "its folder does not exist"),
    (["--vsa", "{tmp}/v.json", "--vsa-key", "{pub}"], "holds a public key"),
])
def test_usage_mistakes_exit_2_before_any_rerun(tmp_path, vsa_key, capsys, args, needle):
    private, public = vsa_key
    argv = [a.format(tmp=tmp_path, key=private, pub=public) for a in args]
    assert main(["verify", str(GOOD), "--pubkey", str(TEST_PUB), *argv]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert needle in err and "verified bundle" not in err
