"""The offline verifier: is a bundle authentic, and does its verdict follow from its bytes?

Base install only (standard library, jsonschema, cryptography, rfc8785; numpy only as the
oracle's optional, test-proven bit-identical fast path). Never torch, triton or vLLM.

Order (each step reads only bytes a previous step verified; nothing is inflated before the
sizes it may inflate to are known from the manifest):
 1. the DSSE envelope's shape (one signature, canonical base64, sizes), then its Ed25519
    signature with the given public key, then its payload type;
 2. the payload is RFC 8785 canonical JSON, an in-toto Statement v1 valid under the
    receipt schema; ``receipt.json`` is byte-identical to it;
 3. the bundle's tree, folders included, is exactly what the receipt's subjects imply: no
    link, special file, unreadable folder, extra folder or extra file;
 4. the manifest (size cap, stored and raw sha256, optionally the frozen hash, strict JSON,
    schema, limits); ``cases.json`` is byte for byte the case layout the manifest implies;
 5. every subject's declared sizes are the ones that layout implies (raw = batch x vocab x
    4 for logits and outputs, ...), each case under the verifier's own ceiling, the whole
    under the manifest's bundle cap;
 6. the per-row results file, the kernel-path evidence (every per-case hash it records
    against the artifacts), the source and patch pins against the manifest, the dispatch
    path (each side's backend is the manifest's, always checked; each case's split-path
    flag is what both sides' evidence proves);
 6b. both sides as the verified manifest pins them (version, pin, tree, kernel, patch) and
    what the receipt records of their isolation; what the caller requires of them
    (``require``: base and change releases or pins, the change's patch, both sides isolated;
    :mod:`.verify_sides`), refused before anything is rerun;
 7. the harness code digest against this verifier's own code (reported; fatal if strict);
 8. case by case: the captured inputs and outputs are read (stored sha256), decoded with
    the declared size as a hard cap (raw sha256), checked against what the manifest fixes
    and, for every side judged "ok", every output row a masked copy of its input row
    (kept-value integrity: bindings of every bundle, whatever rule set judges it), and the
    oracle and the gate rerun on them by the rule set the receipt names (``require_rules``:
    one the caller accepts); identical per-row results and the same verdict; only one case
    is held at a time;
 9. ``report.md`` is byte for byte what the report generator makes from the verified data.

Every failure is a :class:`~harness.core.errors.VerificationError` (one line, exit 4);
unexpected exceptions are wrapped too (fail closed).

This module orchestrates; each phase is a module of its own: reading the signed artifacts
(steps 1-3, 5: :mod:`.verify_artifacts`), what the statement binds (steps 4, 6:
:mod:`.verify_bindings`), the oracle and gate rerun and the report (steps 8, 9:
:mod:`.verify_rerun`).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from . import provenance
from .bundle import MANIFEST, BundleDir
from .digest import sha256_hex
from .errors import (
    BindingMismatchError,
    HarnessDriftError,
    MalformedEvidenceError,
    UsageError,
    wrap_as,
)
from .keys import keyid
from .limits import workers as worker_count
from .manifest import read_frozen_hash
from .provenance import describe_source
from .verify_artifacts import (
    Artifacts,
    check_files,
    check_names,
    check_sizes,
    read_statement,
    signer_hint,
)
from .verify_bindings import (
    bound_layout,
    bundle_manifest,
    case_paths,
    check_bound_json,
    check_dispatch,
    check_evidence_digests,
    check_library_binding,
    check_pins,
    check_sampling,
    judgement,
)
from .verify_rerun import check_report, rerun
from .verify_sides import Requirements, change_facts, check_requirements, recorded, side_facts

if TYPE_CHECKING:
    from .judge import RowMemo

__all__ = [
    "UnsafeBundleView",
    "Verified",
    "case_paths",
    "describe_source",
    "judgement",
    "open_bundle",
    "read_frozen_hash",
    "signer_hint",
    "verify_bundle",
]


@dataclass(frozen=True)
class Verified:
    """What was verified; built only from bytes whose digests and signature checked."""

    path: Path
    keyid: str
    verdict: dict[str, Any]
    rows: int
    cases: int
    artifacts: int
    manifest_sha256: str
    frozen_manifest: str | None  # the frozen hash compared against, if one was given
    harness_recorded: str
    harness_local: str
    harness_algorithm: str
    harness_source: dict[str, Any] | None  # commit and cleanliness the receipt records
    payload_sha256: str  # of the signed statement: names every artifact's digest
    workers: int
    seconds: dict[str, float]  # wall time per phase: read_and_digest, checks, rerun
    rules: str  # the rule set the rows were re-judged by (the receipt's, or seed/v1)
    report_format: str  # the format report.md was regenerated in
    stop_rows: dict[str, int]  # rows stopped per reason, from the re-judged rows
    # a run-time built library (FlashInfer's JIT) bound to its pinned sources: "bound",
    # "unbound (legacy evidence)" or "not applicable" (verify_bindings.check_library_binding)
    library_binding: str = "not applicable"
    # the draws the manifest declares (``draws_per_row``, ``seed``, ``offset``), which
    # check_sampling held both sides' evidence to; None where it declares none
    sampling: dict[str, int] | None = None
    # both sides as the verified manifest pins them (verify_sides.side_facts), the change
    # the receipt names (change_facts), what its signed environment records unchecked
    # (verify_sides.recorded: isolation, signing key kind, reused base) and what the caller
    # required of them and found (Requirements.to_json)
    sides: dict[str, dict[str, Any]] = field(default_factory=dict)
    change: dict[str, Any] = field(default_factory=dict)
    recorded: dict[str, Any] = field(default_factory=dict)
    required: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The verified facts for scripts (``verify --json``): recomputed or checked values;
        what the signed receipt records that nothing can check (each side's isolation, the
        signing key's kind, a reused base's bundle) only under ``sides.<side>.isolation``,
        ``signing`` and ``base_reused_from``, as recorded."""
        return {
            "schema": "topp-gate/verify-result/v1",
            "bundle": str(self.path),
            "verified": True,
            "verdict": self.verdict["verdict"],
            "reasons": list(self.verdict["reasons"]),
            "rows": self.rows,
            "rows_stopped": self.verdict["rows_stopped"],
            "stopped_rows_by_reason": dict(self.stop_rows),
            "cases": self.cases,
            "rules": self.rules,
            "report_format": self.report_format,
            "library_binding": self.library_binding,
            "sampling": None if self.sampling is None else dict(self.sampling),
            **self.sides_json(),
            "signer_keyid": self.keyid,
            "manifest_sha256": self.manifest_sha256,
            "frozen_manifest_sha256": self.frozen_manifest,
            "payload_sha256": self.payload_sha256,
            "harness": {"algorithm": self.harness_algorithm, "recorded": self.harness_recorded,
                        "this_verifier": self.harness_local, "matches": self.harness_matches,
                        "source": self.harness_source},
        }

    def sides_json(self) -> dict[str, Any]:
        """Both sides (``sides``: each as the verified manifest pins it, with its
        ``isolation`` as the receipt records it), the ``change``, the recorded ``signing``
        key kind and ``base_reused_from``, and what was ``required`` of them and found."""
        isolation = self.recorded.get("isolation", {})
        return {
            "sides": {side: {**facts, "isolation": isolation.get(side)}
                      for side, facts in self.sides.items()},
            "change": dict(self.change),
            "isolation_recorded": bool(self.recorded.get("isolation_recorded", False)),
            "signing": self.recorded.get("signing"),
            "base_reused_from": self.recorded.get("base_reused_from"),
            "required": dict(self.required),
        }

    @property
    def harness_matches(self) -> bool:
        return self.harness_recorded == self.harness_local


@dataclass(frozen=True)
class UnsafeBundleView:
    """A bundle whose signature, schema, file set and (lazily) digests were checked, but
    whose verdict was NOT recomputed: ``statement["predicate"]["verdict"]`` is only what
    the signer claimed. Named ``Unsafe`` (as sigstore names its bypasses) so that no caller
    mistakes it for a verdict: :func:`verify_bundle` returns one (:class:`Verified`).

    For tools that need artifact bytes (probes, reports): ``raw(name)`` returns the raw,
    decoded bytes of a subject named by its raw path (``inputs/x.logits.f32``), after its
    stored and raw digests check.
    """

    statement: dict[str, Any]
    _artifacts: Artifacts
    payload_sha256: str  # of the signed statement (compare with Verified.payload_sha256)

    def raw(self, name: str) -> bytes:
        return self._artifacts.raw(name)

    def digest(self, name: str) -> str:
        """The raw sha256 the signed statement binds for subject ``name``."""
        if name not in self._artifacts.subjects:
            raise MalformedEvidenceError(f"receipt has no subject {name!r}")
        return self._artifacts.digest(name)

    def stored_path(self, name: str) -> str:
        subject = self._artifacts.subjects.get(name)
        if subject is None:
            raise MalformedEvidenceError(f"receipt has no subject {name!r}")
        return str(subject["annotations"]["stored"])


def open_bundle(path: Path, public_key: Ed25519PublicKey) -> UnsafeBundleView:
    """Steps 1-3 of verification, then lazy digest-checked reads (every failure typed).
    The oracle and gate are not rerun: the view is :class:`UnsafeBundleView`."""
    with wrap_as(MalformedEvidenceError, failing_closed="opening a bundle"):
        bundle = BundleDir(Path(path))
        statement, payload = read_statement(bundle, public_key)
        artifacts = Artifacts(bundle, statement["subject"])
        check_files(bundle, artifacts)
        return UnsafeBundleView(statement, artifacts, sha256_hex(payload))


def verify_bundle(path: Path, public_key: Ed25519PublicKey, *, strict: bool = False,
                  frozen_manifest: Path | None = None, workers: int | None = None,
                  fast: bool | None = None,
                  progress: Callable[[int], None] | None = None,
                  require_rules: Collection[str] | None = None,
                  require_library_binding: bool = False,
                  row_memo: RowMemo | None = None,
                  require: Requirements | None = None) -> Verified:
    """Verify the bundle at ``path``; return what was verified or raise VerificationError.

    A problem with ``frozen_manifest`` itself (missing, not a regular file, not frozen) is
    a UsageError (exit 2), raised before the bundle is read. ``require_rules``: the rule-set
    ids the caller accepts; a bundle judged by another is refused (BindingMismatchError, exit
    4) before its rows are rerun; an empty collection or an id no rule set has is a
    UsageError. ``require_library_binding``: refuse (exit 4) a bundle with a run-time built
    library that its evidence does not bind to the pinned sources (legacy evidence).
    ``row_memo``: the caller's memo of rows judged in this process (:class:`.judge.RowMemo`).
    ``require``: what the reviewer requires of the two sides (:class:`.verify_sides.
    Requirements`: base and change pins or releases, the change's patch, both sides
    isolated); a bundle that does not meet it is refused (exit 4) before its rows are rerun.
    """
    frozen = read_frozen_hash(Path(frozen_manifest)) if frozen_manifest is not None else None
    required = _required_rules(require_rules)
    with wrap_as(MalformedEvidenceError, failing_closed="verifying"):
        return _verify(Path(path), public_key, strict, frozen,
                       worker_count(workers), fast, progress, required,
                       require_library=require_library_binding, row_memo=row_memo,
                       require=require)


def _required_rules(require_rules: Collection[str] | None) -> tuple[str, ...] | None:
    """The accepted rule-set ids, each a registered one (usage otherwise), in given order."""
    from .rulesets import RULE_SETS

    if require_rules is None:
        return None
    if isinstance(require_rules, str):  # one id, not its characters
        require_rules = (require_rules,)
    required = tuple(dict.fromkeys(require_rules))
    if not required:
        raise UsageError("no rule set required: name at least one")
    unknown = [r for r in required if r not in RULE_SETS]
    if unknown:
        raise UsageError(f"unknown rule set {unknown[0]!r} required (known: "
                         f"{', '.join(RULE_SETS)})")
    return required


def _verify(path: Path, public_key: Ed25519PublicKey, strict: bool, frozen: str | None,
            workers: int, fast: bool | None,
            progress: Callable[[int], None] | None,
            required: tuple[str, ...] | None = None, *,
            require_library: bool = False, row_memo: RowMemo | None = None,
            require: Requirements | None = None) -> Verified:
    clock = time.perf_counter
    seconds: dict[str, float] = {}
    start = clock()
    bundle = BundleDir(path)
    statement, payload = read_statement(bundle, public_key)
    predicate = statement["predicate"]
    artifacts = Artifacts(bundle, statement["subject"])
    check_files(bundle, artifacts)
    manifest = bundle_manifest(artifacts, predicate, frozen)
    rules, report_format = judgement(predicate, manifest)
    if required is not None and rules not in required:
        raise BindingMismatchError("rule set the bundle was judged by",
                                   f"one of {', '.join(required)}", rules,
                                   said_by="the required list")
    layout = bound_layout(artifacts, predicate, manifest)
    seconds["read_and_digest"] = clock() - start
    start = clock()
    check_names(artifacts, layout, predicate["cases"])
    check_sizes(artifacts, layout, manifest, predicate)  # before anything is inflated
    check_bound_json(artifacts, predicate)
    check_pins(manifest, predicate)
    check_dispatch(manifest, predicate)
    check_evidence_digests(artifacts, layout, predicate)
    check_sampling(manifest, layout, predicate)
    library = check_library_binding(manifest, predicate)
    if require_library and library not in ("bound", "not applicable"):
        raise BindingMismatchError("library binding (--require-library-binding)",
                                   "a library bound to its pinned sources", library,
                                   said_by="the reviewer")
    sides = side_facts(manifest, predicate)  # after check_pins: the receipt agrees
    environment = recorded(predicate)
    if require is not None:
        check_requirements(require, manifest, sides, environment)
    recorded_digest = predicate["harness"]["sha256"]
    local = provenance.installed_digest(predicate["harness"]["algorithm"])["sha256"]
    if strict and recorded_digest != local:
        raise HarnessDriftError("harness code digest", recorded_digest, local)
    seconds["checks"] = clock() - start
    start = clock()
    rows, final = rerun(artifacts, layout, predicate, workers, fast, progress, rules,
                        manifest, row_memo)
    check_report(artifacts, manifest, layout, predicate, rows, final, rules, report_format)
    seconds["rerun"] = clock() - start
    return Verified(
        path=path, keyid=keyid(public_key), verdict=final, rows=final["rows"],
        cases=len(layout), artifacts=len(artifacts.subjects),
        manifest_sha256=artifacts.digest(MANIFEST), frozen_manifest=frozen,
        harness_recorded=recorded_digest, harness_local=local,
        harness_algorithm=predicate["harness"]["algorithm"],
        harness_source=predicate["harness"].get("source"), payload_sha256=sha256_hex(payload),
        workers=workers, seconds=seconds, rules=rules, report_format=report_format,
        stop_rows=dict(sorted(Counter(r for row in rows for r in row["stops"]).items())),
        library_binding=library, sampling=manifest.sampling, sides=sides,
        change=change_facts(manifest, predicate), recorded=environment,
        required=require.to_json() if require is not None else {})
