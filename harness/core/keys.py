"""Ed25519 key files: generate, write (private 0600, never overwritten), load, key id.

Files are PEM: the private key as unencrypted PKCS#8, the public key as
SubjectPublicKeyInfo. The key id is the sha256 (hex) of the raw 32-byte public key.
A private key is never written anywhere but the path the user names.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from .digest import sha256_hex
from .errors import UsageError
from .safeio import read_regular_file

PRIVATE_SUFFIX = ".key"
PUBLIC_SUFFIX = ".pub"
MAX_KEY_FILE_BYTES = 16 * 1024
# any PEM private-key label: PKCS#8, encrypted PKCS#8, OpenSSH, ...
_PRIVATE_PEM_LABEL = re.compile(rb"-----BEGIN [A-Z0-9 ]*PRIVATE")


def raw_public_bytes(public_key: Ed25519PublicKey) -> bytes:
    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def keyid(public_key: Ed25519PublicKey) -> str:
    """sha256 hex of the raw 32-byte Ed25519 public key."""
    return sha256_hex(raw_public_bytes(public_key))


def private_pem(private_key: Ed25519PrivateKey) -> bytes:
    return private_key.private_bytes(serialization.Encoding.PEM,
                                     serialization.PrivateFormat.PKCS8,
                                     serialization.NoEncryption())


def public_pem(public_key: Ed25519PublicKey) -> bytes:
    return public_key.public_bytes(serialization.Encoding.PEM,
                                   serialization.PublicFormat.SubjectPublicKeyInfo)


def _write_new(path: Path, data: bytes, mode: int) -> None:
    """Create ``path`` exclusively with ``mode``; never follow or replace an existing entry."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, mode)
    except FileExistsError:
        raise UsageError(f"{path} already exists; refusing to overwrite a key file") from None
    except OSError as err:
        raise UsageError(f"cannot create {path}: {err.strerror or err}") from None
    try:
        os.fchmod(fd, mode)  # the umask must not widen or narrow what we promise
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
    except OSError as err:
        raise UsageError(f"cannot write {path}: {err.strerror or err}") from None


def key_paths(prefix: Path) -> tuple[Path, Path]:
    """``PREFIX.key`` and ``PREFIX.pub``; an empty prefix or one naming a folder is refused
    (it would write hidden files such as ``.key``)."""
    text = str(prefix)
    if not text or text.endswith(("/", os.sep)) or Path(text).name in ("", ".", ".."):
        raise UsageError(f"key prefix {text!r} names no file; give a path such as "
                         "keys/signing")
    return Path(f"{prefix}{PRIVATE_SUFFIX}"), Path(f"{prefix}{PUBLIC_SUFFIX}")


def write_keypair(prefix: Path) -> tuple[Path, Path, str]:
    """Generate a key pair: ``PREFIX.key`` (0600) and ``PREFIX.pub`` (0644). Returns paths, id."""
    private_path, public_path = key_paths(prefix)
    for path in (private_path, public_path):
        if os.path.lexists(path):
            raise UsageError(f"{path} already exists; refusing to overwrite a key file")
    private_key = Ed25519PrivateKey.generate()
    _write_new(private_path, private_pem(private_key), 0o600)
    _write_new(public_path, public_pem(private_key.public_key()), 0o644)
    return private_path, public_path, keyid(private_key.public_key())


def _read_key_file(path: Path, *, owner_only: bool = False) -> bytes:
    return read_regular_file(Path(path), "key file", MAX_KEY_FILE_BYTES, owner_only=owner_only)


def load_private_key(path: Path, *, owner_only: bool = False) -> Ed25519PrivateKey:
    """The Ed25519 private key in ``path``; ``owner_only`` (``run``) refuses a key file
    that group or others may access, as ssh does."""
    data = _read_key_file(path, owner_only=owner_only)
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except UnsupportedAlgorithm as err:
        raise UsageError(f"{path} holds a key of an unsupported algorithm; topp-gate signs "
                         "with Ed25519") from err
    except (ValueError, TypeError) as err:
        raise UsageError(f"{path} is not an unencrypted PEM private key") from err
    if not isinstance(key, Ed25519PrivateKey):
        raise UsageError(f"{path} is not an Ed25519 private key")
    return key


PROJECT_KEY_RESOURCE = "data/keys/topp-gate-evidence.pub"


def project_public_key() -> Ed25519PublicKey:
    """The public key of this project's evidence signing key, shipped as package data
    (a byte-identical copy of ``evidence/keys/topp-gate-evidence.pub``, held so by test)."""
    from importlib import resources

    data = resources.files("harness").joinpath(PROJECT_KEY_RESOURCE).read_bytes()
    key = serialization.load_pem_public_key(data)
    if not isinstance(key, Ed25519PublicKey):  # pragma: no cover - package data
        raise UsageError("the built-in project key is not an Ed25519 public key")
    return key


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
