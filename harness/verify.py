"""The offline verifier: is a bundle authentic, and does its verdict follow from its bytes?

Base install only (standard library, jsonschema, cryptography, rfc8785; numpy only as the
oracle's optional, test-proven bit-identical fast path). Never torch, triton or vLLM.

Order (each step reads only bytes a previous step verified):
 1. the bundle is a plain directory tree: no links, no special files;
 2. the DSSE envelope's Ed25519 signature with the given public key, then its payload type;
 3. the payload is RFC 8785 canonical JSON, an in-toto Statement v1 valid under the
    receipt schema; ``receipt.json`` is byte-identical to it;
 4. the files present are exactly the receipt's subjects plus the two receipt files;
 5. every stored file's sha256, then (after size-capped decoding) every raw sha256;
 6. the manifest (hash, schema, limits, optionally the frozen hash), the case matrix
    against the manifest, the per-row results file, the kernel-path evidence, the source
    and patch pins against the manifest, and the dispatch path: each side's backend is the
    manifest's and each case's split-path flag is what both sides' evidence proves;
 7. the harness code digest against this verifier's own code (reported; fatal if strict);
 8. the oracle and the gate rerun from the captured bytes: identical per-row results and
    the same verdict.

Every failure is a :class:`~harness.errors.VerificationError` (one line, exit 4);
unexpected exceptions are wrapped too (fail closed).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from . import dsse, receipt
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
    SIDES,
    BundleDir,
    check_path,
    evidence_name,
    mask_decode,
    output_name,
    xz_decompress,
    zlib_decompress,
)
from .errors import (
    BindingMismatchError,
    HarnessError,
    MalformedEvidenceError,
    VerificationError,
)
from .judge import default_workers
from .keys import keyid
from .strictjson import loads_strict

REPORT_FILES = ("report.md", "report.png")
_SHA256_LINE = re.compile(r"([0-9a-f]{64})(?:[ \t].*)?\n?", re.DOTALL)


class VerificationInternalError(VerificationError):
    """An unexpected exception inside verification: refused, never passed (fail closed)."""

    code = "verification_internal"


class HarnessDriftError(BindingMismatchError):
    """The bundle was made by harness code that differs from this verifier's (--strict)."""

    code = "harness_drift"


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
    workers: int
    seconds: dict[str, float]  # wall time per phase: read_and_digest, checks, rerun

    @property
    def harness_matches(self) -> bool:
        return self.harness_recorded == self.harness_local


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
    whose ``.sha256`` sibling freezes it (the manifest's bytes must match that hash)."""
    try:
        if path.name.endswith(".sha256"):
            match = _SHA256_LINE.fullmatch(path.read_text("utf-8"))
            if match is None:
                raise MalformedEvidenceError(f"{path} is not a sha256sum line")
            return match.group(1)
        from .manifest import frozen_sha256

        frozen = frozen_sha256(path)
        actual = hashlib.sha256(path.read_bytes()).hexdigest()
    except VerificationError:
        raise
    except HarnessError as err:
        raise MalformedEvidenceError(f"frozen manifest: {err.detail}") from err
    except (OSError, UnicodeDecodeError) as err:
        raise MalformedEvidenceError(f"cannot read frozen manifest {path}: {err}") from err
    if frozen != actual:
        raise BindingMismatchError(f"committed manifest {path.name} vs its frozen hash",
                                   frozen, actual)
    return frozen


class _Artifacts:
    """Subjects of a verified statement; each read, digest-checked and decoded at most once."""

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

    def load_all(self, threads: int) -> None:
        """Read, check and decode every subject: plain ones first, then mask-coded ones.

        Threads help because hashlib, lzma and numpy release the GIL; the first failure in
        sorted name order is the one raised, so the outcome does not depend on timing.
        """
        from concurrent.futures import ThreadPoolExecutor

        names = sorted(self.subjects)
        plain = [n for n in names if self.subjects[n]["annotations"]["codec"] != CODEC_MASK]
        coded = [n for n in names if n not in set(plain)]
        with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
            for batch in (plain, coded):
                futures = [pool.submit(self.raw, name) for name in batch]
                for future in futures:
                    future.result()

    def raw(self, name: str) -> bytes:
        if name in self._raw:
            return self._raw[name]
        subject = self.subjects.get(name)
        if subject is None:
            raise MalformedEvidenceError(f"receipt has no subject {name!r}")
        ann = subject["annotations"]
        data = self.bundle.read(ann["stored"], exact_size=ann["stored_size"])
        found = hashlib.sha256(data).hexdigest()
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
            base_name = ann["base"]
            base_subject = self.subjects.get(base_name)
            if base_subject is None or base_subject["annotations"]["codec"] == CODEC_MASK:
                raise MalformedEvidenceError(f"{name} is coded against {base_name!r}, which is "
                                             "not a plain input artifact")
            raw = mask_decode(xz_decompress(data, 12 + size // 4 + size), self.raw(base_name))
        else:  # the schema allows no other codec
            raise MalformedEvidenceError(f"{name} uses unknown codec {codec!r}")
        if len(raw) != size:
            raise BindingMismatchError(f"size of {name}", str(size), str(len(raw)))
        found = hashlib.sha256(raw).hexdigest()
        if found != subject["digest"]["sha256"]:
            raise BindingMismatchError(f"sha256 of {name}", subject["digest"]["sha256"], found)
        self._raw[name] = raw
        return raw


def _statement(bundle: BundleDir, public_key: Ed25519PublicKey) -> tuple[dict[str, Any], bytes]:
    envelope = bundle.read(ENVELOPE, max_size=MAX_ENVELOPE_BYTES)
    payload = dsse.verify(envelope, public_key, dsse.IN_TOTO_PAYLOAD_TYPE)
    # DSSE tolerates unauthenticated variation (keyid hints, either base64 alphabet, spare
    # base64 bits, extra signatures, whitespace). A bundle must not: every byte of it is
    # bound, so the envelope must be exactly what the writer makes for this key.
    if envelope != dsse.canonical_envelope(envelope, payload, public_key):
        raise MalformedEvidenceError(f"{ENVELOPE} is not in the writer's exact form "
                                     "(one signature, this key's id, standard base64)")
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
    present = bundle.listing()
    expected = artifacts.stored | {RECEIPT, ENVELOPE}
    missing = sorted(expected - present)
    if missing:
        raise MalformedEvidenceError(f"bundle file {missing[0]} is missing "
                                     f"({len(missing)} missing)")
    extra = sorted(present - expected)
    if extra:
        raise MalformedEvidenceError(f"bundle holds a file the receipt does not name: "
                                     f"{extra[0]}")


def _check_names(artifacts: _Artifacts, layout: list[Any], cases: list[dict[str, Any]]) -> None:
    """The subjects are exactly the layout's artifacts: nothing unexpected, nothing missing."""
    allowed = {MANIFEST, CASES, ROWS, *REPORT_FILES, *(evidence_name(s) for s in SIDES)}
    required = {MANIFEST, CASES, ROWS}
    for case, entry in zip(layout, cases, strict=True):
        required.update({case.logits_path, case.p_path})
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


def _manifest(artifacts: _Artifacts, predicate: dict[str, Any], frozen: str | None) -> Any:
    from .manifest import parse_manifest

    raw = artifacts.raw(MANIFEST)
    digest = artifacts.digest(MANIFEST)
    if predicate["hashes"]["manifest"] != digest:
        raise BindingMismatchError("manifest hash", predicate["hashes"]["manifest"], digest)
    if frozen is not None and frozen != digest:
        raise BindingMismatchError("manifest hash vs the frozen one", frozen, digest)
    try:
        return parse_manifest(raw, source=MANIFEST)
    except VerificationError:
        raise
    except HarnessError as err:
        raise MalformedEvidenceError(f"bundle manifest: {err.detail}") from err


def _layout(artifacts: _Artifacts, predicate: dict[str, Any], manifest: Any) -> list[Any]:
    from .cases_index import check_against_manifest, parse_cases_index

    digest = artifacts.digest(CASES)
    if predicate["hashes"]["case_matrix"] != digest:
        raise BindingMismatchError("case matrix hash", predicate["hashes"]["case_matrix"], digest)
    layout = parse_cases_index(artifacts.raw(CASES))
    check_against_manifest(layout, manifest)
    recorded = [c["id"] for c in predicate["cases"]]
    actual = [c.id for c in layout]
    if recorded != actual:
        raise BindingMismatchError("case list", _short(recorded), _short(actual))
    return layout


def _bound_json(artifacts: _Artifacts, predicate: dict[str, Any]) -> None:
    digest = artifacts.digest(ROWS)
    if predicate["hashes"]["rows"] != digest:
        raise BindingMismatchError("per-row results hash", predicate["hashes"]["rows"], digest)
    rows_file = loads_strict(artifacts.raw(ROWS), ROWS)
    if rows_file != predicate["rows"]:
        raise BindingMismatchError(ROWS, "the receipt's per-row results", "different results")
    for side in SIDES:
        name = evidence_name(side)
        recorded = predicate["kernel_path"][side]
        if name in artifacts.subjects:
            value = loads_strict(artifacts.raw(name), name)
            if value != recorded:
                raise BindingMismatchError(f"{side} kernel-path evidence",
                                           "the receipt's kernel_path", f"different {name}")
        elif recorded is not None:
            raise MalformedEvidenceError(f"receipt records {side} evidence but names no {name}")


PIN_FIELDS = ("version", "wheel", "wheel_sha256", "kernel_sha256")
PIN_FIELDS_V2 = ("pin_sha256", "version", "kernel_sha256")


def _expected_pin(manifest: Any, side: str) -> dict[str, Any]:
    """What the receipt must record for ``side``: version 1, the manifest's wheel pins;
    version 2, the pin file's sha256, version and kernel (after the frozen patch, if any),
    and the tree digest of an unpatched side."""
    entry = manifest.sources["sides"][side]
    if not manifest.pinned_by_file:
        return {key: entry[key] for key in PIN_FIELDS}
    expected = {key: entry[key] for key in PIN_FIELDS_V2}
    patch = manifest.side_patch(side)
    if patch is None:
        expected["tree_sha256"] = entry["tree_sha256"]
    else:
        expected["kernel_sha256"] = patch["kernel_sha256"]
        expected["patch_file_sha256"] = patch["sha256"]
    return expected


def _check_pins(manifest: Any, predicate: dict[str, Any]) -> None:
    """The receipt's source and patch hashes are the manifest's pins; evidence of any other
    kernel file must have stopped the run (``evidence_drift``)."""
    sources = manifest.sources
    pinned_patch = sources.get("patch_sha256")
    if pinned_patch is not None and predicate["hashes"]["patch"] != pinned_patch:
        raise BindingMismatchError("patch hash vs the manifest's pin", pinned_patch,
                                   predicate["hashes"]["patch"])
    recorded = predicate["hashes"]["sources"]
    for side in SIDES:
        pins = _expected_pin(manifest, side)
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


def _proven_cases(evidence: Any, dispatch: str = "split") -> dict[str, bool]:
    """Case id -> whether that side's signed evidence proves its path (``split`` or
    ``single``) for it."""
    if not isinstance(evidence, dict) or not isinstance(evidence.get("cases"), list):
        return {}
    return {str(record.get("id")): bool((record.get(dispatch) or {}).get("proven"))
            for record in evidence["cases"] if isinstance(record, dict)}


def case_paths(entry: dict[str, Any]) -> dict[str, str | None]:
    """Per side, the path a receipt case entry says was proven. A version 1 receipt has
    no ``paths``: both sides took the split path exactly when ``split_path`` is true."""
    paths = entry.get("paths")
    if isinstance(paths, dict):
        return {side: paths.get(side) for side in SIDES}
    return {side: "split" if entry["split_path"] else None for side in SIDES}


def _check_dispatch(manifest: Any, predicate: dict[str, Any]) -> None:
    """The path that ran is the manifest's: each side's backend, and every case's split-path
    flag equal to what both sides' evidence proves; a case the manifest requires on the
    split path but that lacks proof must have stopped the run."""
    required = manifest.backend["required"]
    proven: dict[str, dict[str, bool]] = {}
    for side in SIDES:
        evidence = predicate["kernel_path"][side]
        if isinstance(evidence, dict) and "backend" in evidence \
                and evidence["backend"] != required:
            raise BindingMismatchError(f"{side} backend vs the manifest's", str(required),
                                       str(evidence["backend"]))
        proven[side] = _proven_cases(evidence, manifest.dispatch(side))
    must_split = bool(manifest.backend.get("split_path_required", True))
    for entry in predicate["cases"]:
        case_id = entry["id"]
        if manifest.pinned_by_file:
            said = entry.get("paths")
            found = {side: manifest.dispatch(side) if proven[side].get(case_id, False)
                     else None for side in SIDES}
            if said != found:
                raise BindingMismatchError(f"case {case_id} paths vs the kernel evidence",
                                           str(said), str(found))
        elif "paths" in entry:
            raise MalformedEvidenceError(f"case {case_id}: paths in a version 1 receipt")
        expected = all(proven[side].get(case_id, False) for side in SIDES)
        if manifest.pinned_by_file:
            expected = expected and all(manifest.dispatch(side) == "split" for side in SIDES)
            proved_declared = all(proven[side].get(case_id, False) for side in SIDES)
        else:
            proved_declared = expected
        if entry["split_path"] != expected:
            raise BindingMismatchError(f"case {case_id} split-path flag vs the kernel evidence",
                                       str(entry["split_path"]), f"evidence proving {expected}")
        both_ok = all(entry[side] == "ok" for side in SIDES)
        if must_split and both_ok and not proved_declared \
                and "split_path_not_taken" not in predicate["run_stops"]:
            raise BindingMismatchError(f"case {case_id} without split-path proof",
                                       "a split_path_not_taken stop", "no such stop")


def _size_cap(artifacts: _Artifacts, manifest: Any,
              predicate: dict[str, Any]) -> None:
    total = sum(int(s["annotations"]["stored_size"]) for s in artifacts.subjects.values())
    cap = int(manifest.limits["max_bundle_bytes"])
    recorded = predicate["bundle"]["max_bytes"]
    if recorded is not None and recorded != cap:
        raise BindingMismatchError("bundle size cap", str(recorded), str(cap))
    if total > cap:
        raise MalformedEvidenceError(f"bundle artifacts hold {total} bytes, over the "
                                     f"manifest's cap of {cap}")


@dataclass(frozen=True)
class BundleView:
    """A bundle whose signature, schema, file set and (lazily) digests were checked.

    For tools that need artifact bytes (probes, reports): ``raw(name)`` returns the raw,
    decoded bytes of a subject named by its raw path (``inputs/x.logits.f32``), after its
    stored and raw digests check. It does not rerun the oracle: use :func:`verify_bundle`
    for a verdict.
    """

    statement: dict[str, Any]
    _artifacts: _Artifacts

    def raw(self, name: str) -> bytes:
        return self._artifacts.raw(name)

    def stored_path(self, name: str) -> str:
        subject = self._artifacts.subjects.get(name)
        if subject is None:
            raise MalformedEvidenceError(f"receipt has no subject {name!r}")
        return str(subject["annotations"]["stored"])


def open_bundle(path: Path, public_key: Ed25519PublicKey) -> BundleView:
    """Steps 1-4 of verification, then lazy digest-checked reads (every failure typed)."""
    try:
        bundle = BundleDir(Path(path))
        statement, _payload = _statement(bundle, public_key)
        artifacts = _Artifacts(bundle, statement["subject"])
        _check_files(bundle, artifacts)
        return BundleView(statement, artifacts)
    except VerificationError:
        raise
    except HarnessError as err:
        raise MalformedEvidenceError(err.detail) from err
    except Exception as err:
        raise VerificationInternalError(f"unexpected {type(err).__name__} while opening "
                                        f"a bundle: {err}") from err


def _rerun(artifacts: _Artifacts, layout: list[Any], predicate: dict[str, Any], workers: int,
           fast: bool | None, progress: Callable[[int], None] | None) -> dict[str, Any]:
    from .gate import verdict
    from .judge import CaseBytes, RowSpec, judge_cases
    from .oracle import numpy_available

    cases = []
    for case, entry in zip(layout, predicate["cases"], strict=True):
        sides: dict[str, bytes | str] = {}
        paths = case_paths(entry)
        for side in SIDES:
            status = entry[side]
            sides[side] = artifacts.raw(output_name(side, case.id)) if status == "ok" else status
        cases.append(CaseBytes(
            id=case.id, vocab=case.vocab,
            rows=tuple(RowSpec(r.judge, r.forced_id, r.label) for r in case.rows),
            logits=artifacts.raw(case.logits_path), p=artifacts.raw(case.p_path),
            stock=sides["stock"], patched=sides["patched"], split_path=entry["split_path"],
            split_sides=(tuple(paths[side] == "split" for side in SIDES)  # type: ignore[arg-type]
                         if "paths" in entry else None)))
    use_fast = numpy_available() if fast is None else fast
    try:
        rows = judge_cases(cases, workers=workers, fast=use_fast, progress=progress)
    except VerificationError:
        raise
    except HarnessError as err:  # the captured bytes cannot be judged
        raise MalformedEvidenceError(f"rerun refused the captured bytes: {err.detail}") from err
    recorded_rows = predicate["rows"]
    if len(rows) != len(recorded_rows):
        raise BindingMismatchError("number of judged rows", str(len(recorded_rows)),
                                   str(len(rows)))
    for mine, theirs in zip(rows, recorded_rows, strict=True):
        if mine != theirs:
            field, said, found = _first_difference(theirs, mine)
            where = f"rerun of row {mine['case']}[{mine['row']}] at {field or '(whole row)'}"
            raise BindingMismatchError(where, _short(said), _short(found))
    again = verdict(rows, predicate["run_stops"])
    if again != predicate["verdict"]:
        raise BindingMismatchError("verdict", _short(predicate["verdict"]), _short(again))
    return again


def verify_bundle(path: Path, public_key: Ed25519PublicKey, *, strict: bool = False,
                  frozen_manifest: Path | None = None, workers: int | None = None,
                  fast: bool | None = None,
                  progress: Callable[[int], None] | None = None) -> Verified:
    """Verify the bundle at ``path``; return what was verified or raise VerificationError."""
    try:
        return _verify(Path(path), public_key, strict, frozen_manifest,
                       workers or default_workers(), fast, progress)
    except VerificationError:
        raise
    except HarnessError as err:
        raise MalformedEvidenceError(err.detail) from err
    except MemoryError as err:
        raise VerificationInternalError("ran out of memory while verifying") from err
    except Exception as err:  # fail closed: anything unexpected refuses the bundle
        raise VerificationInternalError(f"unexpected {type(err).__name__} while verifying: "
                                        f"{err}") from err


def _verify(path: Path, public_key: Ed25519PublicKey, strict: bool,
            frozen_manifest: Path | None, workers: int, fast: bool | None,
            progress: Callable[[int], None] | None) -> Verified:
    clock = time.perf_counter
    seconds: dict[str, float] = {}
    start = clock()
    frozen = read_frozen_hash(frozen_manifest) if frozen_manifest is not None else None
    bundle = BundleDir(path)
    statement, _payload = _statement(bundle, public_key)
    predicate = statement["predicate"]
    artifacts = _Artifacts(bundle, statement["subject"])
    _check_files(bundle, artifacts)
    artifacts.load_all(workers)  # every digest, before any content is parsed
    seconds["read_and_digest"] = clock() - start
    start = clock()
    manifest = _manifest(artifacts, predicate, frozen)
    _size_cap(artifacts, manifest, predicate)
    layout = _layout(artifacts, predicate, manifest)
    _check_names(artifacts, layout, predicate["cases"])
    _bound_json(artifacts, predicate)
    _check_pins(manifest, predicate)
    _check_dispatch(manifest, predicate)
    local = receipt.harness_code_digest()["sha256"]
    recorded = predicate["harness"]["sha256"]
    if strict and recorded != local:
        raise HarnessDriftError("harness code digest", recorded, local)
    seconds["checks"] = clock() - start
    start = clock()
    final = _rerun(artifacts, layout, predicate, workers, fast, progress)
    seconds["rerun"] = clock() - start
    return Verified(
        path=path, keyid=keyid(public_key), verdict=final, rows=final["rows"],
        cases=len(layout), artifacts=len(artifacts.subjects),
        manifest_sha256=artifacts.digest(MANIFEST), frozen_manifest=frozen,
        harness_recorded=recorded, harness_local=local, workers=workers, seconds=seconds)
