"""sha256, written once: of bytes, of a file, what a digest looks like, a ``sha256sum`` line.

Every sha256 topp-gate computes or checks goes through this module: bundle subjects, pins,
frozen manifests, kernel evidence (the kernel child imports it too, so it stays standard
library only), the harness code digest and key ids.

A digest is 64 lowercase hex characters, nothing else (no newline, no upper case).
A ``sha256sum`` line is ``<digest>  <name>`` (text mode) or ``<digest> *<name>`` (binary
mode), optionally newline-terminated; :func:`parse_sha256sum_line` also reads a bare digest
(``<digest>`` alone), whose name is then ``None``.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

SHA256_RE = re.compile(r"[0-9a-f]{64}")
_SHA256SUM_LINE = re.compile(r"([0-9a-f]{64})(?: [ *](\S(?:.*\S)?))?\n?")
_CHUNK = 1 << 20


def sha256_hex(data: bytes) -> str:
    """The sha256 of ``data``, as 64 lowercase hex characters."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    """The sha256 of the file at ``path``, read in chunks (for wheels and large outputs)."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def is_sha256(value: object) -> bool:
    """Whether ``value`` is a string of exactly 64 lowercase hex characters."""
    return isinstance(value, str) and SHA256_RE.fullmatch(value) is not None


def sha256sum_line(data: bytes, filename: str) -> str:
    """The ``sha256sum`` (text mode) line that freezes ``data`` stored as ``filename``."""
    return f"{sha256_hex(data)}  {filename}\n"


def parse_sha256sum_line(text: str) -> tuple[str, str | None] | None:
    """``(digest, name)`` from exactly one ``sha256sum`` line (``name`` is ``None`` for a
    bare digest), or ``None`` when ``text`` is anything else."""
    match = _SHA256SUM_LINE.fullmatch(text)
    if match is None:
        return None
    return match.group(1), match.group(2)
