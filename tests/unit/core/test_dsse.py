"""DSSE PAE known answers, Ed25519 sign/verify, fail-closed parsing, and an independent
check of our envelopes with securesystemslib's DSSE implementation."""

from __future__ import annotations

import base64
import json

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from harness.capture.signing import sign
from harness.core import dsse
from harness.core.errors import BindingMismatchError, MalformedEvidenceError, SignatureError
from harness.core.keys import keyid


def test_pae_known_answer_from_the_dsse_spec():
    # DSSE protocol v1.0.0, "Test Vectors" section
    # (https://github.com/secure-systems-lab/dsse/blob/master/protocol.md):
    # PAYLOAD_TYPE http://example.com/HelloWorld, SERIALIZED_BODY "hello world".
    assert (dsse.pae("http://example.com/HelloWorld", b"hello world")
            == b"DSSEv1 29 http://example.com/HelloWorld 11 hello world")


def test_pae_counts_bytes_not_characters():
    # Hand-derived: "application/vnd.ex\u00e4mple+json" is 28 characters; UTF-8 encodes the
    # a-umlaut as the two bytes C3 A4, so LEN(type) is 29. The body "\u00e9" is one
    # character and two bytes (C3 A9).
    payload_type = "application/vnd.ex\u00e4mple+json"
    assert len(payload_type) == 28
    expected = (b"DSSEv1 29 application/vnd.ex\xc3\xa4mple+json 2 \xc3\xa9")
    assert dsse.pae(payload_type, "\u00e9".encode()) == expected


def test_pae_empty_body_keeps_the_trailing_space():
    # Per the PAE grammar, an empty body still contributes SP LEN(body) SP: "... 0 ".
    assert dsse.pae(dsse.IN_TOTO_PAYLOAD_TYPE, b"") == b"DSSEv1 28 application/vnd.in-toto+json 0 "


def test_ed25519_known_answer_rfc8032_test1():
    # RFC 8032 section 7.1, TEST 1 (empty message): the backend signs what the RFC says.
    seed = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
    key = Ed25519PrivateKey.from_private_bytes(seed)
    from harness.core.keys import raw_public_bytes

    assert raw_public_bytes(key.public_key()).hex() == (
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
    assert key.sign(b"").hex() == (
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bac"
        "c61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b")


@pytest.fixture(scope="module")
def key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def _envelope(key, payload=b'{"a":1}', payload_type=dsse.IN_TOTO_PAYLOAD_TYPE) -> dict:
    return sign(payload, key, payload_type)


def _bytes(envelope: dict) -> bytes:
    return json.dumps(envelope).encode()


def test_sign_then_verify_returns_the_payload(key):
    env = _envelope(key)
    assert env["signatures"][0]["keyid"] == keyid(key.public_key())
    assert dsse.verify(_bytes(env), key.public_key()) == b'{"a":1}'


def test_url_safe_base64_is_accepted(key):
    payload = b"\xfb\xff\xbf>?"  # standard base64 holds + and /, URL-safe - and _
    env = _envelope(key, payload)
    env["payload"] = base64.urlsafe_b64encode(payload).decode()
    env["signatures"][0]["sig"] = base64.urlsafe_b64encode(
        base64.b64decode(env["signatures"][0]["sig"])).decode()
    assert dsse.verify(_bytes(env), key.public_key()) == payload


def test_another_key_is_refused(key):
    other = Ed25519PrivateKey.generate()
    with pytest.raises(SignatureError):
        dsse.verify(_bytes(_envelope(key)), other.public_key())


def test_keyid_is_only_a_hint(key):
    env = _envelope(key)
    env["signatures"][0]["keyid"] = "not-this-key"
    assert dsse.verify(_bytes(env), key.public_key()) == b'{"a":1}'


def test_changed_payload_type_breaks_the_signature(key):
    env = _envelope(key)
    env["payloadType"] = "application/json"
    with pytest.raises(SignatureError):
        dsse.verify(_bytes(env), key.public_key())


def test_validly_signed_but_unexpected_payload_type_is_refused(key):
    env = _envelope(key, payload_type="application/json")
    with pytest.raises(BindingMismatchError, match="payloadType"):
        dsse.verify(_bytes(env), key.public_key())


@pytest.mark.parametrize("mutate", [
    lambda e: e.pop("signatures"),
    lambda e: e.update(extra=1),
    lambda e: e.update(signatures=[]),
    lambda e: e.update(signatures=[{"keyid": "x"}]),
    lambda e: e.update(payload="***"),
    lambda e: e.update(payload=7),
    lambda e: e.update(payloadType=None),
    lambda e: e["signatures"][0].update(sig="%%%"),
    lambda e: e["signatures"][0].update(extra="x"),
])
def test_malformed_envelopes_are_refused_as_malformed(key, mutate):
    env = _envelope(key)
    mutate(env)
    with pytest.raises(MalformedEvidenceError):
        dsse.verify(_bytes(env), key.public_key())


def test_duplicate_keys_and_non_json_are_malformed(key):
    env = _envelope(key)
    dup = _bytes(env)[:-1] + b', "payloadType": "x"}'
    with pytest.raises(MalformedEvidenceError, match="duplicate"):
        dsse.verify(dup, key.public_key())
    for junk in (b"", b"\xff\xfe", b"[]", b"NaN"):
        with pytest.raises(MalformedEvidenceError):
            dsse.verify(junk, key.public_key())


def test_short_signature_is_a_signature_failure(key):
    env = _envelope(key)
    env["signatures"][0]["sig"] = base64.b64encode(b"\0" * 10).decode()
    with pytest.raises(SignatureError):
        dsse.verify(_bytes(env), key.public_key())


def test_unexpected_backend_exception_fails_closed(key, monkeypatch):
    class Exploding:
        def verify(self, sig, message):
            raise RuntimeError("backend blew up")

        def public_bytes(self, *a):
            return key.public_key().public_bytes(*a)

    with pytest.raises(SignatureError, match="RuntimeError"):
        dsse.verify(_bytes(_envelope(key)), Exploding())  # type: ignore[arg-type]


def test_securesystemslib_verifies_our_envelope_independently(key):
    sslib_dsse = pytest.importorskip("securesystemslib.dsse")
    from securesystemslib.signer import SSlibKey

    payload = '{"_type":"https://in-toto.io/Statement/v1","x":"\u00e9"}'.encode()
    env = _envelope(key, payload)
    theirs = sslib_dsse.Envelope.from_dict(json.loads(_bytes(env)))
    assert theirs.pae() == dsse.pae(dsse.IN_TOTO_PAYLOAD_TYPE, payload)
    their_key = SSlibKey.from_crypto(key.public_key(), keyid=keyid(key.public_key()))
    accepted = theirs.verify([their_key], 1)
    assert list(accepted) == [keyid(key.public_key())]
    # and it refuses what we refuse
    other = SSlibKey.from_crypto(Ed25519PrivateKey.generate().public_key(),
                                 keyid=keyid(key.public_key()))
    from securesystemslib.exceptions import VerificationError as TheirVerificationError

    with pytest.raises(TheirVerificationError):
        theirs.verify([other], 1)


# --- exact (bundle) envelopes: the writer's form, refused at parse time ---------------------


def test_exact_accepts_what_the_writer_makes(key):
    data = dsse.envelope_bytes(_envelope(key))
    assert dsse.verify(data, key.public_key(), exact=True) == b'{"a":1}'


def _twice_signed(key, env):
    env["signatures"].append(dict(env["signatures"][0]))


def _url_safe(key, env):
    env["payload"] = base64.urlsafe_b64encode(b"\xfb\xff\xbf>?").decode()


_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def _spare_bits(key, env):
    sig = env["signatures"][0]["sig"]  # 64 bytes: 86 characters and "=="; the last
    last = _B64[_B64.index(sig[85]) ^ 1]  # character's low 4 bits are spare: flip one
    env["signatures"][0]["sig"] = sig[:85] + last + "=="
    assert base64.b64decode(env["signatures"][0]["sig"]) == base64.b64decode(sig)


@pytest.mark.parametrize(("mutate", "because"), [
    (_twice_signed, "2 signatures"),
    (lambda key, env: env["signatures"][0].pop("keyid"), "no keyid"),
    (_url_safe, "canonical standard base64"),
    (_spare_bits, "canonical standard base64"),
    (lambda key, env: env["signatures"][0].update(sig=base64.b64encode(b"\0" * 10).decode()),
     "10 bytes"),
], ids=["two-signatures", "no-keyid", "url-safe", "spare-bits", "short-signature"])
def test_exact_refuses_other_forms_before_any_cryptography(key, mutate, because):
    env = _envelope(key)
    mutate(key, env)
    with pytest.raises(MalformedEvidenceError, match=because):
        dsse.verify(dsse.envelope_bytes(env), _NeverVerifies(), exact=True)  # type: ignore[arg-type]


class _NeverVerifies:
    """A key whose use would show that cryptography ran before the form was refused."""

    def verify(self, sig, message):
        raise AssertionError("the signature was checked before the form was refused")


def test_exact_refuses_another_layout(key):
    env = _envelope(key)
    for data in (json.dumps(env).encode(), dsse.envelope_bytes(env).rstrip(b"\n"),
                 json.dumps(env, indent=4, sort_keys=True).encode() + b"\n"):
        assert dsse.verify(data, key.public_key()) == b'{"a":1}'  # valid DSSE all the same
        with pytest.raises(MalformedEvidenceError, match="laid out"):
            dsse.verify(data, key.public_key(), exact=True)


def test_exact_refuses_another_keyid_hint_after_the_signature_checks(key):
    env = _envelope(key)
    env["signatures"][0]["keyid"] = "0" * 64
    with pytest.raises(MalformedEvidenceError, match="keyid hint"):
        dsse.verify(dsse.envelope_bytes(env), key.public_key(), exact=True)
    other = Ed25519PrivateKey.generate()  # another key: the signature fails first
    with pytest.raises(SignatureError):
        dsse.verify(dsse.envelope_bytes(_envelope(key)), other.public_key(), exact=True)
