"""Bundle layout, artifact decoders and safe reads (no writer: that signs, on the capture side).

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

The writer (:mod:`harness.capture.bundle_writer`, kernel side: it signs) builds a bundle
in this layout; this module only names the layout, decodes and reads, so the verifier never
holds a private-key type.
"""

from __future__ import annotations

import errno
import lzma
import os
import re
import stat
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import receipt
from .errors import BindingMismatchError, MalformedEvidenceError
from .safeio import read_capped

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
XZ_MEMLIMIT = 64 << 20  # the decoder refuses streams that would need more memory

_SAFE_PATH = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*")
MASK_MAGIC = b"TGM1"
NEG_INF_F32 = struct.pack("<f", float("-inf"))
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


# --- decoders ---------------------------------------------------------------------------------


def mask_decode(coded: bytes, base: bytes, *, fast: bool | None = None) -> bytes:
    """Inverse of the writer's ``mask_encode``; any inconsistency is malformed evidence.

    ``fast`` (default: when numpy is importable) uses numpy; tests prove it identical.
    """
    if len(coded) < 12 or coded[:4] != MASK_MAGIC:
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
            parts.append(NEG_INF_F32 * length)
        else:
            parts.append(others[4 * used : 4 * (used + length)])
            used += length
        covered += length
    if covered != n or 4 * used != len(others):
        raise MalformedEvidenceError("mask-coded output has invalid codes or a wrong value list")
    return b"".join(parts)


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


def rows_bytes(rows: Sequence[dict[str, Any]]) -> bytes:
    """``results/rows.json``: the per-row results as canonical JSON plus a newline."""
    return receipt.canonical(list(rows)) + b"\n"


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
            data = read_capped(fd, limit)
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
