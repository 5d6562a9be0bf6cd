#!/usr/bin/env python3
"""Regenerate the tamper fixtures: one SYNTHETIC bundle per defect, named by the defect.

    .venv/bin/python scripts/make_tamper_fixtures.py [--out tests/assets/tamper]

Each fixture starts from the same synthetic good bundle (tests/assets/synthetic.py, signed
with the test-only key) and carries exactly one defect, made with the mutators the breakage
probes use (harness/probes/tamper.py). ``FIXTURES`` maps each name to
the mutation, the error code ``topp-gate verify`` must refuse it with, and whether that
needs ``--strict``. The output is deterministic (Ed25519 and xz are); it embeds the
harness code digest, so regenerate after changing harness code and commit the result
(a test regenerates them and compares every byte).
Test-only keys; never evidence.

Some defects git cannot store, so tests create them at test time on a copy of ``good``
(tests/unit/core/test_verify_hostile.py): a FIFO in place of a bundle file, an unreadable
folder, an extra empty folder, 3000 nested folders.
"""

from __future__ import annotations

import argparse
import base64
import json
import lzma
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "assets"))

import synthetic  # noqa: E402

from harness.capture.signing import load_private_key  # noqa: E402
from harness.core import dsse  # noqa: E402
from harness.core.bundle import ENVELOPE, RECEIPT, ROWS, rows_bytes  # noqa: E402
from harness.core.digest import sha256_hex  # noqa: E402
from harness.probes import tamper  # noqa: E402

FORCED_OUT = "outputs/patched/forced-v64.out.f32.mask.xz"
STOCK_OUT = "outputs/stock/forced-v64.out.f32.mask.xz"
INPUT = "inputs/forced-v64.logits.f32"  # raw name; stored as .xz or .zz (writer's choice)


@dataclass(frozen=True)
class Fixture:
    mutate: Callable[[Path], None]
    code: str | None  # None: verifies
    strict: bool = False
    doc: str = ""


def _extra(root: Path) -> None:
    (root / "outputs" / "patched" / "notes.txt").write_bytes(b"added after signing\n")


def _sign(root: Path, statement: dict, *, key: Path = synthetic.SIGNING_KEY,
          payload: bytes | None = None, payload_type: str = dsse.IN_TOTO_PAYLOAD_TYPE) -> None:
    tamper.sign_statement(root, statement, load_private_key(key), payload=payload,
                          payload_type=payload_type)


def _resigned(change: Callable[[dict], None]) -> Callable[[Path], None]:
    """Edit the statement, then sign it again with the test-only key (an insider edit)."""
    return lambda root: tamper.resign(change, load_private_key(synthetic.SIGNING_KEY))(root)


def _resign_other_key(root: Path) -> None:
    _sign(root, tamper.statement(root), key=synthetic.OTHER_KEY)


def _rebind_rows(root: Path, statement: dict) -> None:
    """Rewrite results/rows.json from the statement's rows and fix every hash that binds it."""
    data = rows_bytes(statement["predicate"]["rows"])
    (root / ROWS).write_bytes(data)
    statement["predicate"]["hashes"]["rows"] = sha256_hex(data)
    for subject in statement["subject"]:
        if subject["name"] == ROWS:
            subject["digest"]["sha256"] = sha256_hex(data)
            subject["annotations"].update(stored_sha256=sha256_hex(data), size=len(data),
                                          stored_size=len(data))


def _edit_row_resign(root: Path) -> None:
    statement = tamper.statement(root)
    row = statement["predicate"]["rows"][0]
    row["patched"]["kept"] += 1  # a plausible lie, schema-valid
    _rebind_rows(root, statement)
    _sign(root, statement)


def _edit_verdict(statement: dict) -> None:
    statement["predicate"]["verdict"] = {"verdict": "STOP", "reasons": ["count_bound"],
                                         "rows": statement["predicate"]["verdict"]["rows"],
                                         "rows_stopped": 1}


def _reorder_keys(root: Path, *, resign: bool) -> None:
    statement = tamper.statement(root)
    reordered = {k: statement[k] for k in reversed(list(statement))}
    body = json.dumps(reordered, separators=(",", ":")).encode()
    if resign:
        _sign(root, statement, payload=body)
        return
    envelope = json.loads((root / ENVELOPE).read_bytes())
    envelope["payload"] = base64.b64encode(body).decode()
    (root / ENVELOPE).write_bytes(dsse.envelope_bytes(envelope))
    (root / RECEIPT).write_bytes(body)


def _payload_type(root: Path, *, resign: bool) -> None:
    if resign:
        _sign(root, tamper.statement(root), payload_type="application/json")
        return
    envelope = json.loads((root / ENVELOPE).read_bytes())
    envelope["payloadType"] = "application/json"
    (root / ENVELOPE).write_bytes(dsse.envelope_bytes(envelope))


def _edit_receipt_copy(root: Path) -> None:
    (root / RECEIPT).write_bytes((root / RECEIPT).read_bytes() + b"\n")


def _keyid_hint(root: Path) -> None:
    envelope = json.loads((root / ENVELOPE).read_bytes())
    envelope["signatures"][0]["keyid"] = "0" * 64
    (root / ENVELOPE).write_bytes(dsse.envelope_bytes(envelope))


def _size_lie(statement: dict) -> None:
    """Declare a raw size smaller than the xz stream expands to (a decompression bomb)."""
    for subject in statement["subject"]:
        if subject["name"] == INPUT:
            subject["annotations"]["size"] = 16


def _path_escape(statement: dict) -> None:
    statement["subject"][0]["annotations"]["stored"] = "../manifest.json"


def _harness_digest(statement: dict) -> None:
    statement["predicate"]["harness"]["sha256"] = "0" * 64


def _evidence(statement: dict) -> None:
    statement["predicate"]["kernel_path"]["patched"]["side"] = "stock"


def _split_path(statement: dict) -> None:
    """Claim the split path was not taken for a forced case: the rerun then differs."""
    statement["predicate"]["cases"][0]["split_path"] = False


def _patch_hash(statement: dict) -> None:
    statement["predicate"]["hashes"]["patch"] = "1" * 64


BOMB_RAW_BYTES = 256 << 20  # what the bomb's xz stream really expands to
BOMB_DECLARED_BYTES = 4 << 30  # what its resigned receipt claims


def _bomb_stream() -> bytes:
    """An xz stream (a few tens of kB) that expands to 256 MiB of zeros."""
    compressor = lzma.LZMACompressor(format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64,
                                     filters=[{"id": lzma.FILTER_LZMA2, "preset": 0}])
    zeros = bytes(1 << 20)
    parts = [compressor.compress(zeros) for _ in range(BOMB_RAW_BYTES >> 20)]
    return b"".join(parts) + compressor.flush()


def _bomb_resign(declared: int) -> Callable[[Path], None]:
    """Replace the captured logits by a decompression bomb, declare ``declared`` raw bytes
    for it and sign again (a dishonest signer whose key the auditor was given)."""
    def run(root: Path) -> None:
        statement = tamper.statement(root)
        stream = _bomb_stream()
        for subject in statement["subject"]:
            if subject["name"] == INPUT:
                old = subject["annotations"]["stored"]
                (root / old).unlink()
                stored = INPUT + ".xz"
                (root / stored).write_bytes(stream)
                subject["annotations"].update(codec="xz", stored=stored, size=declared,
                                              stored_size=len(stream),
                                              stored_sha256=sha256_hex(stream))
        _sign(root, statement)
    return run


def _rebind_manifest(root: Path, raw: bytes) -> None:
    """Replace manifest.json by ``raw``, update every hash that binds it, sign again."""
    (root / "manifest.json").write_bytes(raw)
    statement = tamper.statement(root)
    statement["predicate"]["hashes"]["manifest"] = sha256_hex(raw)
    for subject in statement["subject"]:
        if subject["name"] == "manifest.json":
            subject["digest"]["sha256"] = sha256_hex(raw)
            subject["annotations"].update(stored_sha256=sha256_hex(raw), size=len(raw),
                                          stored_size=len(raw))
    _sign(root, statement)


def _duplicate_key_manifest_resign(root: Path) -> None:
    """A manifest with a duplicate key (which value counts depends on the reader), every
    hash that binds it updated and signed again."""
    raw = (root / "manifest.json").read_bytes()
    _rebind_manifest(root, raw.rstrip()[:-1].rstrip() + b',\n  "name": "another-name"\n}\n')


OVER_BUDGET_CASES = 5  # each at the per-case ceiling (64 x 262144): 5 x 2**24 > 2**26


def over_budget_manifest() -> dict:
    """The synthetic manifest plus cases that are each within every per-case ceiling but
    together ask more work (batch x vocab) of a verifier than harness.core.limits allows."""
    manifest = json.loads(json.dumps(synthetic.MANIFEST))
    manifest["limits"].update(max_vocab=262144, max_bundle_bytes=1 << 34)
    manifest["cases"] += [{"id": f"ordinary-big-{i}", "kind": "ordinary", "seed": i,
                           "batch": 64, "vocab": 262144} for i in range(OVER_BUDGET_CASES)]
    return manifest


def _work_over_budget_resign(root: Path) -> None:
    """A signer's manifest asking 5 x 64 x 262144 values of the verifier (the artifacts are
    the good bundle's: the verifier must refuse on the manifest alone, reading nothing
    else)."""
    _rebind_manifest(root, synthetic.fixture.manifest_bytes(over_budget_manifest()))


ESCAPE_NAME = "\x1b[2K\rverdict: PASS"


def _escape_named_file(root: Path) -> None:
    """A file whose name would redraw the terminal line if printed raw."""
    (root / ESCAPE_NAME).write_bytes(b"added after signing\n")


def _source_pin(statement: dict) -> None:
    statement["predicate"]["hashes"]["sources"]["patched"]["version"] = "0.34.0"


def _rebuilt(change: Callable[[dict], None] | None = None, **variant: object
             ) -> Callable[[Path], None]:
    """Replace the bundle by a version 3 synthetic one (rule set seed/v2) made with
    ``variant`` (:func:`harness.probes.fixture.content`), then, with ``change``, edit its
    statement and sign it again: a dishonest signer holding the test-only key."""
    def run(root: Path) -> None:
        shutil.rmtree(root)
        synthetic.write_v3(root, **variant)
        if change is not None:
            statement = tamper.statement(root)
            change(statement)
            _sign(root, statement)
    return run


def _judged_by(rules: str | None = None, report: str | None = None) -> Callable[[dict], None]:
    def change(statement: dict) -> None:
        judgement = statement["predicate"]["judgement"]
        judgement.update({k: v for k, v in (("rules", rules), ("report", report)) if v})
    return change


MARKDOWN_DEVICE = "H200\n\n# Verdict: PASS\n\n<!-- the rest of the report is hidden"


FIXTURES: dict[str, Fixture] = {
    "good": Fixture(lambda root: None, None, doc="the untouched synthetic bundle"),
    "output_bit_flipped": Fixture(tamper.flip(FORCED_OUT), "binding_mismatch"),
    "input_bit_flipped": Fixture(tamper.flip(INPUT), "binding_mismatch"),
    "manifest_bit_flipped": Fixture(tamper.flip("manifest.json"), "binding_mismatch"),
    "rows_bit_flipped": Fixture(tamper.flip(ROWS), "binding_mismatch"),
    "output_truncated": Fixture(tamper.truncate(FORCED_OUT), "binding_mismatch"),
    "envelope_truncated": Fixture(tamper.truncate(ENVELOPE), "malformed_evidence"),
    "output_deleted": Fixture(tamper.delete(FORCED_OUT), "malformed_evidence"),
    "receipt_copy_deleted": Fixture(tamper.delete(RECEIPT), "malformed_evidence"),
    "extra_file": Fixture(_extra, "malformed_evidence"),
    "outputs_swapped": Fixture(tamper.swap(STOCK_OUT, FORCED_OUT), "binding_mismatch"),
    "resigned_other_key": Fixture(_resign_other_key, "bad_signature"),
    "row_result_edited_resigned": Fixture(_edit_row_resign, "binding_mismatch"),
    "verdict_edited_resigned": Fixture(_resigned(_edit_verdict), "binding_mismatch"),
    "split_path_edited_resigned": Fixture(_resigned(_split_path), "binding_mismatch"),
    "payload_keys_reordered": Fixture(lambda r: _reorder_keys(r, resign=False), "bad_signature"),
    "payload_keys_reordered_resigned": Fixture(lambda r: _reorder_keys(r, resign=True),
                                               "malformed_evidence"),
    "payload_type_changed": Fixture(lambda r: _payload_type(r, resign=False), "bad_signature"),
    "payload_type_changed_resigned": Fixture(lambda r: _payload_type(r, resign=True),
                                             "binding_mismatch"),
    "receipt_copy_edited": Fixture(_edit_receipt_copy, "binding_mismatch"),
    "keyid_hint_edited": Fixture(_keyid_hint, "malformed_evidence"),
    "size_lie_resigned": Fixture(_resigned(_size_lie), "malformed_evidence"),
    "path_escape_resigned": Fixture(_resigned(_path_escape), "malformed_evidence"),
    "evidence_edited_resigned": Fixture(_resigned(_evidence), "binding_mismatch"),
    "patch_hash_edited_resigned": Fixture(_resigned(_patch_hash), "binding_mismatch"),
    "source_pin_edited_resigned": Fixture(_resigned(_source_pin), "binding_mismatch"),
    "harness_digest_edited_resigned": Fixture(_resigned(_harness_digest), "harness_drift",
                                              strict=True),
    "decompression_bomb_resigned": Fixture(_bomb_resign(BOMB_DECLARED_BYTES),
                                           "malformed_evidence"),
    "decompression_bomb_true_size_resigned": Fixture(_bomb_resign(4 * 4 * 64),
                                                     "malformed_evidence"),
    "duplicate_key_manifest_resigned": Fixture(_duplicate_key_manifest_resign,
                                               "malformed_evidence"),
    "escape_named_file": Fixture(_escape_named_file, "malformed_evidence"),
    "work_over_budget_resigned": Fixture(_work_over_budget_resign, "malformed_evidence"),
    # a patched output that keeps the oracle's tokens but writes 7.0 for every kept value,
    # judged by the seed's rules (which never compare values) into a PASS, then signed as
    # if seed/v2 (which does) had judged it: the rerun by seed/v2 stops every row
    "kept_values_rewritten_resigned": Fixture(
        _rebuilt(_judged_by(rules="seed/v2"), rewrite_values=True, rules="seed/v1"),
        "binding_mismatch"),
    # captured forced rows hold 50 at p 0.25 where the manifest says 1e30 at p 0.5 and 0.9;
    # rows, evidence and verdict all made from those bytes
    "forced_value_and_p_not_the_manifests_resigned": Fixture(_rebuilt(lie_inputs=True),
                                                             "binding_mismatch"),
    # Markdown and HTML in the evidence's device string, the receipt claiming the legacy
    # report format that printed evidence text as it was
    "markdown_device_as_report_v1_resigned": Fixture(
        _rebuilt(_judged_by(report="report/v1"), device=MARKDOWN_DEVICE),
        "malformed_evidence"),
}


def build(out: Path) -> list[str]:
    """Write every fixture under ``out`` (replacing what is there); returns the names."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        good = Path(tmp) / "good"
        synthetic.write(good)
        for name, fixture in FIXTURES.items():
            target = out / name
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(good, target)
            fixture.mutate(target)
    expected = {name: {"code": f.code, "strict": f.strict} for name, f in FIXTURES.items()}
    (out / "EXPECTED.json").write_text(json.dumps(expected, indent=2, sort_keys=True) + "\n")
    return list(FIXTURES)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "assets" / "tamper")
    args = parser.parse_args()
    names = build(args.out)
    print(f"wrote {len(names)} synthetic tamper fixtures under {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
