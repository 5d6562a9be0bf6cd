"""The receipt: an in-toto Statement v1 whose predicate is topp-gate's gate result.

Subjects are the bundle's artifacts, each named by its *raw* bundle path with the sha256 of
its raw bytes; annotations say how it is stored (codec, stored path, stored digest, sizes).
The predicate (``PREDICATE_TYPE``) is validated by ``harness/schemas/receipt.schema.json``.
The signed payload is the statement's RFC 8785 canonical JSON bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

import rfc8785

from . import schema as _schema
from .errors import MalformedEvidenceError

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://topp-gate.dev/attestations/gate-receipt/v1"
SCHEMA_RESOURCE = "receipt.schema.json"
HARNESS_DIGEST_ALGORITHM = "topp-gate/harness-tree/v1"
_PACKAGE_DATA_SUFFIXES = (".py", ".json")
_PACKAGE_DATA_NAMES = ("py.typed",)


def canonical(value: Any) -> bytes:
    """RFC 8785 canonical JSON bytes (the exact bytes that get signed)."""
    try:
        return rfc8785.dumps(value)
    except rfc8785.CanonicalizationError as err:
        raise MalformedEvidenceError(f"value cannot be canonicalized: {err}") from err


def statement(subjects: list[dict[str, Any]], predicate: dict[str, Any]) -> dict[str, Any]:
    return {
        "_type": STATEMENT_TYPE,
        "subject": subjects,
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    }


def schema() -> dict[str, Any]:
    return _schema.load(SCHEMA_RESOURCE)


def validate(value: Any) -> None:
    """Schema-check a statement; the most relevant error becomes one line."""
    problem = _schema.violation(SCHEMA_RESOURCE, value)
    if problem is not None:
        raise MalformedEvidenceError(f"receipt does not match its schema {problem}")


# --- harness code digest --------------------------------------------------------------------


def _harness_files(node: Traversable, prefix: str = "") -> Iterator[tuple[str, Traversable]]:
    for child in node.iterdir():
        name = child.name
        if name.startswith(".") or name == "__pycache__":
            continue
        rel = f"{prefix}{name}"
        if child.is_dir():
            yield from _harness_files(child, rel + "/")
        elif name.endswith(_PACKAGE_DATA_SUFFIXES) or name in _PACKAGE_DATA_NAMES:
            yield rel, child


def harness_code_digest() -> dict[str, Any]:
    """A deterministic digest of the installed ``harness`` package (.py and package data).

    sha256 over the sorted lines ``<relative path> NUL <sha256 of file bytes> LF``.
    """
    lines = []
    for rel, node in sorted(_harness_files(resources.files("harness"))):
        lines.append(rel.encode("utf-8") + b"\0" + hashlib.sha256(node.read_bytes()).hexdigest()
                     .encode("ascii") + b"\n")
    return {
        "algorithm": HARNESS_DIGEST_ALGORITHM,
        "sha256": hashlib.sha256(b"".join(lines)).hexdigest(),
        "files": len(lines),
    }
