"""The per-row results and manifest of a bundle ``verify`` has just verified, read again
through the signed statement it verified (same payload digest), for the CI formats."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.bundle import ENVELOPE, MANIFEST, ROWS
from ..core.digest import sha256_hex
from ..core.dsse import verify as dsse_verify
from ..core.errors import BindingMismatchError, MalformedEvidenceError, wrap_as
from ..core.manifest import Manifest, parse_manifest
from ..core.names import SIDES
from ..core.safeio import read_regular_file
from .changes import Changes, changes_of_view

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from ..core.verify import Verified

MAX_ENVELOPE_BYTES = 64 << 20


@dataclass(frozen=True)
class VerifiedBundle:
    """What the CI formats read: the verification result, the rows it proved identical to
    the rerun, the manifest, the receipt envelope's sha256, and what the change changed
    (:mod:`harness.ci.changes`, read from the same verified statement)."""

    result: Verified
    rows: list[dict[str, Any]]
    manifest: Manifest
    envelope_sha256: str
    changes: Changes | None = None


def read_verified(path: Path, public_key: Ed25519PublicKey, result: Verified) -> VerifiedBundle:
    """Read rows, manifest and envelope of the bundle just verified; refused (exit 4) when
    what is read now is not the statement that verified."""
    from ..core.verify import open_bundle

    view = open_bundle(path, public_key)
    if view.payload_sha256 != result.payload_sha256:
        raise BindingMismatchError("bundle read again for the CI formats",
                                   result.payload_sha256, view.payload_sha256)
    envelope = read_regular_file(Path(path) / ENVELOPE, "receipt envelope",
                                 MAX_ENVELOPE_BYTES, error=MalformedEvidenceError)
    payload = dsse_verify(envelope, public_key)
    if sha256_hex(payload) != result.payload_sha256:
        raise BindingMismatchError("receipt envelope read again for the CI formats",
                                   result.payload_sha256, sha256_hex(payload))
    with wrap_as(MalformedEvidenceError, failing_closed="reading the verified rows"):
        rows = json.loads(view.raw(ROWS))
        manifest = parse_manifest(view.raw(MANIFEST))
    if not isinstance(rows, list):
        raise MalformedEvidenceError(f"{ROWS} is not a list of rows")
    with wrap_as(MalformedEvidenceError, failing_closed="reading what the change changed"):
        changes = changes_of_view(view, rows, lambda case: manifest.dispatch(SIDES[1], case))
    return VerifiedBundle(result, rows, manifest, sha256_hex(envelope), changes)
