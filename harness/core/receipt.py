"""The receipt: an in-toto Statement v1 whose predicate is topp-gate's gate result.

Subjects are the bundle's artifacts, each named by its *raw* bundle path with the sha256 of
its raw bytes; annotations say how it is stored (codec, stored path, stored digest, sizes).
The predicate (``PREDICATE_TYPE``) is validated by ``harness/core/schemas/receipt.schema.json``.
The signed payload is the statement's RFC 8785 canonical JSON bytes.
"""

from __future__ import annotations

from typing import Any

import rfc8785

from . import schema as _schema
from .errors import MalformedEvidenceError

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://topp-gate.dev/attestations/gate-receipt/v1"
SCHEMA_RESOURCE = "receipt.schema.json"


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
