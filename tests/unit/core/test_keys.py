"""Key files: 0600 private key, never overwritten, key id = sha256(raw public key)."""

from __future__ import annotations

import hashlib
import os
import stat

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from harness.capture import signing
from harness.core import keys
from harness.core.errors import UsageError


def test_write_keypair_modes_and_roundtrip(tmp_path):
    old = os.umask(0)  # a permissive umask must not widen the private key's mode
    try:
        private_path, public_path, kid = signing.write_keypair(tmp_path / "signer")
    finally:
        os.umask(old)
    assert private_path.name == "signer.key" and public_path.name == "signer.pub"
    assert stat.S_IMODE(private_path.stat().st_mode) == 0o600
    private = signing.load_private_key(private_path)
    public = keys.load_public_key(public_path)
    assert keys.raw_public_bytes(private.public_key()) == keys.raw_public_bytes(public)
    assert kid == hashlib.sha256(keys.raw_public_bytes(public)).hexdigest()


def test_keyid_is_sha256_of_raw_public_key():
    # RFC 8032 TEST 1 public key; its sha256 computed independently with sha256sum.
    seed = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
    public = Ed25519PrivateKey.from_private_bytes(seed).public_key()
    raw = bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
    assert keys.keyid(public) == hashlib.sha256(raw).hexdigest()


@pytest.mark.parametrize("existing", ["signer.key", "signer.pub"])
def test_refuses_to_overwrite_either_file(tmp_path, existing):
    (tmp_path / existing).write_bytes(b"keep me")
    with pytest.raises(UsageError, match="refusing to overwrite"):
        signing.write_keypair(tmp_path / "signer")
    assert (tmp_path / existing).read_bytes() == b"keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == [existing]


def test_refuses_a_dangling_symlink_in_the_way(tmp_path):
    (tmp_path / "signer.key").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UsageError):
        signing.write_keypair(tmp_path / "signer")
    assert not (tmp_path / "elsewhere").exists()


def test_bad_key_files_are_usage_errors(tmp_path):
    private_path, public_path, _ = signing.write_keypair(tmp_path / "k")
    with pytest.raises(UsageError, match="private key"):
        keys.load_public_key(private_path)
    with pytest.raises(UsageError):
        signing.load_private_key(public_path)
    junk = tmp_path / "junk.pub"
    junk.write_bytes(b"not a key")
    with pytest.raises(UsageError):
        keys.load_public_key(junk)
    with pytest.raises(UsageError, match="cannot read"):
        keys.load_public_key(tmp_path / "missing.pub")
    big = tmp_path / "big.pub"
    big.write_bytes(b"x" * (keys.MAX_KEY_FILE_BYTES + 1))
    with pytest.raises(UsageError, match="too large"):
        keys.load_public_key(big)


def test_committed_test_only_keys_are_named_as_such():
    from pathlib import Path

    key_dir = Path(__file__).resolve().parents[2] / "assets" / "keys"
    for path in key_dir.glob("*.key"):
        assert path.name.startswith("test-only-"), path


def test_built_in_project_keys_are_the_committed_evidence_keys():
    from pathlib import Path

    from harness.core.keys import (
        PROJECT_KEY_RESOURCES,
        keyid,
        load_public_key,
        project_public_key,
        project_public_keys,
    )

    root = Path(__file__).resolve().parents[3]
    ids = []
    for resource in PROJECT_KEY_RESOURCES:
        shipped = root / "harness" / resource
        committed = root / "evidence/keys" / shipped.name
        assert shipped.read_bytes() == committed.read_bytes()
        ids.append(keyid(load_public_key(committed)))
    assert list(project_public_keys()) == ids
    # every committed evidence key is built in (a new key cannot be forgotten)
    assert sorted(p.name for p in (root / "evidence/keys").glob("*.pub")) == sorted(
        Path(r).name for r in PROJECT_KEY_RESOURCES)
    assert keyid(project_public_key()) == ids[0]  # no hint: the first key, as before
    assert keyid(project_public_key(ids[1])) == ids[1]
    assert keyid(project_public_key("f" * 64)) == ids[0]  # an unknown hint picks no other key
