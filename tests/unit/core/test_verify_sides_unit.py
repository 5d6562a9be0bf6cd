"""harness.core.verify_sides: what a reviewer's ``--require-*`` specs mean, and how a side's
recorded isolation and the signing key's kind are told (issue 35)."""

from __future__ import annotations

import hashlib

import pytest

from harness.core.errors import UsageError
from harness.core.verify_sides import (
    NOT_RECORDED,
    Requirements,
    describe_isolation,
    describe_required,
    describe_reused,
    describe_signing,
    package_name,
    parse_side_spec,
    patch_requirement,
    recorded,
)


@pytest.mark.parametrize("family,package", [
    ("vllm-triton", "vllm"), ("vllm-pytorch", "vllm"), ("flashinfer", "flashinfer")])
def test_a_family_is_versioned_as_its_distribution(family, package):
    assert package_name(family) == package


def test_a_release_spec_is_a_normalised_name_and_an_exact_version():
    req = parse_side_spec("vLLM==0.33.0", "--require-base")
    assert (req.package, req.version, req.pin_sha256) == ("vllm", "0.33.0", None)
    assert parse_side_spec("flash_infer==0.7.2.post1", "--require-base").package == "flash-infer"
    for bad in ("vllm==", "==0.33.0", "vllm===0.33.0", "vllm==0.3 3", "vllm==0.3==1"):
        with pytest.raises(UsageError):
            parse_side_spec(bad, "--require-base")


def test_a_pin_spec_is_its_files_sha256_or_the_hash_itself(tmp_path):
    pin = tmp_path / "pin.json"
    pin.write_bytes(b'{"pin": 1}\n')
    digest = hashlib.sha256(pin.read_bytes()).hexdigest()
    assert parse_side_spec(str(pin), "--require-base").pin_sha256 == digest
    assert parse_side_spec(digest.upper(), "--require-base").pin_sha256 == digest
    assert patch_requirement(str(pin)).pin_sha256 == digest
    with pytest.raises(UsageError, match="not a regular file"):
        parse_side_spec(str(tmp_path), "--require-base")
    with pytest.raises(UsageError, match="cannot read --require-patch diff"):
        patch_requirement(str(tmp_path / "absent.diff"))


def test_requirements_say_what_was_required():
    required = Requirements(base=(parse_side_spec("vllm==0.33.0", "--require-base"),
                                  parse_side_spec("a" * 64, "--require-base")),
                            patch=patch_requirement("b" * 64), isolation=True)
    assert required.any() and not Requirements().any()
    assert required.to_json() == {
        "base": [{"given": "vllm==0.33.0", "release": "vllm==0.33.0"},
                 {"given": "a" * 64, "sha256": "a" * 64}],
        "patch": {"given": "b" * 64, "sha256": "b" * 64}, "isolation": True}
    assert describe_required(required.to_json()) == (
        f"--require-base vllm==0.33.0, --require-base {'a' * 64}, --require-patch {'b' * 64}, "
        "--require-isolation (both sides in a sandbox)")
    named = Requirements(change=(parse_side_spec("vLLM==0.34.0", "--require-change"),))
    assert describe_required(named.to_json()) == "--require-change vLLM==0.34.0 (vllm==0.34.0)"


def _isolation(environment: dict) -> list[str]:
    found = recorded({"environment": environment})
    return [describe_isolation(found["isolation"][side], found["isolation_recorded"])
            for side in ("stock", "patched")]


def test_isolation_is_a_named_sandbox_other_than_none():
    box = {"sandbox": "bubblewrap", "version": "0.8.0", "namespaces": ["user", "net"],
           "environment": "allowlist", "reused_from_bundle": False}
    found = recorded({"environment": {"isolation": {"stock": box,
                                                    "patched": {"sandbox": "none"}}}})
    assert found["isolation"]["stock"]["isolated"] is True
    assert found["isolation"]["patched"]["isolated"] is False
    assert _isolation({}) == [NOT_RECORDED, NOT_RECORDED]
    assert _isolation({"isolation": {"stock": box}}) == [
        "bubblewrap 0.8.0, namespaces user,net, environment allowlist", NOT_RECORDED]
    shown = _isolation({"isolation": {"stock": {**box, "reused_from_bundle": True},
                                      "patched": {"sandbox": "none", "reason": "no bwrap"}}})
    assert shown == ["bubblewrap 0.8.0, namespaces user,net, environment allowlist (recorded "
                     "by the bundle the base was reused from)", "none (not isolated: no bwrap)"]
    for odd in ({"sandbox": ""}, {"sandbox": 1}, {}, "bubblewrap", ["bubblewrap"]):
        entry = recorded({"environment": {"isolation": {"stock": odd}}})["isolation"]["stock"]
        assert entry["isolated"] is False
        assert describe_isolation(entry, True).startswith("unreadable record")
    # a receipt with no environment, or one that is not an object, records nothing
    assert recorded({})["isolation_recorded"] is False
    assert recorded({"environment": {"isolation": []}})["isolation_recorded"] is False


def test_signing_key_and_reused_base_are_told_escaped():
    assert describe_signing(None) is None
    assert describe_signing({"key": "ephemeral"}) == (
        "signed with an ephemeral key: proves consistency of the bundle, not who ran it")
    assert describe_signing({"key": "persistent"}).startswith("signed with a persistent key")
    assert describe_signing({"key": "\x1b[2J"}).startswith("unreadable record")
    assert "\x1b" not in describe_signing({"key": "\x1b[2J"})
    assert describe_reused(None) is None
    assert describe_reused({"bundle": "a\x1bb", "key_sha256": "c" * 64}) == (
        f"a\\x1bb (reuse key sha256 {'c' * 64})")
