"""The signing side: Ed25519 key pairs (generate, write, load) and DSSE signatures.

Files are PEM: the private key as unencrypted PKCS#8 (mode 0600, never overwritten), the
public key as SubjectPublicKeyInfo. A private key is never written anywhere but the path
the user names. The trusted core (:mod:`harness.core.keys`, :mod:`harness.core.dsse`) only
loads public keys and verifies; no private-key type is imported there.
"""

from __future__ import annotations

import base64
import os
import shlex
import stat
from pathlib import Path
from typing import Any

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ..core.dsse import IN_TOTO_PAYLOAD_TYPE, pae
from ..core.errors import UsageError
from ..core.keys import MAX_KEY_FILE_BYTES, keyid
from ..core.safeio import read_regular_file
from ..core.terminal import printable

PRIVATE_SUFFIX = ".key"
PUBLIC_SUFFIX = ".pub"


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


def ephemeral_key() -> Ed25519PrivateKey:
    """A key made in memory for one run (``pr --ephemeral-key``): never written; its public
    half goes beside the bundle, and the evidence says the key was ephemeral."""
    return Ed25519PrivateKey.generate()


def load_private_key(path: Path, *, owner_only: bool = False) -> Ed25519PrivateKey:
    """The Ed25519 private key in ``path``; ``owner_only`` (``run``) refuses a key file
    that group or others may access, as ssh does."""
    data = read_regular_file(Path(path), "key file", MAX_KEY_FILE_BYTES)
    _refuse_public_key(Path(path), data)  # before the mode check: chmod would not help
    if owner_only:  # the bytes used are the ones read under the mode check
        data = read_regular_file(Path(path), "key file", MAX_KEY_FILE_BYTES, owner_only=True)
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


def check_key_file(path: Path) -> None:
    """Before any kernel child runs: ``path`` is a regular file only its owner may read or
    write, told from ``stat`` alone. The key's bytes are read (:func:`load_private_key`)
    only after every child has exited: no code under test runs while the parent holds
    them."""
    try:
        info = os.stat(path)
    except OSError as err:
        raise UsageError(f"cannot use key file {printable(path)}: "
                         f"{err.strerror or err}") from None
    if not stat.S_ISREG(info.st_mode):
        raise UsageError(f"key file {printable(path)} is not a regular file")
    if info.st_mode & 0o077:
        # refused here, before any child exists: reading it now only names a public key
        # given by mistake (the usual cause of such a mode) instead of advising chmod
        _refuse_public_key(Path(path), read_regular_file(Path(path), "key file",
                                                         MAX_KEY_FILE_BYTES))
        raise UsageError(f"key file {printable(path)} is accessible by group or others (mode "
                         f"{stat.S_IMODE(info.st_mode):04o}); run: chmod 600 "
                         f"{printable(shlex.quote(str(path)))}")


def public_key_beside(path: Path) -> Ed25519PublicKey | None:
    """The public half kept beside a private key (``PREFIX.pub`` for ``PREFIX.key``), read
    without opening the private key; None when there is none or it is not an Ed25519 public
    key. The caller checks it against the private key once that is opened."""
    text = str(path)
    if not text.endswith(PRIVATE_SUFFIX):
        return None
    return public_key_file(Path(text[: -len(PRIVATE_SUFFIX)] + PUBLIC_SUFFIX))


def public_key_file(path: Path) -> Ed25519PublicKey | None:
    """The Ed25519 public key in ``path`` (PEM), or None when unreadable or of another kind."""
    try:
        data = read_regular_file(path, "public key", MAX_KEY_FILE_BYTES)
        public = serialization.load_pem_public_key(data)
    except (UsageError, ValueError, TypeError, UnsupportedAlgorithm):
        return None
    return public if isinstance(public, Ed25519PublicKey) else None


def _refuse_public_key(path: Path, data: bytes) -> None:
    """A public key given where the private key belongs is named as such (not met with
    advice about its file mode): the signer needs the ``.key`` file beside it."""
    try:
        public = serialization.load_pem_public_key(data)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        return  # not a public key: the private-key parse says what it is
    shown = f" (key id {keyid(public)})" if isinstance(public, Ed25519PublicKey) else ""
    text = str(path)
    beside = Path((text[: -len(PUBLIC_SUFFIX)] if text.endswith(PUBLIC_SUFFIX) else text)
                  + PRIVATE_SUFFIX)
    if beside != path and beside.is_file():
        how = f"give its private half: --key {shlex.quote(str(beside))}"
    else:
        command = keygen_command(path)
        how = (f"make a key pair with '{command}' and give --key "
               f"{shlex.quote(keygen_prefix(path) + PRIVATE_SUFFIX)}")
    raise UsageError(f"{printable(path)} holds a public key{shown}, not a private key; sign "
                     f"with the private key: {printable(how)}")


def keygen_command(near: Path) -> str:
    """``topp-gate keygen --out PREFIX`` for :func:`keygen_prefix` of ``near``."""
    return f"topp-gate keygen --out {shlex.quote(keygen_prefix(near))}"


def keygen_prefix(near: Path) -> str:
    """A PREFIX beside ``near`` (its name without ``.key``/``.pub``) whose two files do not
    exist yet, so ``keygen --out PREFIX`` works as printed (keygen never overwrites):
    PREFIX, else PREFIX-2, PREFIX-3 ..."""
    text = str(near)
    for suffix in (PRIVATE_SUFFIX, PUBLIC_SUFFIX):
        if text.endswith(suffix):
            text = text[: -len(suffix)]
    candidate, number = text, 1
    while any(os.path.lexists(p) for p in key_paths_unchecked(candidate)) \
            or os.path.isdir(candidate):
        number += 1
        candidate = f"{text}-{number}"
    return candidate


def key_paths_unchecked(prefix: str) -> tuple[str, str]:
    """PREFIX.key and PREFIX.pub as strings (no check of the prefix)."""
    return f"{prefix}{PRIVATE_SUFFIX}", f"{prefix}{PUBLIC_SUFFIX}"


def _b64(data: bytes) -> str:
    """Standard, padded base64: the one spelling a bundle's envelope may use."""
    return base64.b64encode(data).decode("ascii")


def sign(payload: bytes, private_key: Ed25519PrivateKey,
         payload_type: str = IN_TOTO_PAYLOAD_TYPE) -> dict[str, Any]:
    """A DSSE envelope holding ``payload`` and one Ed25519 signature over its PAE."""
    signature = private_key.sign(pae(payload_type, payload))
    return {
        "payload": _b64(payload),
        "payloadType": payload_type,
        "signatures": [{"keyid": keyid(private_key.public_key()), "sig": _b64(signature)}],
    }
