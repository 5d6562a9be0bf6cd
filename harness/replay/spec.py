"""A replay file (``replay.json``, schema ``topp-gate/replay/v1``): one upstream bug, frozen.

Verifier side: standard library, jsonschema and the trusted core only.

It names the bug's thread and fix, the broken and the fixed release by pin file, and per
backend the matrix that calls the kernel the way the bug needs (each file by a path relative
to the replay file and its sha256). A replay is frozen like a manifest: a sibling
``replay.json.sha256`` holds the sha256 of its bytes, and :func:`load_replay` refuses bytes
that are not those, a pin or matrix file whose bytes are not the ones named, a path that
reaches through a link, and anything but regular files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core import schema
from ..core.digest import sha256_hex
from ..core.errors import EvidenceDriftError, MalformedEvidenceError, ManifestError, UsageError
from ..core.manifest import frozen_sha256
from ..core.safeio import read_regular_file
from ..core.strictjson import loads_strict

SCHEMA = "topp-gate/replay/v1"
SCHEMA_RESOURCE = "replay.schema.json"
MAX_REPLAY_BYTES = 64 << 10
MAX_FILE_BYTES = 16 << 20  # a pin file or a matrix


@dataclass(frozen=True)
class Release:
    release: str
    pin: Path  # resolved, checked against its sha256
    sha256: str


@dataclass(frozen=True)
class Replay:
    """A loaded, frozen, checked replay file."""

    path: Path
    sha256: str
    data: dict[str, Any]
    broken: Release
    fixed: Release
    matrices: dict[str, Path]  # backend -> matrix file, checked against its sha256

    @property
    def id(self) -> str:
        return str(self.data["id"])

    def matrix(self, backend: str) -> Path:
        if backend not in self.matrices:
            raise UsageError(f"replay {self.id} has no {backend} matrix (it has: "
                             f"{', '.join(sorted(self.matrices))})")
        return self.matrices[backend]


def _checked_file(base: Path, rel: str, sha256: str, what: str) -> Path:
    """``rel`` against ``base``, every component a real folder or file (no link), its bytes
    the ones named."""
    path = base / rel
    current = base
    for part in Path(rel).parts:
        current = current / part
        if os.path.islink(current):
            raise UsageError(f"{what} {rel}: reaches through a link ({current})")
    data = read_regular_file(path, what, MAX_FILE_BYTES, error=UsageError)
    actual = sha256_hex(data)
    if actual != sha256:
        raise EvidenceDriftError(f"{what} {rel} (not the bytes the replay names)", sha256,
                                 actual)
    return path


def load_replay(path: str | Path) -> Replay:
    """Load ``path`` (exit 2 on any defect; EvidenceDriftError when a file's bytes moved)."""
    path = Path(path)
    raw = read_regular_file(path, "replay file", MAX_REPLAY_BYTES, error=UsageError)
    try:
        frozen = frozen_sha256(path)
    except ManifestError as err:
        raise UsageError(f"replay file {path}: not frozen ({err.detail})") from None
    if sha256_hex(raw) != frozen:
        raise EvidenceDriftError(f"replay file {path.name} (not the frozen bytes)", frozen,
                                 sha256_hex(raw))
    try:
        data = loads_strict(raw, str(path))
    except MalformedEvidenceError as err:
        raise UsageError(f"replay file {path}: {err.detail}") from None
    problem = schema.violation(SCHEMA_RESOURCE, data)
    if problem is not None:
        raise UsageError(f"replay file {path}: schema violation {problem}")
    base = path.parent
    releases = {role: Release(str(data[role]["release"]),
                              _checked_file(base, data[role]["pin"], data[role]["sha256"],
                                            f"{role} pin"), data[role]["sha256"])
                for role in ("broken", "fixed")}
    matrices = {backend: _checked_file(base, entry["path"], entry["sha256"],
                                       f"{backend} matrix")
                for backend, entry in data["matrices"].items()}
    for backend, matrix in matrices.items():
        try:
            declared = loads_strict(matrix.read_bytes(), str(matrix))["backend"]["required"]
        except (MalformedEvidenceError, KeyError, TypeError):
            raise UsageError(f"replay {data['id']}: its {backend} matrix is not a matrix "
                             "file") from None
        if declared != backend:
            raise UsageError(f"replay {data['id']}: its {backend} matrix requires backend "
                             f"{declared!r}")
    return Replay(path, frozen, data, releases["broken"], releases["fixed"], matrices)
