"""DSSE v1 envelopes signed with Ed25519: PAE, verify (fail closed); signing is
:func:`harness.capture.signing.sign`, outside the trusted core.

PAE (DSSE protocol v1.0.0, https://github.com/secure-systems-lab/dsse/blob/master/protocol.md)::

    PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body

where LEN is the ASCII decimal *byte* length of the UTF-8 type and of the body. (String
lengths would be wrong for any non-ASCII payload type; a known-answer test pins this.)

The envelope is ``{"payload": b64, "payloadType": str, "signatures": [{"keyid", "sig"}]}``.
Verification follows the protocol's order: decode, verify the signature over the PAE of
the *declared* type, then require the expected payload type. Any failure, including an
unexpected exception inside the crypto library, becomes a :class:`VerificationError`.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from .errors import BindingMismatchError, MalformedEvidenceError, SignatureError
from .keys import keyid
from .strictjson import loads_strict

IN_TOTO_PAYLOAD_TYPE = "application/vnd.in-toto+json"
ENVELOPE_KEYS = frozenset({"payload", "payloadType", "signatures"})
SIGNATURE_KEYS = frozenset({"keyid", "sig"})
ED25519_SIGNATURE_BYTES = 64


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 Pre-Authentication Encoding, lengths counted in bytes."""
    type_bytes = payload_type.encode("utf-8")
    return b" ".join([
        b"DSSEv1",
        str(len(type_bytes)).encode("ascii"),
        type_bytes,
        str(len(payload)).encode("ascii"),
        payload,
    ])


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: object, what: str) -> bytes:
    """Strict base64: standard or URL-safe alphabet (the protocol allows both), padded."""
    if not isinstance(text, str):
        raise MalformedEvidenceError(f"DSSE {what} is not a string")
    try:
        raw = text.encode("ascii")
        if b"-" in raw or b"_" in raw:
            raw = raw.translate(bytes.maketrans(b"-_", b"+/"))
        return base64.b64decode(raw, validate=True)
    except (UnicodeEncodeError, binascii.Error, ValueError) as err:
        raise MalformedEvidenceError(f"DSSE {what} is not valid base64") from err


def envelope_bytes(envelope: dict[str, Any]) -> bytes:
    """The envelope file's bytes: sorted keys, two-space indent, trailing newline."""
    return (json.dumps(envelope, indent=2, sort_keys=True) + "\n").encode("utf-8")


def _unb64_exact(text: object, what: str) -> bytes:
    """Standard-alphabet, padded base64 in its one canonical spelling (no spare bits)."""
    raw = _unb64(text, what)
    if not isinstance(text, str) or base64.b64encode(raw).decode("ascii") != text:
        raise MalformedEvidenceError(f"DSSE {what} is not canonical standard base64")
    return raw


def _parse(data: bytes, exact: bool = False) -> tuple[bytes, str, list[tuple[str | None, bytes]]]:
    """Payload, payload type and (key id hint, signature) pairs of an envelope.

    ``exact`` (bundles) also requires the writer's form, before any cryptography: exactly
    one signature, with a key id hint, of 64 bytes; standard base64 in its one canonical
    spelling; and the file laid out as :func:`envelope_bytes` lays it out. Nothing about
    the envelope may then vary without changing a signed byte, except the key id hint,
    which :func:`verify` compares with the trusted key's id once the signature checks.
    """
    envelope = loads_strict(data, "DSSE envelope")
    if not isinstance(envelope, dict) or set(envelope) != ENVELOPE_KEYS:
        raise MalformedEvidenceError(
            "DSSE envelope must be an object with exactly payload, payloadType, signatures")
    raw_sigs = envelope["signatures"]
    if not isinstance(raw_sigs, list) or not raw_sigs:
        raise MalformedEvidenceError("DSSE envelope holds no signatures")
    if exact and len(raw_sigs) != 1:
        raise MalformedEvidenceError(f"DSSE envelope holds {len(raw_sigs)} signatures; a "
                                     "bundle's holds exactly one")
    unb64 = _unb64_exact if exact else _unb64
    payload = unb64(envelope["payload"], "payload")
    payload_type = envelope["payloadType"]
    if not isinstance(payload_type, str):
        raise MalformedEvidenceError("DSSE payloadType is not a string")
    sigs: list[tuple[str | None, bytes]] = []
    for entry in raw_sigs:
        if not isinstance(entry, dict) or "sig" not in entry or not set(entry) <= SIGNATURE_KEYS:
            raise MalformedEvidenceError("DSSE signature entry must hold sig and optional keyid")
        kid = entry.get("keyid")
        if kid is not None and not isinstance(kid, str):
            raise MalformedEvidenceError("DSSE keyid is not a string")
        if exact and kid is None:
            raise MalformedEvidenceError("DSSE signature has no keyid; a bundle's names its key")
        sig = unb64(entry["sig"], "signature")
        if exact and len(sig) != ED25519_SIGNATURE_BYTES:
            raise MalformedEvidenceError(f"DSSE signature holds {len(sig)} bytes, not "
                                         f"{ED25519_SIGNATURE_BYTES}")
        sigs.append((kid, sig))
    if exact and data != envelope_bytes(envelope):
        raise MalformedEvidenceError("DSSE envelope is not laid out as the writer lays it out "
                                     "(sorted keys, two-space indent, final newline)")
    return payload, payload_type, sigs


def keyid_hints(data: bytes) -> list[str | None]:
    """The key id hints of an envelope in the writer's form, UNVERIFIED (never a security
    decision: only for picking among keys the caller already trusts)."""
    return [hint for hint, _sig in _parse(data, exact=True)[2]]


def verify(data: bytes, public_key: Ed25519PublicKey,
           expected_payload_type: str = IN_TOTO_PAYLOAD_TYPE, *, exact: bool = False) -> bytes:
    """Verify a DSSE envelope (bytes) with one trusted key; return the verified payload.

    The keyid is only a hint (never a security decision): every signature is tried.
    ``exact`` (bundles) first requires the writer's form when parsing (see :func:`_parse`;
    a bundle carrying 500k signatures is refused after counting them, not after checking
    each), and once the signature checks, a key id hint equal to the trusted key's id: so
    a verified bundle envelope is byte for byte what :func:`sign` and
    :func:`envelope_bytes` make, and no re-encoding is needed to prove it.
    """
    payload, payload_type, sigs = _parse(data, exact)
    message = pae(payload_type, payload)
    verified = False
    for _kid, sig in sigs:
        if len(sig) != ED25519_SIGNATURE_BYTES:
            continue
        try:
            public_key.verify(sig, message)
        except InvalidSignature:
            continue
        except Exception as err:  # fail closed on anything the backend raises
            raise SignatureError(f"signature check failed: {type(err).__name__}") from err
        verified = True
        break
    if not verified:
        raise SignatureError(
            f"no signature verifies with the given public key (key id {keyid(public_key)})")
    if exact and sigs[0][0] != keyid(public_key):
        raise MalformedEvidenceError(f"DSSE keyid hint {sigs[0][0]!r} is not the id of the key "
                                     "that verified the signature")
    if payload_type != expected_payload_type:
        raise BindingMismatchError("DSSE payloadType", expected_payload_type, payload_type)
    return payload
