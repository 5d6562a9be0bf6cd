"""Ed25519 public keys: load (a ``.pub`` file or the project's key), key id.

Public key files are PEM SubjectPublicKeyInfo. The key id is the sha256 (hex) of the raw
32-byte public key. Private keys (generate, write 0600, load) and signing live on the
capture side (:mod:`harness.capture.signing`): the trusted core holds no private-key type.
"""

from __future__ import annotations

import re
from pathlib import Path

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from .digest import sha256_hex
from .errors import UsageError
from .safeio import read_regular_file

MAX_KEY_FILE_BYTES = 16 * 1024
# any PEM private-key label: PKCS#8, encrypted PKCS#8, OpenSSH, ...
_PRIVATE_PEM_LABEL = re.compile(rb"-----BEGIN [A-Z0-9 ]*PRIVATE")


def raw_public_bytes(public_key: Ed25519PublicKey) -> bytes:
    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def keyid(public_key: Ed25519PublicKey) -> str:
    """sha256 hex of the raw 32-byte Ed25519 public key."""
    return sha256_hex(raw_public_bytes(public_key))


def _read_key_file(path: Path) -> bytes:
    return read_regular_file(Path(path), "key file", MAX_KEY_FILE_BYTES)


# The project's evidence keys, shipped as package data (byte-identical copies of
# evidence/keys/*.pub, held so by test): the first signed the bundles of 2026-11-29, the
# second the release sweep, the third the implementation bundles (issue 21), the fourth
# the bundles of 2026-12-03 (pr-cuda-v2, FlashInfer's samplers, the deployment inputs), the
# fifth the whole-sampler PR runs of issue 26 (the fourth's private half was not carried to
# that session's machine), the sixth the upstream replays of issue 36 (likewise, the fifth's
# private half was not on that session's machine). Only a built-in key can be picked by a
# bundle's key id hint.
PROJECT_KEY_RESOURCES = ("data/keys/topp-gate-evidence.pub", "data/keys/topp-gate-evidence-2.pub",
                         "data/keys/topp-gate-evidence-3.pub", "data/keys/topp-gate-evidence-4.pub",
                         "data/keys/topp-gate-evidence-5.pub", "data/keys/topp-gate-evidence-6.pub")


def project_public_keys() -> dict[str, Ed25519PublicKey]:
    """This project's evidence public keys, by key id, in the order above."""
    from importlib import resources

    keys: dict[str, Ed25519PublicKey] = {}
    for name in PROJECT_KEY_RESOURCES:
        data = resources.files("harness").joinpath(name).read_bytes()
        key = serialization.load_pem_public_key(data)
        if not isinstance(key, Ed25519PublicKey):  # pragma: no cover - package data
            raise UsageError(f"the built-in project key {name} is not an Ed25519 public key")
        keys[keyid(key)] = key
    return keys


def project_public_key(hint: str | None = None) -> Ed25519PublicKey:
    """The built-in project key whose key id is ``hint`` (an envelope's unverified key id:
    it only chooses among keys that are trusted anyway), else the first one."""
    keys = project_public_keys()
    return keys.get(hint or "", next(iter(keys.values())))


def load_public_key(path: Path) -> Ed25519PublicKey:
    data = _read_key_file(path)
    if _PRIVATE_PEM_LABEL.search(data):
        raise UsageError(f"{path} holds a private key; pass the public key (.pub)")
    try:
        key = serialization.load_pem_public_key(data)
    except UnsupportedAlgorithm as err:
        raise UsageError(f"{path} holds a public key of an unsupported algorithm; topp-gate "
                         "verifies Ed25519 signatures") from err
    except (ValueError, TypeError) as err:
        raise UsageError(f"{path} is not a PEM public key") from err
    if not isinstance(key, Ed25519PublicKey):
        raise UsageError(f"{path} is not an Ed25519 public key")
    return key
