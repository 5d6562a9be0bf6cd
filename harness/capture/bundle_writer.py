"""The bundle writer: codes, signs and atomically publishes a bundle. Kernel side.

It writes the layout that :mod:`harness.core.bundle` names and decodes (every codec, the
receipt's subjects, the signed envelope), and it holds the signing key, so it lives
outside the trusted core: the verifier never imports it.

The writer builds everything in a temporary directory beside the destination and renames
it into place only when complete, so an interrupted run never leaves a finished-looking
bundle. It refuses an existing destination and a bundle over the size cap.
"""

from __future__ import annotations

import json
import lzma
import os
import shutil
import stat
import struct
import tempfile
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from .. import __version__
from ..core import dsse, provenance, receipt
from ..core.bundle import (
    CASES,
    CODEC_MASK,
    CODEC_NONE,
    CODEC_XZ,
    CODEC_ZLIB,
    ENVELOPE,
    INPUT_CODECS,
    LAYOUT,
    MANIFEST,
    MASK_MAGIC,
    NEG_INF_F32,
    RECEIPT,
    ROWS,
    check_path,
    evidence_name,
    output_name,
    rows_bytes,
)
from ..core.digest import sha256_hex
from ..core.errors import LimitError, UsageError
from ..core.keys import keyid
from ..core.names import SIDES
from .signing import sign

_SUFFIX = {CODEC_NONE: "", CODEC_XZ: ".xz", CODEC_ZLIB: ".zz", CODEC_MASK: ".mask.xz"}
# Inputs: xz finds repeats up to 8 MiB back (forced rows share one background row), but it
# decodes incompressible randn at only a few MB/s; zlib decodes it ~50x faster at nearly
# the same ratio. The writer keeps xz only where it saves more than this fraction.
XZ_MIN_SAVING = 0.05
ZLIB_LEVEL = 6
# randn float32 barely compresses at any preset, so the fastest preset; but an 8 MiB
# dictionary, so that forced rows (one background row repeated, 1 MiB per row at vocab
# 262144) compress to about one row.
XZ_FILTERS = [{"id": lzma.FILTER_LZMA2, "preset": 0, "dict_size": 8 << 20}]


# --- encoders -------------------------------------------------------------------------------


def mask_encode(output: bytes, base: bytes) -> bytes:
    """Code ``output`` against ``base`` (same length, float32): codes then other values."""
    if len(output) != len(base) or len(output) % 4:
        raise UsageError("mask codec needs output and base float32 data of the same length")
    n = len(output) // 4
    try:
        import numpy as np
    except ImportError:  # pure path (tests prove it matches)
        codes = bytearray(n)
        others = []
        for i in range(n):
            word = output[4 * i : 4 * i + 4]
            if word == base[4 * i : 4 * i + 4]:
                continue
            if word == NEG_INF_F32:
                codes[i] = 1
            else:
                codes[i] = 2
                others.append(word)
        return MASK_MAGIC + struct.pack("<Q", n) + bytes(codes) + b"".join(others)
    out = np.frombuffer(output, dtype="<u4")
    ref = np.frombuffer(base, dtype="<u4")
    same = out == ref
    neg_inf = out == np.uint32(0xFF800000)
    code_arr = np.where(same, 0, np.where(neg_inf, 1, 2)).astype(np.uint8)
    others_arr = out[code_arr == 2]
    body: bytes = code_arr.tobytes() + others_arr.tobytes()
    return MASK_MAGIC + struct.pack("<Q", n) + body


def xz_compress(data: bytes) -> bytes:
    return lzma.compress(data, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64,
                         filters=XZ_FILTERS)


# --- writer ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class BundleContent:
    """Everything a run hands to the writer. Bytes are raw; the writer picks codecs.

    ``inputs`` keys are the paths ``cases.json`` names (``inputs/<id>.logits.f32`` ...);
    ``outputs[side][case_id]`` is that side's raw output bytes, or the failure status the
    runner recorded (one of ``gate.SIDE_FAILURES``), for every case of ``cases``;
    ``evidence[side]`` is that side's ``evidence.json`` bytes (omit a side that has none);
    ``rows``/``run_stops``/``verdict`` are what ``judge.judge_cases`` and ``gate.verdict``
    returned; ``split_path[case_id]`` is what the judge was told for that case.
    """

    manifest: bytes
    cases: bytes
    case_ids: Sequence[str]
    inputs: Mapping[str, bytes]
    outputs: Mapping[str, Mapping[str, bytes | str]]
    evidence: Mapping[str, bytes]
    split_path: Mapping[str, bool]
    rows: Sequence[dict[str, Any]]
    run_stops: Sequence[str]
    verdict: dict[str, Any]
    sources: dict[str, Any]
    patch_sha256: str
    environment: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, Any] = field(default_factory=dict)
    limits: dict[str, Any] = field(default_factory=dict)
    reports: Mapping[str, bytes] = field(default_factory=dict)
    harness_source: dict[str, Any] = field(
        default_factory=lambda: {"commit": None, "clean": None, "how": "unknown"})
    # case id -> side -> the dispatch path that side proved for the case ("split",
    # "single") or None; written for manifests that declare a path per side (version 2)
    paths: Mapping[str, Mapping[str, str | None]] | None = None
    # {"rules": rule-set id, "report": report-format id}: what judged the rows and the
    # format of report.md (harness.core.rulesets, harness.core.report); None only for a
    # fixture that imitates a receipt from before ids existed
    judgement: Mapping[str, str] | None = None


@dataclass(frozen=True)
class WrittenBundle:
    path: Path
    keyid: str
    stored_bytes: int
    statement: dict[str, Any]


def _base_for_output(content: BundleContent, case_id: str) -> str:
    """The input path an output of ``case_id`` is mask-coded against (its logits)."""
    cases = json.loads(content.cases)
    for case in cases.get("cases", []):
        if case.get("id") == case_id:
            return str(case["logits"])
    raise UsageError(f"case {case_id!r} is not in cases.json")


def _plan(content: BundleContent) -> Iterator[tuple[str, bytes, str, str | None]]:
    """(raw name, raw bytes, codec, base name) for every artifact, in a fixed order."""
    yield MANIFEST, content.manifest, CODEC_NONE, None
    yield CASES, content.cases, CODEC_NONE, None
    for name in sorted(content.inputs):
        yield name, content.inputs[name], CODEC_XZ, None
    for side in SIDES:
        side_outputs = content.outputs.get(side, {})
        for case_id in content.case_ids:
            value = side_outputs.get(case_id)
            if value is None:
                raise UsageError(f"no {side} output or status for case {case_id!r}")
            if isinstance(value, bytes):
                base = _base_for_output(content, case_id)
                yield output_name(side, case_id), value, CODEC_MASK, base
        if side in content.evidence:
            yield evidence_name(side), content.evidence[side], CODEC_NONE, None
    yield ROWS, rows_bytes(content.rows), CODEC_NONE, None
    for name in sorted(content.reports):
        yield name, content.reports[name], CODEC_NONE, None


def _store(root: Path, name: str, data: bytes, codec: str, base: bytes | None) -> dict[str, Any]:
    check_path(name)
    if codec == CODEC_NONE:
        stored = data
    elif codec in INPUT_CODECS:
        stored = xz_compress(data)
        alternative = zlib.compress(data, ZLIB_LEVEL)
        if len(alternative) * (1 - XZ_MIN_SAVING) <= len(stored):
            codec, stored = CODEC_ZLIB, alternative
    else:
        assert base is not None
        stored = xz_compress(mask_encode(data, base))
    stored_name = name + _SUFFIX[codec]
    target = root / stored_name
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "xb") as handle:
        handle.write(stored)
        handle.flush()
        os.fsync(handle.fileno())
    annotations: dict[str, Any] = {
        "codec": codec, "stored": stored_name, "stored_sha256": sha256_hex(stored),
        "size": len(data), "stored_size": len(stored),
    }
    return {"name": name, "digest": {"sha256": sha256_hex(data)}, "annotations": annotations}


def _evidence_object(content: BundleContent, side: str) -> dict[str, Any] | None:
    data = content.evidence.get(side)
    if data is None:
        return None
    value = json.loads(data)
    if not isinstance(value, dict):
        raise UsageError(f"{side} evidence.json is not a JSON object")
    return value


def build_predicate(content: BundleContent, max_bytes: int | None) -> dict[str, Any]:
    cases = []
    for case_id in content.case_ids:
        entry: dict[str, Any] = {"id": case_id, "split_path": bool(content.split_path[case_id])}
        for side in SIDES:
            value = content.outputs[side][case_id]
            entry[side] = "ok" if isinstance(value, bytes) else value
        if content.paths is not None:
            entry["paths"] = {side: content.paths[case_id][side] for side in SIDES}
        cases.append(entry)
    return {
        "harness": {"version": __version__, **provenance.installed_digest(),
                    "source": dict(content.harness_source)},
        **({"judgement": dict(content.judgement)} if content.judgement is not None else {}),
        "verdict": dict(content.verdict),
        "run_stops": sorted(set(content.run_stops)),
        "rows": list(content.rows),
        "cases": cases,
        "hashes": {
            "manifest": sha256_hex(content.manifest),
            "case_matrix": sha256_hex(content.cases),
            "rows": sha256_hex(rows_bytes(content.rows)),
            "patch": content.patch_sha256,
            "sources": content.sources,
        },
        "kernel_path": {side: _evidence_object(content, side) for side in SIDES},
        "environment": content.environment,
        "timings": content.timings,
        "limits": content.limits,
        "bundle": {"max_bytes": max_bytes, "layout": LAYOUT},
    }


def _tree_size(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def write_bundle(dest: Path, content: BundleContent, private_key: Ed25519PrivateKey, *,
                 max_bytes: int | None = None,
                 progress: Callable[[str], None] | None = None) -> WrittenBundle:
    """Write, sign and atomically publish a bundle at ``dest`` (which must not exist)."""
    dest = Path(dest)
    if os.path.lexists(dest):
        raise UsageError(f"{dest} already exists; refusing to overwrite a bundle")
    parent = dest.parent if str(dest.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"{parent} is not a directory")
    # named like a run's scratch (harness.capture.run.scratch_prefix), so a retry can remove what a
    # killed writer left
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.partial-{os.getpid()}-", dir=parent))
    try:
        subjects = []
        raw_by_name: dict[str, bytes] = {}
        for name, data, codec, base_name in _plan(content):
            if name in raw_by_name:
                raise UsageError(f"artifact {name!r} given twice")
            if progress:
                progress(name)
            base = None
            if codec == CODEC_MASK:
                assert base_name is not None
                if base_name not in raw_by_name:
                    raise UsageError(f"output {name!r} needs input {base_name!r}, not given")
                base = raw_by_name[base_name]
            subject = _store(tmp, name, data, codec, base)
            if codec == CODEC_MASK:
                subject["annotations"]["base"] = base_name
            subjects.append(subject)
            raw_by_name[name] = data
        statement = receipt.statement(subjects, build_predicate(content, max_bytes))
        receipt.validate(statement)
        payload = receipt.canonical(statement)
        envelope = sign(payload, private_key)
        (tmp / RECEIPT).write_bytes(payload)
        (tmp / ENVELOPE).write_bytes(dsse.envelope_bytes(envelope))
        total = _tree_size(tmp)
        if max_bytes is not None and total > max_bytes:
            raise LimitError(f"bundle would hold {total} bytes, over its cap of {max_bytes}")
        if os.path.lexists(dest):
            raise UsageError(f"{dest} appeared while writing; refusing to overwrite it")
        # mkdtemp makes 0700; give the bundle root the mode mkdir gave its subfolders
        os.chmod(tmp, stat.S_IMODE((tmp / "results").stat().st_mode))
        os.rename(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return WrittenBundle(dest, keyid(private_key.public_key()), total, statement)
