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
 7. the harness code digest against this verifier's own code (reported; fatal if strict);
 8. case by case: the captured inputs and outputs are read (stored sha256), decoded with
    the declared size as a hard cap (raw sha256), and the oracle and the gate rerun on
    them; identical per-row results and the same verdict; only one case is held at a time;
 9. ``report.md`` is byte for byte what the report generator makes from the verified data.

Every failure is a :class:`~harness.core.errors.VerificationError` (one line, exit 4);
unexpected exceptions are wrapped too (fail closed).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from . import dsse, provenance, receipt
from .bundle import (
    CASES,
    CODEC_MASK,
    CODEC_NONE,
    CODEC_XZ,
    CODEC_ZLIB,
    ENVELOPE,
    INPUT_CODECS,
    MANIFEST,
    MAX_ENVELOPE_BYTES,
    RECEIPT,
    ROWS,
    BundleDir,
    check_path,
    evidence_name,
    mask_decode,
    output_name,
    rows_bytes,
    xz_decompress,
    zlib_decompress,
)
from .digest import parse_sha256sum_line, sha256_hex
from .errors import (
    BindingMismatchError,
    HarnessDriftError,
    HarnessError,
    MalformedEvidenceError,
    UnknownJudgementError,
    UsageError,
    wrap_as,
)
from .keys import keyid
from .limits import MAX_CASE_VALUES, MAX_PLAIN_BYTES
from .limits import workers as worker_count
from .names import SIDES, SPLIT, proven_by_case
from .safeio import read_regular_file
from .strictjson import loads_strict

REPORT_MD = "report.md"
REPORT_PNG = "report.png"
REPORT_FILES = (REPORT_MD, REPORT_PNG)
# The verifier's own ceilings, whatever a manifest declares, live in harness/core/limits.py
# (one home, shared with manifest new and run): one case's array at most MAX_CASE_VALUES
# float32 values, a plain (uncompressed) file other than the manifest at most
# MAX_PLAIN_BYTES, the whole bundle at most MAX_WORK_VALUES values to judge (refused when
# the manifest is parsed, before any other artifact is read). With one case held at a
# time, these keep peak memory under 1 GiB for any input (tests/unit/test_verify_hostile.py
# measures it).
# A compressed stream is never much larger than what it decodes to.
_STORED_SLACK = 4096


def _stored_cap(decoded: int) -> int:
    return decoded + decoded // 16 + _STORED_SLACK


def _mask_coded_cap(raw_size: int) -> int:
    """Largest f32mask stream for ``raw_size`` output bytes: header, a code per value,
    and every value listed."""
    return 12 + raw_size // 4 + raw_size


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

    def to_json(self) -> dict[str, Any]:
        """The verified facts for scripts (``verify --json``); only recomputed or checked
        values, never a field the signer merely claimed."""
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
            "signer_keyid": self.keyid,
            "manifest_sha256": self.manifest_sha256,
            "frozen_manifest_sha256": self.frozen_manifest,
            "payload_sha256": self.payload_sha256,
            "harness": {"algorithm": self.harness_algorithm, "recorded": self.harness_recorded,
                        "this_verifier": self.harness_local, "matches": self.harness_matches,
                        "source": self.harness_source},
        }

    @property
    def harness_matches(self) -> bool:
        return self.harness_recorded == self.harness_local


def describe_source(source: dict[str, Any] | None) -> str:
    """One line for the commit a receipt records (receipts before provenance have none)."""
    if source is None:
        return ("no commit recorded (an older receipt: VERIFYING.md lists the commit whose "
                "harness digest it records)")
    if source.get("commit") is None:
        return "no commit recorded (the harness did not run from a git checkout)"
    clean = {True: "clean tree", False: "tree with uncommitted changes",
             None: "cleanliness not recorded"}[source.get("clean")]
    how = "" if source.get("how") == "git" else f", as claimed by {source.get('how')}"
    return f"commit {source['commit']} ({clean}{how})"


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= 160 else text[:157] + "..."


def _first_difference(said: Any, found: Any, path: str = "") -> tuple[str, Any, Any]:
    """The first (sorted-key) place where two JSON values differ, as a dotted path."""
    if isinstance(said, dict) and isinstance(found, dict):
        for key in sorted(set(said) | set(found)):
            if said.get(key, _MISSING) != found.get(key, _MISSING):
                return _first_difference(said.get(key, _MISSING), found.get(key, _MISSING),
                                         f"{path}.{key}" if path else str(key))
    if isinstance(said, list) and isinstance(found, list) and len(said) == len(found):
        for i, (a, b) in enumerate(zip(said, found, strict=True)):
            if a != b:
                return _first_difference(a, b, f"{path}[{i}]")
    return path, said, found


_MISSING = "(absent)"


def read_frozen_hash(path: Path) -> str:
    """The frozen sha256 an auditor supplies: a ``.sha256`` file, or a committed manifest
    whose ``.sha256`` sibling freezes it (the manifest's bytes must match that hash).

    Everything wrong here is wrong with the argument, not with the bundle: a UsageError
    (exit 2), whether the file is missing, not a regular file, malformed, or a committed
    manifest that no longer matches its own ``.sha256``.
    """
    from .manifest import MAX_FROZEN_HASH_BYTES, frozen_sha256, read_manifest_bytes

    with wrap_as(UsageError, "--frozen-manifest: ", keep=UsageError):
        if path.name.endswith(".sha256"):
            text = read_regular_file(path, "--frozen-manifest", MAX_FROZEN_HASH_BYTES)
            line = parse_sha256sum_line(text.decode("utf-8", "replace"))
            if line is None:
                raise UsageError(f"--frozen-manifest {path} is not a sha256sum line")
            return line[0]
        actual = sha256_hex(read_manifest_bytes(path))
        frozen = frozen_sha256(path)
    if frozen != actual:
        raise UsageError(f"--frozen-manifest {path} does not match its own "
                         f"{path.name}.sha256 (frozen {frozen}, file {actual})")
    return frozen


class _Artifacts:
    """Subjects of a verified statement, read and decoded on demand under their checks."""

    def __init__(self, bundle: BundleDir, subjects: list[dict[str, Any]]) -> None:
        self.bundle = bundle
        self.subjects: dict[str, dict[str, Any]] = {}
        stored: set[str] = set()
        for subject in subjects:
            name = check_path(subject["name"])
            ann = subject["annotations"]
            stored_name = check_path(ann["stored"])
            if name in self.subjects or stored_name in stored:
                raise MalformedEvidenceError(f"receipt names artifact {name!r} twice")
            if stored_name in (RECEIPT, ENVELOPE):
                raise MalformedEvidenceError(f"receipt names {stored_name} as an artifact")
            self.subjects[name] = subject
            stored.add(stored_name)
        self.stored = stored
        self._raw: dict[str, bytes] = {}

    def digest(self, name: str) -> str:
        return str(self.subjects[name]["digest"]["sha256"])

    def size(self, name: str) -> int:
        return int(self.subjects[name]["annotations"]["size"])

    def decode(self, name: str, base: bytes | None = None) -> bytes:
        """Read a subject's stored file (its size and sha256 checked before decoding),
        decode it with its declared size as a hard cap, check the raw sha256. Not cached.

        ``base`` is the raw input a mask-coded output is coded against.
        """
        subject = self.subjects.get(name)
        if subject is None:
            raise MalformedEvidenceError(f"receipt has no subject {name!r}")
        ann = subject["annotations"]
        data = self.bundle.read(ann["stored"], exact_size=ann["stored_size"])
        found = sha256_hex(data)
        if found != ann["stored_sha256"]:
            raise BindingMismatchError(f"sha256 of stored {ann['stored']}",
                                       ann["stored_sha256"], found)
        codec = ann["codec"]
        size = int(ann["size"])
        if codec == CODEC_NONE:
            raw = data
        elif codec == CODEC_XZ:
            raw = xz_decompress(data, size)
        elif codec == CODEC_ZLIB:
            raw = zlib_decompress(data, size)
        elif codec == CODEC_MASK:
            if base is None:
                raise MalformedEvidenceError(f"{name} is mask-coded but has no base input")
            raw = mask_decode(xz_decompress(data, _mask_coded_cap(size)), base)
        else:  # the schema allows no other codec
            raise MalformedEvidenceError(f"{name} uses unknown codec {codec!r}")
        del data
        if len(raw) != size:
            raise BindingMismatchError(f"size of {name}", str(size), str(len(raw)))
        found = sha256_hex(raw)
        if found != subject["digest"]["sha256"]:
            raise BindingMismatchError(f"sha256 of {name}", subject["digest"]["sha256"], found)
        return raw

    def raw(self, name: str) -> bytes:
        """:meth:`decode`, cached, resolving a mask-coded output's base by its annotation
        (for tools that read a few artifacts; :func:`verify_bundle` streams instead)."""
        if name in self._raw:
            return self._raw[name]
        subject = self.subjects.get(name)
        if subject is None:
            raise MalformedEvidenceError(f"receipt has no subject {name!r}")
        base = None
        if subject["annotations"]["codec"] == CODEC_MASK:
            base_name = subject["annotations"].get("base")
            base_subject = self.subjects.get(base_name) if isinstance(base_name, str) else None
            if base_subject is None or base_subject["annotations"]["codec"] == CODEC_MASK:
                raise MalformedEvidenceError(f"{name} is coded against {base_name!r}, which is "
                                             "not a plain input artifact")
            base = self.raw(str(base_name))
        raw = self.decode(name, base)
        self._raw[name] = raw
        return raw


def _statement(bundle: BundleDir, public_key: Ed25519PublicKey) -> tuple[dict[str, Any], bytes]:
    envelope = bundle.read(ENVELOPE, max_size=MAX_ENVELOPE_BYTES)
    # DSSE tolerates unauthenticated variation (keyid hints, either base64 alphabet, spare
    # base64 bits, extra signatures, whitespace). A bundle must not: every byte of it is
    # bound, so exact=True accepts only what the writer makes for this key.
    payload = dsse.verify(envelope, public_key, dsse.IN_TOTO_PAYLOAD_TYPE, exact=True)
    value = loads_strict(payload, "signed payload")
    if receipt.canonical(value) != payload:
        raise MalformedEvidenceError("signed payload is not RFC 8785 canonical JSON")
    receipt.validate(value)
    readable = bundle.read(RECEIPT, max_size=MAX_ENVELOPE_BYTES)
    if readable != payload:
        raise BindingMismatchError(f"{RECEIPT} bytes", "the signed payload",
                                   "different bytes")
    return value, payload


def _check_files(bundle: BundleDir, artifacts: _Artifacts) -> None:
    """The tree is exactly the receipt's: its stored files, the two receipt files, and the
    folders that hold them; nothing else, not even an empty folder."""
    tree = bundle.tree()
    expected = artifacts.stored | {RECEIPT, ENVELOPE}
    missing = sorted(expected - tree.files)
    if missing:
        raise MalformedEvidenceError(f"bundle file {missing[0]} is missing "
                                     f"({len(missing)} missing)")
    extra = sorted(tree.files - expected)
    if extra:
        raise MalformedEvidenceError(f"bundle holds a file the receipt does not name: "
                                     f"{extra[0]!r}")
    folders = {name.rsplit("/", i)[0] for name in expected for i in range(1, name.count("/") + 1)}
    extra = sorted(tree.folders - folders)
    if extra:
        raise MalformedEvidenceError(f"bundle holds a folder the receipt does not imply: "
                                     f"{extra[0]!r}")


def _check_names(artifacts: _Artifacts, layout: list[Any], cases: list[dict[str, Any]]) -> None:
    """The subjects are exactly the layout's artifacts: nothing unexpected, nothing missing."""
    allowed = {MANIFEST, CASES, ROWS, *REPORT_FILES, *(evidence_name(s) for s in SIDES)}
    required = {MANIFEST, CASES, ROWS}
    for case, entry in zip(layout, cases, strict=True):
        required.update(case.input_sizes())
        for side in SIDES:
            if entry[side] == "ok":
                required.add(output_name(side, case.id))
    allowed |= required
    names = set(artifacts.subjects)
    if not required <= names:
        raise MalformedEvidenceError(f"receipt lacks artifact {sorted(required - names)[0]}")
    if not names <= allowed:
        raise MalformedEvidenceError(f"receipt names an unexpected artifact "
                                     f"{sorted(names - allowed)[0]}")
    for name in names:
        codec = artifacts.subjects[name]["annotations"]["codec"]
        want: tuple[str, ...] = (CODEC_NONE,)
        if name.startswith("outputs/") and name.endswith(".out.f32"):
            want = (CODEC_MASK,)
        elif name.startswith("inputs/"):
            want = INPUT_CODECS
        if codec not in want:
            raise MalformedEvidenceError(f"{name} is stored with codec {codec}, not "
                                         f"{' or '.join(want)}")


def _plain(artifacts: _Artifacts, name: str, max_bytes: int) -> bytes:
    """A plain (codec ``none``) subject, refused unread when it declares more than
    ``max_bytes``."""
    ann = artifacts.subjects[name]["annotations"]
    if ann["codec"] != CODEC_NONE:
        raise MalformedEvidenceError(f"{name} is stored with codec {ann['codec']}, not none")
    if int(ann["size"]) != int(ann["stored_size"]) or int(ann["size"]) > max_bytes:
        raise MalformedEvidenceError(f"{name} declares {ann['size']} bytes ({ann['stored_size']}"
                                     f" stored); at most {max_bytes}, stored as is")
    return artifacts.decode(name)


def _manifest(artifacts: _Artifacts, predicate: dict[str, Any], frozen: str | None) -> Any:
    from .manifest import MAX_MANIFEST_BYTES, parse_manifest

    if MANIFEST not in artifacts.subjects:
        raise MalformedEvidenceError(f"receipt lacks artifact {MANIFEST}")
    digest = artifacts.digest(MANIFEST)
    if predicate["hashes"]["manifest"] != digest:
        raise BindingMismatchError("manifest hash", predicate["hashes"]["manifest"], digest)
    if frozen is not None and frozen != digest:
        raise BindingMismatchError("bundle manifest's sha256 vs --frozen-manifest", frozen,
                                   digest, said_by="the frozen manifest")
    raw = _plain(artifacts, MANIFEST, MAX_MANIFEST_BYTES)
    with wrap_as(MalformedEvidenceError, "bundle manifest: "):
        return parse_manifest(raw, source=MANIFEST)


def _layout(artifacts: _Artifacts, predicate: dict[str, Any], manifest: Any) -> list[Any]:
    """The manifest's case layout; ``cases.json`` must be exactly its rendering (so it is
    never parsed: a duplicate key or any other byte of difference is refused)."""
    from .cases_index import render_cases_index
    from .manifest import expected_layout

    layout = expected_layout(manifest)
    expected = render_cases_index(layout)
    if CASES not in artifacts.subjects:
        raise MalformedEvidenceError(f"receipt lacks artifact {CASES}")
    digest = artifacts.digest(CASES)
    if predicate["hashes"]["case_matrix"] != digest:
        raise BindingMismatchError("case matrix hash", predicate["hashes"]["case_matrix"], digest)
    if digest != sha256_hex(expected):
        raise BindingMismatchError(f"{CASES} vs the case layout the manifest implies",
                                   sha256_hex(expected), digest, said_by="the manifest")
    if _plain(artifacts, CASES, len(expected)) != expected:  # pragma: no cover - sha256
        raise BindingMismatchError(CASES, "the manifest's case layout", "different bytes")
    recorded = [c["id"] for c in predicate["cases"]]
    actual = [c.id for c in layout]
    if recorded != actual:
        raise BindingMismatchError("case list", _short(recorded), _short(actual))
    return layout


def _check_sizes(artifacts: _Artifacts, layout: list[Any], manifest: Any,
                 predicate: dict[str, Any]) -> None:
    """Before anything is inflated: each subject declares exactly the raw size the layout
    implies, and a stored size a stream of that size can have; every case is under the
    verifier's own ceiling, and the stored total under the manifest's cap."""
    implied: dict[str, int] = {ROWS: len(rows_bytes(predicate["rows"]))}
    for case in layout:
        if case.batch * case.vocab > MAX_CASE_VALUES:
            raise MalformedEvidenceError(
                f"case {case.id} holds {case.batch} x {case.vocab} values, over this "
                f"verifier's ceiling of {MAX_CASE_VALUES} per case")
        implied.update(case.input_sizes())
        for side in SIDES:
            implied[output_name(side, case.id)] = case.logits_bytes
    for name, subject in sorted(artifacts.subjects.items()):
        ann = subject["annotations"]
        size, stored = int(ann["size"]), int(ann["stored_size"])
        want = implied.get(name)
        if want is not None and size != want:
            raise MalformedEvidenceError(f"{name} declares {size} raw bytes; the case layout "
                                         f"implies {want}")
        codec = ann["codec"]
        if codec == CODEC_NONE:
            if stored != size or size > MAX_PLAIN_BYTES:
                raise MalformedEvidenceError(f"{name} declares {size} bytes ({stored} stored)"
                                             f"; at most {MAX_PLAIN_BYTES}, stored as is")
        else:
            decoded = _mask_coded_cap(size) if codec == CODEC_MASK else size
            if stored > _stored_cap(decoded):
                raise MalformedEvidenceError(f"{name} declares {stored} stored bytes for "
                                             f"{size} raw: not a stream of that size")
    total = sum(int(s["annotations"]["stored_size"]) for s in artifacts.subjects.values())
    cap = int(manifest.limits["max_bundle_bytes"])
    recorded = predicate["bundle"]["max_bytes"]
    if recorded is not None and recorded != cap:
        raise BindingMismatchError("bundle size cap", str(recorded), str(cap))
    if total > cap:
        raise MalformedEvidenceError(f"bundle artifacts hold {total} bytes, over the "
                                     f"manifest's cap of {cap}")


def _bound_json(artifacts: _Artifacts, predicate: dict[str, Any]) -> None:
    digest = artifacts.digest(ROWS)
    if predicate["hashes"]["rows"] != digest:
        raise BindingMismatchError("per-row results hash", predicate["hashes"]["rows"], digest)
    if _plain(artifacts, ROWS, MAX_PLAIN_BYTES) != rows_bytes(predicate["rows"]):
        raise BindingMismatchError(ROWS, "the receipt's per-row results", "different results")
    for side in SIDES:
        name = evidence_name(side)
        recorded = predicate["kernel_path"][side]
        if name in artifacts.subjects:
            value = loads_strict(_plain(artifacts, name, MAX_PLAIN_BYTES), name)
            if value != recorded:
                raise BindingMismatchError(f"{side} kernel-path evidence",
                                           "the receipt's kernel_path", f"different {name}")
        elif recorded is not None:
            raise MalformedEvidenceError(f"receipt records {side} evidence but names no {name}")


def _check_pins(manifest: Any, predicate: dict[str, Any]) -> None:
    """The receipt's source and patch hashes are the manifest's pins; evidence of any other
    kernel file must have stopped the run (``evidence_drift``)."""
    pinned_patch = manifest.patch_sha256
    if pinned_patch is not None and predicate["hashes"]["patch"] != pinned_patch:
        raise BindingMismatchError("patch hash vs the manifest's pin", pinned_patch,
                                   predicate["hashes"]["patch"])
    recorded = predicate["hashes"]["sources"]
    for side in SIDES:
        pins = manifest.sides[side].receipt_pins
        entry = recorded.get(side)
        if not isinstance(entry, dict):
            raise MalformedEvidenceError(f"receipt records no {side} sources")
        for key in pins:
            if entry.get(key) != pins[key]:
                raise BindingMismatchError(f"{side} source {key} vs the manifest's pin",
                                           str(pins[key]), str(entry.get(key)))
        evidence = predicate["kernel_path"][side]
        imported = evidence.get("kernel_sha256") if isinstance(evidence, dict) else None
        if imported is not None and imported != pins["kernel_sha256"] \
                and "evidence_drift" not in predicate["run_stops"]:
            raise BindingMismatchError(f"{side} kernel imported vs pinned, without a stop",
                                       pins["kernel_sha256"], str(imported))


# What the runner records for a side whose child wrote no evidence at all (run.py)
_NO_EVIDENCE_KEYS = {"status", "reason"}
_NO_OUTPUT_STATUSES = ("timeout", "kernel_crash")


def _check_backend(side: str, evidence: Any, required: str, statuses: list[str]) -> None:
    """A side's evidence names the manifest's backend. Only a side whose child left no
    evidence (every case ``timeout`` or ``kernel_crash``, and the runner's two-key record
    or nothing) may lack it: the check cannot be skipped by dropping the key."""
    if isinstance(evidence, dict) and "backend" in evidence:
        if evidence["backend"] != required:
            raise BindingMismatchError(f"{side} backend vs the manifest's", str(required),
                                       str(evidence["backend"]))
        return
    no_evidence = evidence is None or (isinstance(evidence, dict)
                                       and set(evidence) == _NO_EVIDENCE_KEYS)
    if not no_evidence or any(status not in _NO_OUTPUT_STATUSES for status in statuses):
        raise MalformedEvidenceError(f"{side} kernel-path evidence names no backend")


def case_paths(entry: dict[str, Any]) -> dict[str, str | None]:
    """Per side, the path a receipt case entry says was proven. A version 1 receipt has
    no ``paths``: both sides took the split path exactly when ``split_path`` is true."""
    paths = entry.get("paths")
    if isinstance(paths, dict):
        return {side: paths.get(side) for side in SIDES}
    return {side: SPLIT if entry["split_path"] else None for side in SIDES}


def _check_dispatch(manifest: Any, predicate: dict[str, Any]) -> None:
    """The path that ran is the manifest's: each side's backend, and every case's split-path
    flag equal to what both sides' evidence proves; a case the manifest requires on the
    split path but that lacks proof must have stopped the run. A version 3 traffic case may
    name its own path per side (``Manifest.dispatch(side, case_id)``); for versions 1 and
    2 every case takes its side's path."""
    required = manifest.backend["required"]
    proven: dict[str, dict[str, bool]] = {}
    declared = {side: manifest.case_dispatch(side) for side in SIDES}
    for side in SIDES:
        evidence = predicate["kernel_path"][side]
        _check_backend(side, evidence, required, [c[side] for c in predicate["cases"]])
        proven[side] = proven_by_case(evidence, declared[side])
    must_split = bool(manifest.backend.get("split_path_required", True))
    for entry in predicate["cases"]:
        case_id = entry["id"]
        path = {side: declared[side].get(case_id, manifest.dispatch(side)) for side in SIDES}
        if manifest.receipt_paths:
            said = entry.get("paths")
            found = {side: path[side] if proven[side].get(case_id, False)
                     else None for side in SIDES}
            if said != found:
                raise BindingMismatchError(f"case {case_id} paths vs the kernel evidence",
                                           str(said), str(found))
        elif "paths" in entry:
            raise MalformedEvidenceError(f"case {case_id}: paths in a version 1 receipt")
        proved_declared = all(proven[side].get(case_id, False) for side in SIDES)
        # version 1 declares the split path for every side, so its flag is the proof alone
        expected = proved_declared and all(path[side] == SPLIT for side in SIDES)
        if entry["split_path"] != expected:
            raise BindingMismatchError(f"case {case_id} split-path flag vs the kernel evidence",
                                       str(entry["split_path"]), f"evidence proving {expected}")
        both_ok = all(entry[side] == "ok" for side in SIDES)
        if must_split and both_ok and not proved_declared \
                and "split_path_not_taken" not in predicate["run_stops"]:
            raise BindingMismatchError(f"case {case_id} without split-path proof",
                                       "a split_path_not_taken stop", "no such stop")


_EVIDENCE_HASHES = (("logits_sha256", "logits"), ("p_sha256", "p"), ("output_sha256", "output"))


def _evidence_records(side: str, evidence: Any) -> dict[str, dict[str, Any]]:
    records: dict[str, dict[str, Any]] = {}
    cases = evidence.get("cases", []) if isinstance(evidence, dict) else []
    for record in cases if isinstance(cases, list) else []:
        if isinstance(record, dict):
            case_id = str(record.get("id"))
            if case_id in records:
                raise MalformedEvidenceError(f"{side} kernel-path evidence records case "
                                             f"{case_id!r} twice")
            records[case_id] = record
    return records


def _check_evidence_digests(artifacts: _Artifacts, layout: list[Any],
                            predicate: dict[str, Any]) -> None:
    """The per-case hashes each side's kernel evidence records are the artifacts' own: for
    a case judged from that side's output (``ok``), the logits and p the child hashed are
    the captured ones and the output it hashed is the stored one; a case recorded as
    ``input_mismatch`` really names other input bytes."""
    for side in SIDES:
        records = _evidence_records(side, predicate["kernel_path"][side])
        for case, entry in zip(layout, predicate["cases"], strict=True):
            status = entry[side]
            if status not in ("ok", "input_mismatch"):
                continue
            record = records.get(case.id)
            if record is None:
                raise MalformedEvidenceError(f"{side} kernel-path evidence has no record of "
                                             f"case {case.id} (status {status})")
            paths = {"logits": case.logits_path, "p": case.p_path, "k": case.k_path,
                     "output": output_name(side, case.id)}
            hashes = _EVIDENCE_HASHES + ((("k_sha256", "k"),) if case.k_path else ())
            if status == "input_mismatch":
                if all(record.get(key) == artifacts.digest(str(paths[what]))
                       for key, what in hashes if what != "output"):
                    raise BindingMismatchError(
                        f"{side} case {case.id} recorded as input_mismatch",
                        "other input bytes", "the evidence hashed the captured ones")
                continue
            for key, what in hashes:
                path = str(paths[what])
                if record.get(key) != artifacts.digest(path):
                    raise BindingMismatchError(
                        f"{side} kernel evidence {key} of case {case.id} vs {path}",
                        artifacts.digest(path), str(record.get(key)))


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
    _artifacts: _Artifacts
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


def signer_hint(path: Path) -> str | None:
    """The key id an envelope names for its signer, UNVERIFIED: only for choosing among
    keys the caller trusts anyway (``keys.project_public_key``). None when unreadable; the
    verification proper then reports why."""
    try:
        data = BundleDir(Path(path)).read(ENVELOPE, max_size=MAX_ENVELOPE_BYTES)
        hints = dsse.keyid_hints(data)
    except HarnessError:
        return None
    return hints[0] if len(hints) == 1 else None


def open_bundle(path: Path, public_key: Ed25519PublicKey) -> UnsafeBundleView:
    """Steps 1-3 of verification, then lazy digest-checked reads (every failure typed).
    The oracle and gate are not rerun: the view is :class:`UnsafeBundleView`."""
    with wrap_as(MalformedEvidenceError, failing_closed="opening a bundle"):
        bundle = BundleDir(Path(path))
        statement, payload = _statement(bundle, public_key)
        artifacts = _Artifacts(bundle, statement["subject"])
        _check_files(bundle, artifacts)
        return UnsafeBundleView(statement, artifacts, sha256_hex(payload))


def _captured_cases(artifacts: _Artifacts, layout: list[Any], predicate: dict[str, Any],
                    manifest: Any) -> Iterator[Any]:
    """Each case's captured bytes, decoded (and digest-checked) only when the judge asks
    for that case, so one case is held at a time; each checked against every value its
    manifest entry fixes without a generator (:mod:`harness.core.input_bindings`)."""
    from .input_bindings import check_case_inputs
    from .judge import CaseBytes, RowSpec
    from .support_rules import case_draws

    for case, entry, spec in zip(layout, predicate["cases"], manifest.cases, strict=True):
        logits = artifacts.decode(case.logits_path)
        p = artifacts.decode(case.p_path)
        k = artifacts.decode(case.k_path) if case.k_path else None
        check_case_inputs(spec, case, logits, p, k)
        sides: dict[str, bytes | str] = {}
        paths = case_paths(entry)
        for side in SIDES:
            name = output_name(side, case.id)
            if entry[side] != "ok":
                sides[side] = entry[side]
                continue
            base = artifacts.subjects[name]["annotations"].get("base")
            if base != case.logits_path:
                raise MalformedEvidenceError(f"{name} is coded against {base!r}, not "
                                             f"{case.logits_path}")
            sides[side] = artifacts.decode(name, logits)
        yield CaseBytes(
            id=case.id, vocab=case.vocab,
            rows=tuple(RowSpec(r.judge, r.forced_id, r.label) for r in case.rows),
            logits=logits, p=p, k=k, stock=sides["stock"], patched=sides["patched"],
            split_path=entry["split_path"],
            split_sides=(tuple(paths[side] == SPLIT for side in SIDES)  # type: ignore[arg-type]
                         if "paths" in entry else None),
            draws=case_draws(predicate["kernel_path"], case.id))
        del logits, p, sides  # before the next case is decoded


def judgement(predicate: dict[str, Any], manifest: Any) -> tuple[str, str]:
    """(rule set, report format) the receipt names, each known to this verifier, the rule
    set the manifest's; a receipt written before ids existed names none and was judged by
    the seed's rules into a report/v1 report."""
    from .report import LEGACY_REPORT, REPORT_FORMATS
    from .rulesets import LEGACY_RULES, rule_set

    named = predicate.get("judgement")
    rules, report = ((LEGACY_RULES, LEGACY_REPORT) if named is None
                     else (named["rules"], named["report"]))
    rule_set(rules)
    if report not in REPORT_FORMATS:
        raise UnknownJudgementError("report format", report, REPORT_FORMATS)
    if rules != manifest.rules:
        raise BindingMismatchError("rule set", manifest.rules, rules, said_by="the manifest")
    return rules, report


def _rerun(artifacts: _Artifacts, layout: list[Any], predicate: dict[str, Any], workers: int,
           fast: bool | None, progress: Callable[[int], None] | None, rules: str,
           manifest: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from .judge import judge_cases
    from .oracle import numpy_available
    from .rulesets import rule_set

    use_fast = numpy_available() if fast is None else fast
    with wrap_as(MalformedEvidenceError, "rerun refused the captured bytes: "):
        rows = judge_cases(_captured_cases(artifacts, layout, predicate, manifest),
                           workers=workers,
                           fast=use_fast, progress=progress, rules=rules)
    recorded_rows = predicate["rows"]
    if len(rows) != len(recorded_rows):
        raise BindingMismatchError("number of judged rows", str(len(recorded_rows)),
                                   str(len(rows)))
    for mine, theirs in zip(rows, recorded_rows, strict=True):
        if mine != theirs:
            field, said, found = _first_difference(theirs, mine)
            where = f"rerun of row {mine['case']}[{mine['row']}] at {field or '(whole row)'}"
            raise BindingMismatchError(where, _short(said), _short(found))
    again = rule_set(rules).verdict(rows, predicate["run_stops"])
    if again != predicate["verdict"]:
        raise BindingMismatchError("verdict", _short(predicate["verdict"]), _short(again))
    return rows, again


def _check_report(artifacts: _Artifacts, manifest: Any, layout: list[Any],
                  predicate: dict[str, Any], rows: list[dict[str, Any]],
                  final: dict[str, Any], rules: str, report_format: str) -> None:
    """``report.md`` is byte for byte what the report generator makes from the verified
    data (standard library only), so it cannot state another verdict or other figures.
    ``report.png`` needs matplotlib to regenerate: it is signed, not checked (VERIFYING.md).
    """
    from .cases_index import SCHEMA as CASES_SCHEMA
    from .report import ReportInputs, UnsafeLegacyText, render_markdown

    if REPORT_PNG in artifacts.subjects:
        _plain(artifacts, REPORT_PNG, MAX_PLAIN_BYTES)  # its digests only
    if REPORT_MD not in artifacts.subjects:
        return
    data = _plain(artifacts, REPORT_MD, MAX_PLAIN_BYTES)
    inputs = ReportInputs(manifest_name=manifest.name, backend=str(manifest.backend["required"]),
                          rows=rows, verdict=final, evidence=_report_evidence(artifacts,
                                                                             predicate),
                          cases={"schema": CASES_SCHEMA,
                                 "cases": [case.to_json() for case in layout]}, rules=rules)
    try:
        expected = render_markdown(inputs, report_format).encode("utf-8")
    except UnsafeLegacyText as err:
        raise MalformedEvidenceError(str(err)) from None
    if data != expected:
        raise BindingMismatchError(f"{REPORT_MD} vs the report regenerated from the verified "
                                   "results", sha256_hex(expected), sha256_hex(data),
                                   said_by="the regenerated report")


def _report_evidence(artifacts: _Artifacts, predicate: dict[str, Any]
                     ) -> dict[str, dict[str, Any] | None]:
    """Each side's kernel-path evidence as the report was made from it: the side's
    ``evidence.json`` artifact as parsed (its digests checked; ``_bound_json`` proved it
    equal to the receipt's copy), else the receipt's copy. The artifact, not the canonical
    receipt, because RFC 8785 writes a float such as 5.0 as 5 and the report shows the
    evidence's own numbers (a kernel child's ``import_s`` of 5.0 printed "5.0")."""
    found: dict[str, dict[str, Any] | None] = {}
    for side in SIDES:
        name = evidence_name(side)
        if name in artifacts.subjects:
            value = loads_strict(_plain(artifacts, name, MAX_PLAIN_BYTES), name)
            found[side] = value if isinstance(value, dict) else None
        else:
            found[side] = predicate["kernel_path"][side]
    return found


def verify_bundle(path: Path, public_key: Ed25519PublicKey, *, strict: bool = False,
                  frozen_manifest: Path | None = None, workers: int | None = None,
                  fast: bool | None = None,
                  progress: Callable[[int], None] | None = None) -> Verified:
    """Verify the bundle at ``path``; return what was verified or raise VerificationError.

    A problem with ``frozen_manifest`` itself (missing, not a regular file, not frozen) is
    a UsageError (exit 2), raised before the bundle is read.
    """
    frozen = read_frozen_hash(Path(frozen_manifest)) if frozen_manifest is not None else None
    with wrap_as(MalformedEvidenceError, failing_closed="verifying"):
        return _verify(Path(path), public_key, strict, frozen,
                       worker_count(workers), fast, progress)


def _verify(path: Path, public_key: Ed25519PublicKey, strict: bool, frozen: str | None,
            workers: int, fast: bool | None,
            progress: Callable[[int], None] | None) -> Verified:
    clock = time.perf_counter
    seconds: dict[str, float] = {}
    start = clock()
    bundle = BundleDir(path)
    statement, payload = _statement(bundle, public_key)
    predicate = statement["predicate"]
    artifacts = _Artifacts(bundle, statement["subject"])
    _check_files(bundle, artifacts)
    manifest = _manifest(artifacts, predicate, frozen)
    rules, report_format = judgement(predicate, manifest)
    layout = _layout(artifacts, predicate, manifest)
    seconds["read_and_digest"] = clock() - start
    start = clock()
    _check_names(artifacts, layout, predicate["cases"])
    _check_sizes(artifacts, layout, manifest, predicate)  # before anything is inflated
    _bound_json(artifacts, predicate)
    _check_pins(manifest, predicate)
    _check_dispatch(manifest, predicate)
    _check_evidence_digests(artifacts, layout, predicate)
    recorded = predicate["harness"]["sha256"]
    local = provenance.installed_digest(predicate["harness"]["algorithm"])["sha256"]
    if strict and recorded != local:
        raise HarnessDriftError("harness code digest", recorded, local)
    seconds["checks"] = clock() - start
    start = clock()
    rows, final = _rerun(artifacts, layout, predicate, workers, fast, progress, rules,
                         manifest)
    _check_report(artifacts, manifest, layout, predicate, rows, final, rules, report_format)
    seconds["rerun"] = clock() - start
    return Verified(
        path=path, keyid=keyid(public_key), verdict=final, rows=final["rows"],
        cases=len(layout), artifacts=len(artifacts.subjects),
        manifest_sha256=artifacts.digest(MANIFEST), frozen_manifest=frozen,
        harness_recorded=recorded, harness_local=local,
        harness_algorithm=predicate["harness"]["algorithm"],
        harness_source=predicate["harness"].get("source"), payload_sha256=sha256_hex(payload),
        workers=workers, seconds=seconds, rules=rules, report_format=report_format,
        stop_rows=dict(sorted(Counter(r for row in rows for r in row["stops"]).items())))
