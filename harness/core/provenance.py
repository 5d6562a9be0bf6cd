"""Which code judged a bundle: digests of the trusted core, recomputable from any checkout.

Two algorithms, one rule: sha256 over the sorted lines
``<relative path> NUL <sha256 hex of the file's bytes> LF``, one line per ``.py`` or
``.json`` file (and ``py.typed``), skipping hidden names and ``__pycache__``.

- ``topp-gate/core-tree/v1`` (receipts from now on): the files of ``harness/core/``, the
  trusted core: oracle, gate, judge, schemas, receipt, DSSE, bundle reader and verifier.
  Editing the capture side (kernels, report, CLI) does not change it, so ``verify --strict``
  means "judged by the same trusted code".
- ``topp-gate/harness-tree/v1`` (receipts written before the core existed): every file of
  the ``harness`` package. Kept so that committed bundles stay checkable; VERIFYING.md names
  the commit each of them records.

``topp-gate harness-digest [DIR]`` prints the digest of a checkout (DIR holds ``harness/``)
or, without DIR, of the installed package.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from .digest import sha256_hex
from .errors import UsageError
from .safeio import read_regular_file

CORE_TREE = "topp-gate/core-tree/v1"
HARNESS_TREE = "topp-gate/harness-tree/v1"
ALGORITHMS = (CORE_TREE, HARNESS_TREE)
# folder of each algorithm, relative to the folder that holds the ``harness`` package
_SCOPE = {CORE_TREE: ("harness", "core"), HARNESS_TREE: ("harness",)}
_SUFFIXES = (".py", ".json")
_NAMES = ("py.typed",)
MAX_FILES = 4096
MAX_FILE_BYTES = 16 << 20


def _counted(name: str) -> bool:
    return name.endswith(_SUFFIXES) or name in _NAMES


def _skipped(name: str) -> bool:
    return name.startswith(".") or name == "__pycache__"


def digest_lines(files: Iterable[tuple[str, bytes]]) -> dict[str, Any]:
    """The digest of ``(relative path, bytes)`` pairs, with the number of files."""
    lines = sorted(rel.encode("utf-8") + b"\0" + sha256_hex(data).encode() + b"\n"
                   for rel, data in files)
    return {"sha256": sha256_hex(b"".join(lines)), "files": len(lines)}


def _installed(node: Traversable, prefix: str = "") -> Iterator[tuple[str, bytes]]:
    for child in node.iterdir():
        if _skipped(child.name):
            continue
        rel = f"{prefix}{child.name}"
        if child.is_dir():
            yield from _installed(child, rel + "/")
        elif _counted(child.name):
            yield rel, child.read_bytes()


def installed_digest(algorithm: str = CORE_TREE) -> dict[str, Any]:
    """The digest of this installed package under ``algorithm``."""
    if algorithm not in _SCOPE:
        raise UsageError(f"unknown harness digest algorithm {algorithm!r}; "
                         f"known: {', '.join(ALGORITHMS)}")
    node = resources.files(".".join(_SCOPE[algorithm]))
    return {"algorithm": algorithm, **digest_lines(_installed(node))}


def _checkout_files(top: Path) -> Iterator[tuple[str, bytes]]:
    """Regular files under ``top`` (iterative walk; links and special files refused)."""
    pending = [(top, "")]
    seen = 0
    while pending:
        folder, prefix = pending.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
        except OSError as err:
            raise UsageError(f"cannot list {folder}: {err.strerror or err}") from None
        for entry in entries:
            if _skipped(entry.name):
                continue
            rel = f"{prefix}{entry.name}"
            mode = entry.stat(follow_symlinks=False).st_mode
            if stat.S_ISDIR(mode):
                pending.append((Path(entry.path), rel + "/"))
            elif not _counted(entry.name):
                continue
            elif not stat.S_ISREG(mode):
                raise UsageError(f"{rel!r} in {top} is not a regular file")
            else:
                seen += 1
                if seen > MAX_FILES:
                    raise UsageError(f"{top} holds more than {MAX_FILES} source files")
                yield rel, read_regular_file(Path(entry.path), "source file", MAX_FILE_BYTES,
                                             follow_link=False)


def checkout_digest(root: Path, algorithm: str = CORE_TREE) -> dict[str, Any]:
    """The digest of the ``harness`` package in checkout ``root`` under ``algorithm``."""
    if algorithm not in _SCOPE:
        raise UsageError(f"unknown harness digest algorithm {algorithm!r}; "
                         f"known: {', '.join(ALGORITHMS)}")
    top = Path(root).joinpath(*_SCOPE[algorithm])
    if not top.is_dir() or top.is_symlink():
        raise UsageError(f"{root} holds no {'/'.join(_SCOPE[algorithm])}/ folder "
                         "(give the root of a topp-gate checkout)")
    return {"algorithm": algorithm, **digest_lines(_checkout_files(top))}
