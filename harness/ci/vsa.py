"""``verify --vsa OUT``: a signed SLSA Verification Summary Attestation of one verified bundle.

The shape follows the SLSA VSA v1 specification (https://slsa.dev/verification_summary/v1,
"Schema" and "Fields"; tests/assets/ci-schemas/slsa-vsa-v1.schema.json is derived from that
text and checks it), as an in-toto Statement v1 (https://in-toto.io/Statement/v1) in a DSSE
envelope signed with Ed25519 exactly as a receipt is (:func:`harness.capture.signing.sign`,
payload type ``application/vnd.in-toto+json``, RFC 8785 canonical payload):

- ``subject``: the bundle, named by its folder and identified by the sha256 of its signed
  statement (the receipt payload, which names every artifact's digest); its ``annotations``
  name both sides as ``verify --json`` does (``sides``: the base is ``stock``, the change
  ``patched``, each with its version, pin, tree, kernel and patch digests as the verified
  manifest pins them and its isolation as the receipt records it; ``change``;
  ``signing``; ``base_reused_from``; and ``changes``, what the change changed as
  ``verify --json`` reports it: rows whose outputs differ from the base's, how many of them
  the base got right, each broken row with the oracle's, base's and change's kept counts);
- ``verifier.id``: who verified (default ``urn:topp-gate:verify``; a CI gives its own), with
  ``verifier.version`` naming topp-gate's version and trusted-core digest;
- ``timeVerified``: now, UTC (RFC 3339);
- ``resourceUri``: ``urn:topp-gate:bundle:sha256:<statement sha256>``;
- ``policy``: the rule set that judged the rows (``uri`` ``urn:topp-gate:rules:<id>``) and the
  digest of the frozen manifest the bundle was held to (the ``--frozen-manifest`` hash when
  one was given, else the manifest the receipt binds); its ``annotations.required`` what
  the verifier required of the sides and found (``--require-base``, ``--require-change``,
  ``--require-patch``, ``--require-isolation``), when anything was;
- ``inputAttestations``: the receipt envelope, named ``receipt.dsse.json`` (it is fetched with
  the bundle, so it has no URI of its own), with its sha256;
- ``verificationResult``: ``PASSED`` for a verified PASS, ``FAILED`` for a verified STOP;
- ``verifiedLevels``: topp-gate verifies no SLSA build track, so a PASS names its own
  level ``TOPP_GATE_RULES_<rule set>`` (custom values are allowed, never ``SLSA_``-prefixed),
  a STOP ``FAILED`` as the specification asks;
- ``slsaVersion``: ``1.0``.

A bundle that does not verify gets no VSA (``verify`` says so): a VSA is a verdict.
"""

from __future__ import annotations

import datetime
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..core.bundle import ENVELOPE
from ..core.dsse import envelope_bytes
from ..core.errors import UsageError
from ..core.receipt import STATEMENT_TYPE, canonical
from ..core.terminal import printable

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from .verified_rows import VerifiedBundle

VSA_PREDICATE_TYPE = "https://slsa.dev/verification_summary/v1"
DEFAULT_VERIFIER_ID = "urn:topp-gate:verify"
SLSA_VERSION = "1.0"


def _level(rules: str) -> str:
    return "TOPP_GATE_RULES_" + "".join(c.upper() if c.isalnum() else "_" for c in rules)


def statement(bundle: VerifiedBundle, *, verifier_id: str = DEFAULT_VERIFIER_ID,
              now: datetime.datetime | None = None) -> dict[str, Any]:
    """The VSA statement for a verified bundle (unsigned)."""
    result = bundle.result
    passed = result.verdict["verdict"] == "PASS"
    when = (now or datetime.datetime.now(datetime.UTC)).astimezone(datetime.UTC)
    policy_digest = result.frozen_manifest or result.manifest_sha256
    sides = result.sides_json()
    required = sides.pop("required")
    if bundle.changes is not None:
        sides["changes"] = bundle.changes.to_json()
    policy: dict[str, Any] = {"uri": f"urn:topp-gate:rules:{result.rules}",
                              "name": str(bundle.manifest.data.get("name", "")),
                              "digest": {"sha256": policy_digest}}
    if required:
        policy["annotations"] = {"required": required}
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": Path(result.path).name or str(result.path),
                     "digest": {"sha256": result.payload_sha256},
                     "annotations": sides}],
        "predicateType": VSA_PREDICATE_TYPE,
        "predicate": {
            "verifier": {"id": verifier_id,
                         "version": {"topp-gate": __version__,
                                     "topp-gate-core": result.harness_local}},
            "timeVerified": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "resourceUri": f"urn:topp-gate:bundle:sha256:{result.payload_sha256}",
            "policy": policy,
            # no ``uri``: the envelope lies in the bundle (its ``name``), at no URI of its own
            "inputAttestations": [{"name": ENVELOPE,
                                   "digest": {"sha256": bundle.envelope_sha256}}],
            "verificationResult": "PASSED" if passed else "FAILED",
            "verifiedLevels": [_level(result.rules)] if passed else ["FAILED"],
            "slsaVersion": SLSA_VERSION,
        },
    }


def signed_envelope(vsa: dict[str, Any], key: Ed25519PrivateKey) -> bytes:
    """The DSSE envelope's file bytes, as a receipt's are written."""
    from ..capture.signing import sign

    return envelope_bytes(sign(canonical(vsa), key))


def write_output(out: Path, data: bytes) -> None:
    """Write ``data`` to ``out`` whole or not at all (a temporary file beside it, renamed)."""
    folder = out.parent if str(out.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=folder)
    except OSError as err:
        raise UsageError(f"cannot write {printable(out)}: {err.strerror or err}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        raise UsageError(f"cannot write {printable(out)}: {err.strerror or err}") from None
