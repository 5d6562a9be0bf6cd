"""Bundle mutators: one defect each, applied to a copy of a good bundle.

Shared by the probes (:mod:`harness.probes.catalogue`) and by
``scripts/make_tamper_fixtures.py`` (the committed fixtures, one defect per named folder).
A mutator is a function of the bundle's root folder. Artifacts are named by their raw
name (``inputs/x.logits.f32``, looked up in the bundle's ``receipt.json``: the stored
file's codec suffix is the writer's choice, never guessed) or by a stored path as is.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ..capture.signing import sign
from ..core import dsse, receipt
from ..core.bundle import ENVELOPE, RECEIPT

Mutation = Callable[[Path], None]


def stored_name(root: Path, rel: str) -> str:
    """The stored path of the raw artifact ``rel`` as the bundle's receipt copy names it,
    or ``rel`` itself when no subject has that name (a stored path, the envelope, ...)."""
    for subject in json.loads((root / RECEIPT).read_bytes())["subject"]:
        if subject["name"] == rel:
            return str(subject["annotations"]["stored"])
    return rel


def flip(rel: str) -> Mutation:
    """Flip the lowest bit of the middle byte."""
    def run(root: Path) -> None:
        path = root / stored_name(root, rel)
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x01
        path.write_bytes(bytes(data))
    return run


def truncate(rel: str) -> Mutation:
    """Drop the last 7 bytes."""
    def run(root: Path) -> None:
        path = root / stored_name(root, rel)
        data = path.read_bytes()
        path.write_bytes(data[: len(data) - 7])
    return run


def delete(rel: str) -> Mutation:
    def run(root: Path) -> None:
        (root / stored_name(root, rel)).unlink()
    return run


def swap(a: str, b: str) -> Mutation:
    """Exchange the bytes of two files."""
    def run(root: Path) -> None:
        path_a, path_b = root / stored_name(root, a), root / stored_name(root, b)
        data_a, data_b = path_a.read_bytes(), path_b.read_bytes()
        path_a.write_bytes(data_b)
        path_b.write_bytes(data_a)
    return run


def edit_json(rel: str, change: Callable[[Any], None]) -> Mutation:
    """Load a JSON file, ``change`` it in place, write it back (two-space indent)."""
    def run(root: Path) -> None:
        path = root / stored_name(root, rel)
        value = json.loads(path.read_bytes())
        change(value)
        path.write_bytes((json.dumps(value, indent=2) + "\n").encode())
    return run


def statement(root: Path) -> dict[str, Any]:
    """The bundle's receipt copy (the statement as signed, for editing)."""
    value: dict[str, Any] = json.loads((root / RECEIPT).read_bytes())
    return value


def sign_statement(root: Path, edited: dict[str, Any], key: Ed25519PrivateKey, *,
                   payload: bytes | None = None,
                   payload_type: str = dsse.IN_TOTO_PAYLOAD_TYPE) -> None:
    """Write ``edited`` (canonical, unless ``payload`` gives other bytes) as the receipt
    copy and sign it with ``key``: an insider's edit, or another signer's."""
    body = receipt.canonical(edited) if payload is None else payload
    (root / RECEIPT).write_bytes(body)
    (root / ENVELOPE).write_bytes(dsse.envelope_bytes(sign(body, key, payload_type)))


def resign(change: Callable[[dict[str, Any]], None], key: Ed25519PrivateKey) -> Mutation:
    """Change the signed statement and sign it again with ``key`` (an insider edit)."""
    def run(root: Path) -> None:
        edited = statement(root)
        change(edited)
        sign_statement(root, edited, key)
    return run
