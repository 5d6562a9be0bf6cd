"""Pin files: one side's vLLM sources as a user's file (``topp-gate sources pin`` writes them).

A pin file names where the sources came from (a wheel by sha256, or a source checkout by
commit and clean flag), the kernel file, every file of the kernel's import closure by
sha256, and the compiled extensions that are replaced by empty placeholder modules. It is
validated by ``schemas/pin.schema.json`` and checked for consistency (the kernel's hash is
the file list's, the tree digest is the file list's) before anything uses it.

Standard library and jsonschema only. A manifest names a pin file by path and sha256;
:func:`load_pin_file` refuses bytes whose sha256 is not the one the manifest froze.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import families
from ..core import schema
from ..core.digest import sha256_hex
from ..core.errors import EvidenceDriftError, SourcesError, UsageError
from ..core.safeio import read_regular_file
from .sources import Side, tree_digest

PIN_SCHEMA = "topp-gate/pin/v1"
PIN_SCHEMA_RESOURCE = "pin.schema.json"
WHEEL = "wheel"
SOURCE_TREE = "source-tree"


@dataclass(frozen=True)
class PinFile:
    """A parsed, schema-valid, self-consistent pin file and the bytes it came from."""

    data: Mapping[str, Any]
    raw: bytes
    sha256: str
    source: str

    @property
    def version(self) -> str:
        return str(self.data["version"])

    @property
    def family(self) -> str:
        """The kernel family (absent in the file: ``vllm-triton``)."""
        return families.of_side(self.data)

    @property
    def origin(self) -> Mapping[str, Any]:
        return dict(self.data["origin"])

    def side(self, name: str) -> Side:
        """The pinned side this file describes, under side name ``name``."""
        origin = self.origin
        return Side(
            name=name,
            version=self.version,
            wheel=str(origin.get("wheel", "")),
            wheel_sha256=str(origin.get("wheel_sha256", "")),
            kernel_path=str(self.data["kernel_path"]),
            kernel_sha256=str(self.data["kernel_sha256"]),
            files=dict(self.data["files"]),
            placeholders=tuple(self.data["placeholders"]),
            origin=origin,
            pin_sha256=self.sha256,
            family=self.family,
        )


def pin_document(*, version: str, kernel_path: str, origin: Mapping[str, Any],
                 files: Mapping[str, str], placeholders: list[str],
                 family: str = families.DEFAULT) -> dict[str, Any]:
    """The JSON document of a pin file (keys in the schema's order). ``family`` is written
    only when it is not the default, so a vllm-triton pin is byte for byte what it was
    before families existed."""
    head: dict[str, Any] = {"schema": PIN_SCHEMA}
    if family != families.DEFAULT:
        head["family"] = family
    return {
        **head,
        "version": version,
        "kernel_path": kernel_path,
        "kernel_sha256": files[kernel_path],
        "tree_sha256": tree_digest(files),
        "origin": dict(origin),
        "placeholders": sorted(placeholders),
        "files": {path: files[path] for path in sorted(files)},
    }


def pin_bytes(document: Mapping[str, Any]) -> bytes:
    """The bytes a pin file is written as (2-space JSON, one trailing newline)."""
    return (json.dumps(document, indent=2) + "\n").encode("utf-8")


def parse_pin_file(raw: bytes, *, source: str = "pin file") -> PinFile:
    """Parse pin bytes: JSON, schema, then the kernel and tree digests against the files."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise SourcesError(f"{source}: not UTF-8 JSON ({err})") from None
    problem = schema.violation(PIN_SCHEMA_RESOURCE, data)
    if problem is not None:
        raise SourcesError(f"{source}: schema violation {problem}")
    files = data["files"]
    try:
        family = families.get(families.of_side(data))
    except UsageError as err:
        raise SourcesError(f"{source}: {err.detail}") from None
    if data["kernel_path"] != family.kernel_path:
        raise SourcesError(f"{source}: kernel_path {data['kernel_path']!r} is not family "
                           f"{family.id}'s {family.kernel_path!r}")
    bad = [name for name in data["placeholders"] if not family.placeholder_ok(name)]
    if bad:
        raise SourcesError(f"{source}: placeholder {bad[0]!r} is not a {family.package} module")
    if files.get(data["kernel_path"]) != data["kernel_sha256"]:
        raise SourcesError(f"{source}: the file list does not hold the kernel at kernel_sha256")
    if tree_digest(files) != data["tree_sha256"]:
        raise SourcesError(f"{source}: tree_sha256 is not the digest of its file list")
    return PinFile(data=data, raw=raw, sha256=sha256_hex(raw), source=source)


MAX_PIN_FILE_BYTES = 16 << 20  # a pin file lists a few hundred hashes


def load_pin_file(path: Path, *, expected_sha256: str | None = None) -> PinFile:
    """Read and parse a pin file; with ``expected_sha256``, refuse any other bytes."""
    raw = read_regular_file(path, "pin file", MAX_PIN_FILE_BYTES, error=SourcesError)
    if expected_sha256 is not None and sha256_hex(raw) != expected_sha256:
        raise EvidenceDriftError(f"pin file {path}", expected_sha256, sha256_hex(raw))
    return parse_pin_file(raw, source=str(path))
