"""What a verified statement binds (verification steps 4 and 6): the manifest and the case
layout it implies, the per-row results and kernel evidence against the receipt, the source
and patch pins, each side's backend and dispatch path, the per-case hashes the kernel
evidence records, and the judgement (rule set and report format) the receipt names.

Base install only. Reads artifacts only through :class:`~.verify_artifacts.Artifacts`
(digest-checked); every failure is a :class:`~harness.core.errors.VerificationError`.
"""

from __future__ import annotations

import json
from typing import Any

from .bundle import CASES, MANIFEST, ROWS, evidence_name, output_name, rows_bytes
from .call_pattern import check_recorded_call
from .digest import sha256_hex
from .errors import (
    BindingMismatchError,
    MalformedEvidenceError,
    UnknownJudgementError,
    wrap_as,
)
from .limits import MAX_PLAIN_BYTES
from .names import SIDES, SPLIT, proven_by_case
from .strictjson import loads_strict
from .verify_artifacts import Artifacts, plain


def short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= 160 else text[:157] + "..."


def bundle_manifest(artifacts: Artifacts, predicate: dict[str, Any], frozen: str | None) -> Any:
    from .manifest import MAX_MANIFEST_BYTES, parse_manifest

    if MANIFEST not in artifacts.subjects:
        raise MalformedEvidenceError(f"receipt lacks artifact {MANIFEST}")
    digest = artifacts.digest(MANIFEST)
    if predicate["hashes"]["manifest"] != digest:
        raise BindingMismatchError("manifest hash", predicate["hashes"]["manifest"], digest)
    if frozen is not None and frozen != digest:
        raise BindingMismatchError("bundle manifest's sha256 vs --frozen-manifest", frozen,
                                   digest, said_by="the frozen manifest")
    raw = plain(artifacts, MANIFEST, MAX_MANIFEST_BYTES)
    with wrap_as(MalformedEvidenceError, "bundle manifest: "):
        return parse_manifest(raw, source=MANIFEST)


def bound_layout(artifacts: Artifacts, predicate: dict[str, Any], manifest: Any) -> list[Any]:
    """The manifest's case layout; ``cases.json`` must be exactly its rendering (so it is
    never parsed: a duplicate key or any other byte of difference is refused)."""
    from .cases_index import render_cases_index
    from .manifest import expected_layout

    layout = expected_layout(manifest)
    expected = render_cases_index(layout, manifest.sampling)
    if CASES not in artifacts.subjects:
        raise MalformedEvidenceError(f"receipt lacks artifact {CASES}")
    digest = artifacts.digest(CASES)
    if predicate["hashes"]["case_matrix"] != digest:
        raise BindingMismatchError("case matrix hash", predicate["hashes"]["case_matrix"], digest)
    if digest != sha256_hex(expected):
        raise BindingMismatchError(f"{CASES} vs the case layout the manifest implies",
                                   sha256_hex(expected), digest, said_by="the manifest")
    if plain(artifacts, CASES, len(expected)) != expected:  # pragma: no cover - sha256
        raise BindingMismatchError(CASES, "the manifest's case layout", "different bytes")
    recorded = [c["id"] for c in predicate["cases"]]
    actual = [c.id for c in layout]
    if recorded != actual:
        raise BindingMismatchError("case list", short(recorded), short(actual))
    return layout


def check_bound_json(artifacts: Artifacts, predicate: dict[str, Any]) -> None:
    digest = artifacts.digest(ROWS)
    if predicate["hashes"]["rows"] != digest:
        raise BindingMismatchError("per-row results hash", predicate["hashes"]["rows"], digest)
    if plain(artifacts, ROWS, MAX_PLAIN_BYTES) != rows_bytes(predicate["rows"]):
        raise BindingMismatchError(ROWS, "the receipt's per-row results", "different results")
    for side in SIDES:
        name = evidence_name(side)
        recorded = predicate["kernel_path"][side]
        if name in artifacts.subjects:
            value = loads_strict(plain(artifacts, name, MAX_PLAIN_BYTES), name)
            if value != recorded:
                raise BindingMismatchError(f"{side} kernel-path evidence",
                                           "the receipt's kernel_path", f"different {name}")
        elif recorded is not None:
            raise MalformedEvidenceError(f"receipt records {side} evidence but names no {name}")


def check_pins(manifest: Any, predicate: dict[str, Any]) -> None:
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


def check_dispatch(manifest: Any, predicate: dict[str, Any]) -> None:
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


def check_evidence_digests(artifacts: Artifacts, layout: list[Any],
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
                     "padding": case.padding_path, "indices": case.indices_path,
                     "output": output_name(side, case.id)}
            hashes = _EVIDENCE_HASHES + tuple((f"{what}_sha256", what)
                                              for what in ("k", "padding", "indices")
                                              if paths[what] is not None)
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
            check_recorded_call(side, case.id, case.batch, case.vocab, case.call, record)


def check_sampling(manifest: Any, layout: list[Any], predicate: dict[str, Any]) -> None:
    """When the manifest declares its draws (``sampling``, ``pr-flashinfer-v3`` on), each
    side's record of a case that records draws (or any of ``draws_per_row``, ``seed``,
    ``offset`` in its path's proof) must record exactly the declared three there, and one
    row of draws per row of the case whose counts sum to ``draws_per_row`` for every output
    row that reads it: once without an index array, as often as the row occurs in the
    case's ``indices`` with one (FlashInfer's output j draws from row ``indices[j]``; a row
    no output reads has none). The parent declares the seed, the child cannot choose it. A
    manifest that declares none checks nothing here (the family's constants, recorded but
    unchecked, as before)."""
    from .manifest import SAMPLING_FIELDS

    declared = manifest.sampling
    if declared is None:
        return
    for side in SIDES:
        records = _evidence_records(side, predicate["kernel_path"][side])
        for case in layout:
            record = records.get(case.id, {})
            proof = record.get(manifest.dispatch(side, case.id))
            proof = proof if isinstance(proof, dict) else {}
            if "draws" not in record and not set(SAMPLING_FIELDS) & set(proof):
                continue  # a path that does not draw
            where = f"{side} kernel evidence of case {case.id}"
            for name in SAMPLING_FIELDS:
                found = proof.get(name)
                if type(found) is not int or found != declared[name]:
                    raise BindingMismatchError(f"{where}: {name}", str(declared[name]),
                                               short(found), said_by="the manifest's sampling")
            rows = record.get("draws")
            if not isinstance(rows, list) or len(rows) != case.batch:
                raise BindingMismatchError(f"{where}: draws", f"one list per row ({case.batch})",
                                           short(rows), said_by="the manifest's sampling")
            for index, (row, outputs) in enumerate(
                    zip(rows, case.call.outputs_per_row(case.batch), strict=True)):
                total = _draw_total(row)
                expected = declared["draws_per_row"] * outputs
                if total != expected:
                    said = f"{expected} in all" + ("" if case.call.indices is None else
                                                   f" (read by {outputs} output"
                                                   f"{'' if outputs == 1 else 's'})")
                    raise BindingMismatchError(
                        f"{where} row {index}: draws", said,
                        "a malformed record" if total is None else str(total),
                        said_by="the manifest's sampling")


def _draw_total(row: Any) -> int | None:
    """The sum of one row's recorded counts (``[[token, count], ...]``, each count a positive
    int), or None when the row is not such a list."""
    if not isinstance(row, list):
        return None
    total = 0
    for pair in row:
        if not (isinstance(pair, list) and len(pair) == 2
                and all(type(v) is int for v in pair) and pair[1] > 0):
            return None
        total += pair[1]
    return total


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


# Library binding (issue 27): a side whose kernel is a shared object built at run time from
# its pinned sources (FlashInfer's JIT) records per case ``jit_library`` in its path proof.
# Keyed on evidence fields only: the core imports no family.
LIBRARY_BOUND = "bound"
LIBRARY_LEGACY = "unbound (legacy evidence)"
LIBRARY_NOT_LOADED = "unbound (no library loaded)"  # the side's child stopped before a case
LIBRARY_NONE = "not applicable"
JIT_SOURCES_ALGORITHM = "topp-gate/flashinfer-jit-sources/v1"
_RUNTIME_BUILT_FAMILIES = ("flashinfer",)  # evidence ``family`` values built at run time


def jit_sources_sha256(tree_sha256: str, build_ninja_sha256: str) -> str:
    """``sources_sha256`` of a JIT build (``harness.families.flashinfer``'s module
    docstring): the sha256 of the sorted, compact JSON of the algorithm id, the build file's
    sha256 and the pinned tree digest."""
    text = json.dumps({"algorithm": JIT_SOURCES_ALGORITHM,
                       "build_ninja_sha256": build_ninja_sha256,
                       "tree_sha256": tree_sha256}, sort_keys=True, separators=(",", ":"))
    return sha256_hex(text.encode("utf-8"))


def _libraries(side: str, evidence: Any) -> tuple[bool, list[tuple[str, Any]]]:
    """Whether ``side`` runs a library built at run time, and per case record the
    ``jit_library`` its proof carries (None when it carries none)."""
    if not isinstance(evidence, dict):
        return False, []
    found: list[tuple[str, Any]] = []
    for case_id, record in _evidence_records(side, evidence).items():
        proofs = [v for v in record.values() if isinstance(v, dict) and "jit_library" in v]
        found.append((case_id, proofs[0]["jit_library"] if proofs else None))
    applies = (evidence.get("family") in _RUNTIME_BUILT_FAMILIES
               or any(lib is not None for _, lib in found))
    return applies, found


def _check_side_library(side: str, found: list[tuple[str, Any]], pinned_tree: Any) -> None:
    digests = set()
    for case_id, lib in found:
        if not isinstance(lib, dict) or not all(
                isinstance(lib.get(k), str) for k in
                ("sha256", "sources_sha256", "sources_tree_sha256", "build_ninja_sha256")):
            raise MalformedEvidenceError(f"{side} case {case_id}: library evidence lacks the "
                                         "binding fields other cases of the side record")
        digests.add(lib["sha256"])
        if pinned_tree is None or lib["sources_tree_sha256"] != pinned_tree:
            raise BindingMismatchError(f"{side} case {case_id} library sources tree vs the "
                                       "manifest's pin", str(pinned_tree),
                                       lib["sources_tree_sha256"], said_by="the manifest")
        expected = jit_sources_sha256(pinned_tree, lib["build_ninja_sha256"])
        if lib["sources_sha256"] != expected:
            raise BindingMismatchError(f"{side} case {case_id} library sources_sha256 vs the "
                                       "pinned tree and build file", expected,
                                       lib["sources_sha256"], said_by="the pin")
        text = lib.get("build_ninja")
        if text is not None and (not isinstance(text, str) or sha256_hex(
                text.encode("utf-8")) != lib["build_ninja_sha256"]):
            raise BindingMismatchError(f"{side} case {case_id} build file text vs its hash",
                                       lib["build_ninja_sha256"], "other text")
    if len(digests) > 1:
        raise BindingMismatchError(f"{side} loaded library across cases", "one sha256",
                                   ", ".join(sorted(digests)), said_by="the binding")


def check_library_binding(manifest: Any, predicate: dict[str, Any]) -> str:
    """For each side that runs a library built at run time: every case names the same
    library sha256, and its ``sources_sha256`` is the one computed from the manifest's pinned
    ``tree_sha256`` and the recorded build file hash. Returns ``bound``, ``unbound (legacy
    evidence)`` (a side of such a family whose evidence predates the fields: nothing binds
    its library), ``unbound (no library loaded)`` (a side whose child, of the binding, ran no
    case) or ``not applicable`` (no such side). Any side's unbound state is the bundle's."""
    states = []
    for side in SIDES:
        applies, found = _libraries(side, predicate["kernel_path"][side])
        if not applies:
            continue
        evidence = predicate["kernel_path"][side]
        if not found and "isolation" in evidence:  # a child of the binding that ran no case
            states.append(LIBRARY_NOT_LOADED)
            continue
        if not found or all(lib is None or (isinstance(lib, dict)
                                            and "sources_sha256" not in lib)
                            for _, lib in found):
            states.append(LIBRARY_LEGACY)
            continue
        pinned_tree = manifest.sides[side].receipt_pins.get("tree_sha256")
        _check_side_library(side, found, pinned_tree)
        states.append(LIBRARY_BOUND)
    if not states:
        return LIBRARY_NONE
    return next((state for state in states if state != LIBRARY_BOUND), LIBRARY_BOUND)
