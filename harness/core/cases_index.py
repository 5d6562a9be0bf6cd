"""The captured cases index (``cases.json``): render, parse, validate, check against a manifest.

Verifier side: standard library and jsonschema only. ``cases.py`` writes the bytes that
:func:`render_cases_index` returns, so a verifier can rebuild the exact expected bytes from
the frozen manifest alone (:func:`check_against_manifest`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from . import call_pattern, schema
from .errors import BindingMismatchError, MalformedEvidenceError
from .manifest import SAMPLING_FIELDS, CaseLayout, Manifest, RowLayout, expected_layout
from .names import FORCED, TRAFFIC
from .strictjson import loads_strict

SCHEMA = "topp-gate/cases/v1"
SCHEMA_RESOURCE = "cases.schema.json"


def cases_schema() -> dict[str, Any]:
    return schema.load(SCHEMA_RESOURCE)


def render_cases_index(layout: Sequence[CaseLayout],
                       sampling: Mapping[str, int] | None = None) -> bytes:
    """The exact ``cases.json`` bytes for ``layout`` (2-space indent, fixed key order, LF);
    ``sampling``: the manifest's declared draws (:attr:`Manifest.sampling`), which the
    kernel child reads here (absent when none is declared: the bytes of every index before)."""
    document: dict[str, Any] = {"schema": SCHEMA}
    if sampling is not None:
        document["sampling"] = {name: int(sampling[name]) for name in SAMPLING_FIELDS}
    document["cases"] = [case.to_json() for case in layout]
    return (json.dumps(document, indent=2, ensure_ascii=True) + "\n").encode("ascii")


def parse_cases_index(raw: bytes) -> list[CaseLayout]:
    """Parse and validate ``cases.json`` bytes; MalformedEvidenceError on any defect."""
    data = loads_strict(raw, "cases.json")  # duplicate keys, NaN, bad UTF-8: refused
    problem = schema.violation(SCHEMA_RESOURCE, data)
    if problem is not None:
        raise MalformedEvidenceError(f"cases.json: schema violation {problem}")
    layout: list[CaseLayout] = []
    seen: set[str] = set()
    for entry in data["cases"]:
        case = _case(entry)
        if case.id in seen:
            raise MalformedEvidenceError(f"cases.json: case id {case.id} appears twice")
        seen.add(case.id)
        layout.append(case)
    return layout


def _case(entry: dict[str, Any]) -> CaseLayout:
    cid = entry["id"]
    rows = tuple(RowLayout(r["judge"], r["forced_id"], r["label"]) for r in entry["rows"])
    case = CaseLayout(cid, entry["kind"], entry["batch"], entry["vocab"], rows,
                      has_k="k" in entry,
                      call=call_pattern.from_index_json(cid, entry.get("call")))
    if (entry["logits"], entry["p"], entry.get("k")) != (case.logits_path, case.p_path,
                                                         case.k_path) \
            or entry.get("call") != call_pattern.to_index_json(cid, case.call):
        raise MalformedEvidenceError(f"cases.json: case {cid} names input files not its own")
    if len(rows) != case.batch:
        raise MalformedEvidenceError(f"cases.json: case {cid} has {len(rows)} rows, batch "
                                     f"{case.batch}")
    for index, row in enumerate(rows):
        forced_kind = case.kind == FORCED or (case.kind == TRAFFIC and row.judge == FORCED)
        if (row.judge == FORCED) != forced_kind or (row.forced_id is not None) != forced_kind:
            raise MalformedEvidenceError(
                f"cases.json: case {cid} row {index}: judge/forced_id do not fit kind {case.kind}"
            )
        if row.forced_id is not None and row.forced_id >= case.vocab:
            raise MalformedEvidenceError(
                f"cases.json: case {cid} row {index}: forced id outside vocab {case.vocab}"
            )
    return case


def check_index(raw: bytes, manifest: Manifest) -> list[CaseLayout]:
    """``cases.json`` bytes parsed, their cases exactly the manifest's expected layout and
    their declared sampling the manifest's (none when it declares none)."""
    layout = parse_cases_index(raw)
    check_against_manifest(layout, manifest)
    declared = loads_strict(raw, "cases.json").get("sampling")
    if declared != manifest.sampling:
        raise BindingMismatchError("cases.json sampling", str(manifest.sampling),
                                   str(declared), said_by="the manifest")
    return layout


def check_against_manifest(layout: Sequence[CaseLayout], manifest: Manifest) -> None:
    """Require ``layout`` to be exactly the manifest's expected layout, in order."""
    expected = expected_layout(manifest)
    if len(layout) != len(expected):
        raise BindingMismatchError("cases.json case count", str(len(expected)), str(len(layout)))
    for want, got in zip(expected, layout, strict=True):
        if want != got:
            raise BindingMismatchError(f"cases.json case {want.id}", _describe(want),
                                       _describe(got))


def _describe(case: CaseLayout) -> str:
    return json.dumps(case.to_json(), sort_keys=True)[:200]
