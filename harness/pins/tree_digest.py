"""A pinned tree's digest, one home for it: what ``sources pin`` records, what a private copy
is checked against, and what a kernel child hashes after its import. Standard library and
:mod:`harness.core.digest` only, so the kernel child may import it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from ..core.digest import sha256_hex


def tree_digest(files: Mapping[str, str]) -> str:
    """sha256 over ``"<sha256>  <path>\\n"`` lines sorted by path (``sha256sum`` format)."""
    text = "".join(f"{files[path]}  {path}\n" for path in sorted(files))
    return sha256_hex(text.encode("utf-8"))


def copy_digest(tree: Path) -> dict[str, str]:
    """path -> sha256 of every file under ``tree``, read now (the bytes an import read)."""
    files: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(tree):
        dirnames.sort()
        for filename in filenames:
            path = Path(dirpath) / filename
            files[path.relative_to(tree).as_posix()] = sha256_hex(path.read_bytes())
    return files
