"""Bundle layout, artifact codecs, the atomic writer and safe reads.

Layout (``topp-gate/bundle/v1``)::

    manifest.json                      the frozen manifest, byte for byte
    cases.json                         captured cases index
    inputs/<id>.{logits,p}.f32.{xz,zz} captured inputs, xz- or zlib-compressed
    outputs/<side>/<id>.out.f32.mask.xz  outputs coded against the case's logits, then xz
    outputs/<side>/evidence.json       kernel-path evidence of that side's child
    results/rows.json                  per-row gate results (the judge's output)
    report.md, report.png              human report (when given)
    receipt.json                       the signed payload (in-toto Statement v1), for reading
    receipt.dsse.json                  DSSE envelope, Ed25519 signature over the payload

Every subject in the receipt is named by its *raw* path (``inputs/x.logits.f32``); digests
are over raw bytes; annotations record the codec, stored path, stored digest and sizes.

Codecs: ``none`` (stored as is), ``xz`` (standard-library lzma), ``zlib`` (for inputs that
xz would not shrink by more than 5%: far faster to decode), ``f32mask+xz``: an output
row of float32 values coded against the input logits it was computed from, one code byte
per element (0: same bits as the input, 1: ``-inf``, 2: another value, listed in order
after the codes), then xz. Lossless; the digest is always over the decoded raw output.
Decoding is capped by the declared raw size.

The writer builds everything in a temporary directory beside the destination and renames
it into place only when complete, so an interrupted run never leaves a finished-looking
bundle. It refuses an existing destination and a bundle over the size cap.
"""

from __future__ import annotations

import errno
import json
import lzma
import os
import re
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
from . import dsse, provenance, receipt
from .digest import sha256_hex
from .errors import BindingMismatchError, LimitError, MalformedEvidenceError, UsageError
from .keys import keyid
from .names import SIDES

LAYOUT = "topp-gate/bundle/v1"
MANIFEST = "manifest.json"
CASES = "cases.json"
ROWS = "results/rows.json"
RECEIPT = "receipt.json"
ENVELOPE = "receipt.dsse.json"
SIGNATURE_FILES = (RECEIPT, ENVELOPE)
MAX_ENVELOPE_BYTES = 16 << 20  # 36x the H200 receipt's envelope (405 rows)

CODEC_NONE = "none"
CODEC_XZ = "xz"
CODEC_ZLIB = "zlib"
CODEC_MASK = "f32mask+xz"
CODECS = (CODEC_NONE, CODEC_XZ, CODEC_ZLIB, CODEC_MASK)
INPUT_CODECS = (CODEC_XZ, CODEC_ZLIB)
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
XZ_MEMLIMIT = 64 << 20  # the decoder refuses streams that would need more memory

_SAFE_PATH = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*")
_MASK_MAGIC = b"TGM1"
_NEG_INF = struct.pack("<f", float("-inf"))
_CODE_RUNS = re.compile(rb"\x00+|\x01+|\x02+")


def output_name(side: str, case_id: str) -> str:
    return f"outputs/{side}/{case_id}.out.f32"


def evidence_name(side: str) -> str:
    return f"outputs/{side}/evidence.json"


def check_path(rel: str) -> str:
    """A bundle-relative path: no absolute paths, no ``..``, no hidden or odd names."""
    if not isinstance(rel, str) or len(rel) > 255 or not _SAFE_PATH.fullmatch(rel):
        raise MalformedEvidenceError(f"path {rel!r} is not a safe bundle path")
    return rel


# --- codecs ---------------------------------------------------------------------------------


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
            if word == _NEG_INF:
                codes[i] = 1
            else:
                codes[i] = 2
                others.append(word)
        return _MASK_MAGIC + struct.pack("<Q", n) + bytes(codes) + b"".join(others)
    out = np.frombuffer(output, dtype="<u4")
    ref = np.frombuffer(base, dtype="<u4")
    same = out == ref
    neg_inf = out == np.uint32(0xFF800000)
    code_arr = np.where(same, 0, np.where(neg_inf, 1, 2)).astype(np.uint8)
    others_arr = out[code_arr == 2]
    body: bytes = code_arr.tobytes() + others_arr.tobytes()
    return _MASK_MAGIC + struct.pack("<Q", n) + body


def mask_decode(coded: bytes, base: bytes, *, fast: bool | None = None) -> bytes:
    """Inverse of :func:`mask_encode`; any inconsistency is malformed evidence.

    ``fast`` (default: when numpy is importable) uses numpy; tests prove it identical.
    """
    if len(coded) < 12 or coded[:4] != _MASK_MAGIC:
        raise MalformedEvidenceError("mask-coded output has no valid header")
    (n,) = struct.unpack("<Q", coded[4:12])
    if 4 * n != len(base) or len(coded) < 12 + n:
        raise MalformedEvidenceError("mask-coded output does not match its base's length")
    codes = coded[12 : 12 + n]
    others = coded[12 + n :]
    if fast is None:
        try:
            import numpy  # noqa: F401
        except ImportError:
            fast = False
        else:
            fast = True
    if fast:
        return _mask_decode_numpy(codes, others, base)
    return _mask_decode_pure(codes, others, base)


def _mask_decode_numpy(codes: bytes, others: bytes, base: bytes) -> bytes:
    import numpy as np

    code_arr = np.frombuffer(codes, dtype=np.uint8)
    if code_arr.size and int(code_arr.max()) > 2:
        raise MalformedEvidenceError("mask-coded output has invalid codes or a wrong value list")
    listed = code_arr == 2
    if len(others) % 4 or int(np.count_nonzero(listed)) != len(others) // 4:
        raise MalformedEvidenceError("mask-coded output has invalid codes or a wrong value list")
    out = np.frombuffer(base, dtype="<u4").copy()
    out[code_arr == 1] = np.uint32(0xFF800000)
    out[listed] = np.frombuffer(others, dtype="<u4")
    decoded: bytes = out.tobytes()
    return decoded


def _mask_decode_pure(codes: bytes, others: bytes, base: bytes) -> bytes:
    n = len(codes)
    parts: list[bytes] = []
    used = 0
    covered = 0
    for run in _CODE_RUNS.finditer(codes):
        start, end = run.span()
        length = end - start
        code = codes[start]
        if code == 0:
            parts.append(base[4 * start : 4 * end])
        elif code == 1:
            parts.append(_NEG_INF * length)
        else:
            parts.append(others[4 * used : 4 * (used + length)])
            used += length
        covered += length
    if covered != n or 4 * used != len(others):
        raise MalformedEvidenceError("mask-coded output has invalid codes or a wrong value list")
    return b"".join(parts)


def xz_compress(data: bytes) -> bytes:
    return lzma.compress(data, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64,
                         filters=XZ_FILTERS)


def zlib_decompress(data: bytes, max_size: int) -> bytes:
    """Decompress one complete zlib stream, refusing more than ``max_size`` output bytes."""
    decompressor = zlib.decompressobj()
    try:
        out = decompressor.decompress(data, max_size + 1)
    except zlib.error as err:
        raise MalformedEvidenceError(f"zlib stream is corrupt: {err}") from err
    if len(out) > max_size or decompressor.unconsumed_tail:
        raise MalformedEvidenceError(f"zlib stream expands past its declared {max_size} bytes")
    if not decompressor.eof or decompressor.unused_data:
        raise MalformedEvidenceError("zlib stream is truncated or has trailing data")
    return out


def xz_decompress(data: bytes, max_size: int) -> bytes:
    """Decompress one complete xz stream, refusing more than ``max_size`` output bytes."""
    decompressor = lzma.LZMADecompressor(format=lzma.FORMAT_XZ, memlimit=XZ_MEMLIMIT)
    try:
        out = decompressor.decompress(data, max_length=max_size + 1)
    except lzma.LZMAError as err:
        raise MalformedEvidenceError(f"xz stream is corrupt: {err}") from err
    if len(out) > max_size:
        raise MalformedEvidenceError(f"xz stream expands past its declared {max_size} bytes")
    if not decompressor.eof or decompressor.unused_data:
        raise MalformedEvidenceError("xz stream is truncated or has trailing data")
    return out


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


@dataclass(frozen=True)
class WrittenBundle:
    path: Path
    keyid: str
    stored_bytes: int
    statement: dict[str, Any]


def rows_bytes(rows: Sequence[dict[str, Any]]) -> bytes:
    """``results/rows.json``: the per-row results as canonical JSON plus a newline."""
    return receipt.canonical(list(rows)) + b"\n"


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
        envelope = dsse.sign(payload, private_key)
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


# --- safe reads -----------------------------------------------------------------------------


_DIR_FLAGS = (os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
              | getattr(os, "O_CLOEXEC", 0))
_FILE_FLAGS = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
               | getattr(os, "O_CLOEXEC", 0))
MAX_TREE_DEPTH = 8  # the layout needs 3 (outputs/<side>/<file>)
MAX_TREE_ENTRIES = 100_000


@dataclass(frozen=True)
class Tree:
    """Every entry of a bundle directory, as relative posix paths."""

    files: frozenset[str]
    folders: frozenset[str]


class BundleDir:
    """Read-only access to a bundle directory that never follows a link or leaves the root.

    Files are opened with ``O_NOFOLLOW | O_NONBLOCK`` relative to folders opened with
    ``O_NOFOLLOW``, and ``fstat`` must show a regular file before anything is read, so a
    FIFO, a device or a link anywhere in the bundle is refused instead of followed or
    waited on.
    """

    def __init__(self, root: Path) -> None:
        try:
            info = os.lstat(root)
        except OSError as err:
            raise MalformedEvidenceError(f"cannot open bundle {root}: "
                                         f"{err.strerror or err}") from err
        if not stat.S_ISDIR(info.st_mode):
            raise MalformedEvidenceError(f"bundle {root} is not a directory (or is a link)")
        self.root = root

    def tree(self) -> Tree:
        """Every file and folder; a link, special file, unreadable folder, or a tree deeper
        than :data:`MAX_TREE_DEPTH` or larger than :data:`MAX_TREE_ENTRIES` is refused.

        Iterative (no recursion, so no depth can exhaust the stack), and each folder is
        opened and listed explicitly: a folder that cannot be read is an error, never
        skipped.
        """
        files: set[str] = set()
        folders: set[str] = set()
        opened: list[int] = []
        try:
            opened.append(os.open(self.root, _DIR_FLAGS))
            stack: list[tuple[str, int]] = [("", opened[-1])]
            while stack:
                rel_dir, fd = stack.pop()
                for name in sorted(os.listdir(fd)):
                    rel = f"{rel_dir}/{name}" if rel_dir else name
                    if len(files) + len(folders) >= MAX_TREE_ENTRIES:
                        raise MalformedEvidenceError(
                            f"bundle holds more than {MAX_TREE_ENTRIES} entries")
                    mode = os.lstat(name, dir_fd=fd).st_mode
                    if stat.S_ISLNK(mode):
                        raise MalformedEvidenceError(f"bundle holds a symbolic link: {rel!r}")
                    if stat.S_ISDIR(mode):
                        if rel.count("/") + 1 >= MAX_TREE_DEPTH:
                            raise MalformedEvidenceError(
                                f"bundle tree is deeper than {MAX_TREE_DEPTH} levels at "
                                f"{rel[:200]!r}")
                        try:
                            opened.append(os.open(name, _DIR_FLAGS, dir_fd=fd))
                        except OSError as err:
                            raise MalformedEvidenceError(
                                f"cannot read bundle folder {rel!r}: "
                                f"{err.strerror or err}") from err
                        folders.add(rel)
                        stack.append((rel, opened[-1]))
                    elif stat.S_ISREG(mode):
                        files.add(rel)
                    else:
                        raise MalformedEvidenceError(f"bundle holds a non-regular file: {rel!r}")
        except OSError as err:
            raise MalformedEvidenceError(f"cannot list bundle: {err.strerror or err}") from err
        finally:
            for fd in opened:
                os.close(fd)
        return Tree(frozenset(files), frozenset(folders))

    def listing(self) -> set[str]:
        """Every regular file, as a relative posix path (see :meth:`tree`)."""
        return set(self.tree().files)

    def read(self, rel: str, *, exact_size: int | None = None,
             max_size: int = MAX_ENVELOPE_BYTES) -> bytes:
        """The bytes of one regular file inside the bundle, opened without following links."""
        check_path(rel)
        parts = rel.split("/")
        fds: list[int] = []
        try:
            fd = os.open(self.root, _DIR_FLAGS)
            fds.append(fd)
            for part in parts[:-1]:
                fd = os.open(part, _DIR_FLAGS, dir_fd=fd)
                fds.append(fd)
            fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=fd)  # a FIFO opens without waiting
            fds.append(fd)
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise MalformedEvidenceError(f"{rel} is not a regular file")
            limit = max_size if exact_size is None else exact_size
            if exact_size is not None and info.st_size != exact_size:
                raise BindingMismatchError(f"size of stored {rel}", f"{exact_size} bytes",
                                           f"{info.st_size} bytes")
            if info.st_size > limit:
                raise MalformedEvidenceError(f"{rel} holds {info.st_size} bytes, over the "
                                             f"{limit} allowed")
            chunks = []
            remaining = limit + 1
            while remaining > 0:
                chunk = os.read(fd, min(remaining, 1 << 24))
                if not chunk:
                    break
                chunks.append(chunk)
                remaining -= len(chunk)
            data = b"".join(chunks)
        except FileNotFoundError as err:
            raise MalformedEvidenceError(f"bundle file {rel} is missing") from err
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise MalformedEvidenceError(f"{rel} is a symbolic link") from err
            raise MalformedEvidenceError(f"cannot read {rel}: {err.strerror or err}") from err
        finally:
            for opened in reversed(fds):
                os.close(opened)
        if len(data) > limit or (exact_size is not None and len(data) != exact_size):
            raise MalformedEvidenceError(f"{rel} changed size while being read")
        return data
