"""The evidence as built against the repository's record of it (``evidence/verdicts.tsv``).

``topp-gate site EVIDENCE_DIR --out DIR --check`` (what CI runs on the committed evidence)
fails unless every piece it built verified and the committed bundles are exactly the ones the
record names, each with the verdict the record gives: the checks ``scripts/verify_committed.sh``
makes, on the same verifications the pages are built from.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from ..core.errors import UsageError
from ..core.terminal import printable
from .model import BundleModel, Evidence, MutationRun

RECORD = "verdicts.tsv"
VERDICTS = ("PASS", "STOP")
MAX_RECORD_BYTES = 1 << 20  # about 150 bytes a line: thousands of bundles


class Recorded(NamedTuple):
    key: str  # the public key file that signed the bundle, relative like the path
    verdict: str


def read_record(table: Path) -> dict[str, Recorded]:
    """``verdicts.tsv``: bundle folder (as written: relative to the evidence folder's
    parent) -> the key that signed it and its recorded verdict. Every line is checked: three
    tab-separated fields, a verdict PASS or STOP, no folder named twice."""
    from ..core.safeio import read_regular_file

    # a regular file only (a FIFO or a device would block or never end), and bounded
    raw = read_regular_file(table, "the bundle record", MAX_RECORD_BYTES)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UsageError(f"the bundle record {printable(table)} is not UTF-8 text") from err
    record: dict[str, Recorded] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 3 or fields[2] not in VERDICTS:
            raise UsageError(f"{printable(table)}:{number}: expected path, public key and "
                             "PASS or STOP separated by tabs")
        path = fields[0].rstrip("/")
        if path in record:
            raise UsageError(f"{printable(table)}:{number}: {printable(path)} is named twice")
        record[path] = Recorded(fields[1], fields[2])
    return record


def folders_without_receipt(evidence_dir: Path) -> list[str]:
    """Committed bundle folders (the layout's bundle globs) that hold no signed receipt, so
    no bundle was built from them: under ``--check`` each is a problem, never skipped."""
    from .model import BUNDLE_GLOBS

    root = evidence_dir.resolve().parent
    out = []
    for patterns in BUNDLE_GLOBS.values():
        for pattern in patterns:
            for path in sorted(evidence_dir.glob(pattern)):
                if path.is_dir() and not (path / "receipt.dsse.json").is_file():
                    out.append(f"{printable(path.resolve().relative_to(root).as_posix())}: "
                               "no receipt.dsse.json")
    return out


def problems(evidence: Evidence, record: dict[str, Recorded]) -> list[str]:
    """One line per disagreement: a piece that was refused, a committed bundle folder the
    record does not name, a recorded folder that was not found, a verdict other than the
    recorded one. Bundles inside archives (``pr/*.tar.xz``) and mutation runs are not in
    the record; they only have to verify."""
    lines: list[str] = []
    seen: set[str] = set()
    for bundle in evidence.bundles:
        if bundle.archive is None:
            seen.add(bundle.path)
        if not isinstance(bundle, BundleModel):
            lines.append(f"{printable(bundle.path)}: refused: {printable(bundle.reason)}")
        elif bundle.archive is None and bundle.path not in record:
            lines.append(f"{printable(bundle.path)}: has no line in {RECORD}")
        elif bundle.archive is None and bundle.verdict != record[bundle.path].verdict:
            lines.append(f"{printable(bundle.path)}: verified verdict {bundle.verdict}, "
                         f"{RECORD} records {record[bundle.path].verdict}")
    for path in sorted(set(record) - seen):
        lines.append(f"{printable(path)}: named in {RECORD} but not found")
    for run in evidence.mutations:
        if not isinstance(run, MutationRun):
            lines.append(f"{printable(run.path)}: refused: {printable(run.reason)}")
    return lines
