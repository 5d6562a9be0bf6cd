"""SYNTHETIC bundle content for the probes and the tests -- never evidence.

One builder, used by ``topp-gate probe`` and by ``tests/assets/synthetic.py`` (hence by
``scripts/make_tamper_fixtures.py``): captured cases drawn from ``random.Random`` (no torch;
the verifier never regenerates inputs from seeds) whose "kernel outputs" are the oracle's
kept set applied to the inputs (no kernel ever ran). The stock side of forced rows is fully
masked, as the real defect does. Every bundle made here carries ``"synthetic": true`` in its
kernel-path evidence and environment. The caller writes it with the real writer.

A manifest that declares its draws (``sampling``) makes a sampler's evidence: every case of
each side records its kept tokens as the row's draws (one each, the rest on the first, so
each row's counts sum to the declared draws per row for every output row that reads it,
as FlashInfer counts a case with ``indices``) and its proof the declared draws per
row, seed and offset, as a sampling family's kernel child does; every case's proof sits
under the path the manifest declares for it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from ..capture.bundle_writer import BundleContent
from ..core.call_pattern import expected_logits, index_bytes, vector
from ..core.cases_index import render_cases_index
from ..core.digest import sha256_hex
from ..core.errors import InternalError
from ..core.f32 import encode, runtime_p, to_float32
from ..core.judge import CaseBytes, RowSpec, judge_cases
from ..core.manifest import expected_layout, parse_manifest, row_ks, traffic_sampling
from ..core.names import SIDES, SPLIT
from ..core.oracle import Ambiguous, reference, top_k_top_p
from ..core.report import DEFAULT_REPORT, LEGACY_REPORT, ReportInputs, render_markdown
from ..core.rulesets import rule_set

NEG = -math.inf


def manifest_bytes(manifest: Mapping[str, Any]) -> bytes:
    return (json.dumps(manifest, indent=2) + "\n").encode()


def _rows_for(manifest: Mapping[str, Any], case: Any, rnd: random.Random,
              lie: bool = False) -> tuple[list[list[float]], list[float]]:
    spec = next(c for c in manifest["cases"] if c["id"] == case.id)
    rows, ps = [], []
    if spec["kind"] == "forced":
        background = [to_float32(rnd.gauss(0, 1)) for _ in range(case.vocab)]
        for value in spec["grid"]["value"]:
            for p in spec["grid"]["p"]:
                for fid in spec["grid"]["forced_id"]:
                    row = list(background)
                    row[fid] = 50.0 if lie else to_float32(float(value))
                    rows.append(row)
                    ps.append(0.25 if lie else runtime_p(p))
    elif spec["kind"] == "traffic":  # bf16-rounded rows (many exact ties), the manifest's p
        for (p, _), layout_row in zip(traffic_sampling(spec), case.rows, strict=True):
            row = [_bf16(rnd.gauss(0, 2)) for _ in range(case.vocab)]
            if layout_row.forced_id is not None:
                row[layout_row.forced_id] = 1e9
            rows.append(row)
            ps.append(to_float32(float(p)))
    else:
        for _ in range(case.batch):
            rows.append([to_float32(rnd.gauss(0, 1)) for _ in range(case.vocab)])
            ps.append(to_float32(rnd.uniform(0.1, 0.95)))
    return rows, ps


def _bf16(value: float) -> float:
    """``value`` rounded to bfloat16 (nearest even) and back: 8 significand bits."""
    bits = struct.unpack("<I", struct.pack("<f", to_float32(value)))[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return float(struct.unpack("<f", struct.pack("<I", bits))[0])


def content(manifest: Mapping[str, Any], *, seed: int = 0,
            sources: dict[str, Any] | None = None, damage: bool = False,
            stock_failure: str | None = None, rewrite_values: bool = False,
            rules: str | None = None, device: str | None = None,
            lie_inputs: bool = False, built_inputs: bool = False) -> BundleContent:
    """A complete synthetic BundleContent: patched keeps the oracle set, stock fails forced.

    ``sources`` is what the receipt records as ``hashes.sources`` (default: the manifest's
    pins); ``damage`` drops the top token of the last ordinary row on the patched side (a
    STOP); ``stock_failure`` replaces the stock output of the ordinary case by a runner
    status; ``rewrite_values`` keeps the oracle's tokens on the patched side but writes 7.0
    for every kept value (a kernel that rewrites what it keeps); ``rules`` judges the rows
    by another rule set than the manifest's (a dishonest signer; default: the manifest's);
    ``device`` is the device string both sides' evidence names (untrusted text the report
    shows); ``lie_inputs`` captures forced rows with value 50 and p 0.25 whatever the
    manifest says (everything else, rows and verdict included, made from those bytes);
    ``built_inputs`` captures what ``run`` would (:func:`harness.capture.cases.build_case`,
    CPU torch: rows, p and every file a call pattern adds), so ``verify --regenerate``
    rebuilds them byte for byte.
    """
    manifest_raw = manifest_bytes(manifest)
    parsed = parse_manifest(manifest_raw)
    layout = expected_layout(parsed)
    rules = parsed.rules if rules is None else rules
    rnd = random.Random(seed)  # noqa: S311 - reproducible fixture data, not security
    inputs: dict[str, bytes] = {}
    outputs: dict[str, dict[str, bytes | str]] = {"stock": {}, "patched": {}}
    cases = []
    top_k = rule_set(rules).top_k
    sampling = parsed.sampling
    paths = {c.id: {side: parsed.dispatch(side, c.id) for side in SIDES} for c in layout}
    split = {c.id: all(path == SPLIT for path in paths[c.id].values()) for c in layout}
    draws: dict[str, dict[str, list[Any]]] = {side: {} for side in SIDES}
    for case, case_spec in zip(layout, manifest["cases"], strict=True):
        built = _built(case_spec, case) if built_inputs else None
        rows, ps = built[0] if built is not None else _rows_for(manifest, case, rnd,
                                                                lie_inputs)
        ks: Sequence[int | None] = row_ks(case_spec, has_k=case.has_k) or [None] * len(rows)
        stock: list[float] = []
        patched: list[float] = []
        for row, p, spec, k in zip(rows, ps, case.rows, ks, strict=True):
            if top_k:
                outcome = top_k_top_p(row, p32=p if p < 1.0 else None,
                                      k=k if k is not None and k < case.vocab else None)
            else:
                outcome = reference(row, p)
            if isinstance(outcome, Ambiguous):
                raise InternalError(f"synthetic fixture: case {case.id} has a row the oracle "
                                    "cannot certify (draw another seed)")
            kept = set(outcome.kept)
            masked = [v if i in kept else NEG for i, v in enumerate(row)]
            patched += [7.0 if v != NEG else NEG for v in masked] if rewrite_values else masked
            stock += [NEG] * len(row) if spec.judge == "forced" else masked
        logits = encode([v for row in rows for v in row])
        inputs[case.logits_path] = logits
        inputs[case.p_path] = encode(ps)
        k_bytes = struct.pack(f"<{len(rows)}i", *ks) if case.k_path else None
        if case.k_path is not None and k_bytes is not None:
            inputs[case.k_path] = k_bytes
        inputs.update(built[1] if built is not None else _call_files(case, rnd))
        if damage and case.kind == "ordinary":
            last = len(patched) - case.vocab
            top = max(range(case.vocab), key=lambda i: rows[-1][i])
            patched[last + top] = NEG
        outputs["stock"][case.id] = encode(stock)
        outputs["patched"][case.id] = encode(patched)
        if stock_failure and case.kind == "ordinary":
            outputs["stock"][case.id] = stock_failure
        if sampling is not None:
            for side, values in (("stock", stock), ("patched", patched)):
                if isinstance(outputs[side][case.id], bytes):
                    # as FlashInfer counts them: per input row, over every output row
                    # that reads it (``indices``), so a row read twice has twice the draws
                    draws[side][case.id] = [
                        _drawn(values[i * case.vocab:(i + 1) * case.vocab],
                               sampling["draws_per_row"] * reads, case.id)
                        for i, reads in enumerate(case.call.outputs_per_row(len(rows)))]
        cases.append(CaseBytes(case.id, case.vocab,
                               tuple(RowSpec(r.judge, r.forced_id, r.label) for r in case.rows),
                               logits, encode(ps), outputs["stock"][case.id],
                               outputs["patched"][case.id], split_path=split[case.id], k=k_bytes,
                               split_sides=((paths[case.id]["stock"] == SPLIT,
                                             paths[case.id]["patched"] == SPLIT)
                                            if parsed.receipt_paths else None),
                               draws={s: draws[s][case.id] for s in SIDES
                                      if case.id in draws[s]} or None))
    rows_result = judge_cases(cases, rules=rules)
    # Shaped like a kernel child's evidence (backend, per-case split-path proof and the
    # hashes of the bytes read and written), because the verifier binds the receipt's
    # split-path flags and the artifacts to it; no kernel ran.
    named = {} if device is None else {"device": device}
    backend = manifest["backend"]["required"]
    evidence = {side: (json.dumps({"synthetic": True, "side": side, "backend": backend,
                                   **named,
                                   "note": "SYNTHETIC TEST FIXTURE: no kernel ran",
                                   "cases": [_record(c, inputs, outputs[side][c.id],
                                                     paths[c.id][side], sampling,
                                                     draws[side].get(c.id))
                                             for c in layout]},
                                  indent=2) + "\n").encode() for side in SIDES}
    verdict_result = rule_set(rules).verdict(rows_result, [])
    if sources is None:
        sources = {side: dict(manifest["sources"]["sides"][side])
                   for side in SIDES}
    return with_report(BundleContent(
        manifest=manifest_raw,
        cases=render_cases_index(layout, sampling),
        case_ids=[c.id for c in layout],
        inputs=inputs,
        outputs=outputs,
        evidence=evidence,
        split_path=split,
        rows=rows_result,
        run_stops=[],
        verdict=verdict_result,
        sources=sources,
        patch_sha256=manifest["sources"].get("patch_sha256", "0" * 64),
        environment={"synthetic": True},
        timings={"total_s": 0.0},
        limits=dict(manifest["limits"]),
        judgement={"rules": rules, "report": DEFAULT_REPORT},
        paths=paths if parsed.receipt_paths else None,
    ), manifest)


def with_report(bundle: BundleContent, manifest: Mapping[str, Any]) -> BundleContent:
    """``bundle`` with ``report.md`` made by the real report generator from its own rows,
    verdict and evidence (as ``topp-gate run`` does; the verifier regenerates it)."""
    report = render_markdown(ReportInputs(
        manifest_name=manifest["name"], backend=manifest["backend"]["required"],
        rows=bundle.rows, verdict=bundle.verdict,
        evidence={side: json.loads(data) for side, data in bundle.evidence.items()},
        cases=json.loads(bundle.cases),
        rules=(bundle.judgement or {}).get("rules")),
        (bundle.judgement or {}).get("report", LEGACY_REPORT))
    return dataclasses.replace(bundle, reports={"report.md": report.encode("utf-8")})


def _built(spec: Mapping[str, Any], case: Any
           ) -> tuple[tuple[list[list[float]], list[float]], dict[str, bytes]]:
    """A case's rows and p as ``run`` builds them (needs torch), and its call files."""
    from ..capture.cases import build_case
    from ..core.f32 import decode

    built = build_case(spec, has_k=case.has_k)
    values = decode(built.logits)
    rows = [values[i * case.vocab:(i + 1) * case.vocab] for i in range(case.batch)]
    files = {name: data for name, data in built.files().items()
             if name in (case.padding_path, case.indices_path)}
    return (rows, decode(built.p)), files


def _call_files(case: Any, rnd: random.Random) -> dict[str, bytes]:
    """The files a case's call pattern adds: any float32 padding (the verifier rebuilds it
    only under ``--regenerate``, which a synthetic bundle never passes), the index array."""
    files: dict[str, bytes] = {}
    call = case.call
    if case.padding_path is not None:
        width = call.row_stride - case.vocab
        files[case.padding_path] = encode([rnd.gauss(0.0, 1.0) for _ in range(case.batch * width)])
    if case.indices_path is not None:
        files[case.indices_path] = index_bytes(call)
    return files


def _drawn(row: Sequence[float], count: int, case_id: str) -> list[list[int]]:
    """A row's kept tokens as its draws: one each, the rest of ``count`` on the first; none
    for a row no output reads (``count`` 0)."""
    if count == 0:
        return []
    kept = [token for token, value in enumerate(row) if value != NEG]
    if not 1 <= len(kept) <= count:
        raise InternalError(f"synthetic fixture: case {case_id} keeps {len(kept)} tokens on a "
                            f"row, which {count} draws cannot record")
    return [[token, 1 + (count - len(kept) if i == 0 else 0)] for i, token in enumerate(kept)]


def _record(case: Any, inputs: dict[str, bytes], output: bytes | str, path: str = SPLIT,
            sampling: Mapping[str, int] | None = None,
            draws: list[Any] | None = None) -> dict[str, Any]:
    """One case of a synthetic kernel evidence record (what a kernel child writes): its
    path's proof, and a sampler's draws and the declared sampling they were drawn with."""
    proof: dict[str, Any] = {"proven": True}
    record: dict[str, Any] = {"id": case.id, path: proof,
                              "logits_sha256": sha256_hex(inputs[case.logits_path]),
                              "p_sha256": sha256_hex(inputs[case.p_path])}
    if case.k_path is not None:
        record["k_sha256"] = sha256_hex(inputs[case.k_path])
    for key, rel in (("padding_sha256", case.padding_path),
                     ("indices_sha256", case.indices_path)):
        if rel is not None:
            record[key] = sha256_hex(inputs[rel])
    if not case.call.is_default:  # the call as a child records it (harness.core.call_pattern)
        record["call"] = {"logits": expected_logits(case.batch, case.vocab, case.call),
                          "k": None,
                          "p": vector(case.batch, "float32", case.call.param_stride),
                          **({"indices": vector(len(case.call.indices),
                                                case.call.indices_dtype)}
                             if case.call.indices is not None else {})}
        if case.call.row_stride is not None:
            record["padding_intact"] = True
    if isinstance(output, bytes):
        record["output_sha256"] = sha256_hex(output)
    if sampling is not None and draws is not None:
        record["draws"] = draws
        proof.update(sampling)
    return record
