"""``topp-gate manifest new``: a frozen version 2 manifest from two pin files and a matrix.

A matrix template (package data ``harness/data/matrices/<name>.json``, or a user's file of
the same shape) holds the backend, the limits and the cases. Each side is named by its pin
file (path relative to the manifest's folder) and sha256, with the version, kernel and tree
digests copied from it so the verifier can bind a receipt without the pin file. The
dispatch path of a side is ``split`` when its kernel module defines the split pipeline
(``_apply_topp_split``, vLLM 0.30.0 and later) and ``single`` otherwise, read from the
side's cached tree, unless given. A patch (``--patch DIFF --on SIDE``) is applied exactly
to that side's kernel now, and frozen by its sha256 and the patched kernel's sha256.

The manifest is written with its ``.sha256`` sibling (``sha256sum`` format); neither is
ever overwritten. The result is parsed back with the manifest loader before it is kept.
"""

from __future__ import annotations

import importlib.resources
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.digest import sha256_hex, sha256sum_line
from ..core.errors import UsageError
from ..core.manifest import FROZEN_SUFFIX, SCHEMA_V2, SCHEMA_V3, load_manifest
from ..core.names import SIDES, SINGLE, SPLIT
from ..core.safeio import read_regular_file
from ..core.serve_rules import SERVE_V1
from ..core.terminal import printable
from . import families
from .pinfile import PinFile, load_pin_file
from .sources import MAX_PATCH_BYTES, apply_patch, cache_root, resolve_tree

MATRIX_SCHEMA = "topp-gate/matrix/v1"
SPLIT_ENTRY = re.compile(rb"^def _apply_topp_split\(", re.MULTILINE)
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")

MAX_MATRIX_BYTES = 1 << 20


def matrix_names() -> list[str]:
    folder = importlib.resources.files("harness").joinpath("data/matrices")
    return sorted(p.name[: -len(".json")] for p in folder.iterdir() if p.name.endswith(".json"))


def load_matrix(spec: str) -> dict[str, Any]:
    """A predeclared matrix by name, or a user's matrix file."""
    if spec in matrix_names():
        text = importlib.resources.files("harness").joinpath(
            f"data/matrices/{spec}.json").read_text("utf-8")
        source = f"matrix {spec}"
    else:
        path = Path(spec)
        if not path.is_file():
            raise UsageError(f"--matrix {spec}: neither a predeclared matrix "
                             f"({', '.join(matrix_names())}) nor a file")
        raw = read_regular_file(path, "matrix file", MAX_MATRIX_BYTES)
        try:
            text, source = raw.decode("utf-8"), str(path)
        except UnicodeDecodeError:
            raise UsageError(f"matrix file {path} is not UTF-8") from None
    try:
        matrix = json.loads(text)
    except json.JSONDecodeError as err:
        raise UsageError(f"{source}: not JSON ({err})") from None
    if not isinstance(matrix, dict) or matrix.get("schema") != MATRIX_SCHEMA:
        raise UsageError(f"{source}: not a matrix (schema {MATRIX_SCHEMA})")
    missing = {"description", "backend", "limits", "cases"} - set(matrix)
    if missing:
        raise UsageError(f"{source}: missing {', '.join(sorted(missing))}")
    return matrix


def detect_dispatch(kernel: bytes) -> str:
    """``split`` when the kernel module defines the split pipeline, else ``single``."""
    return SPLIT if SPLIT_ENTRY.search(kernel) else SINGLE


@dataclass(frozen=True)
class SideSpec:
    pin: Path
    dispatch: str | None = None  # None: detect from the kernel
    patch: Path | None = None


def _side_entry(spec: SideSpec, pin: PinFile, out_dir: Path, cache: Path) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "pin": Path(os.path.relpath(spec.pin.resolve(), out_dir.resolve())).as_posix(),
        "pin_sha256": pin.sha256,
        "version": pin.version,
        "kernel_sha256": pin.data["kernel_sha256"],
        "tree_sha256": pin.data["tree_sha256"],
    }
    kernel: bytes | None = None
    if (spec.dispatch is None and pin.family == families.DEFAULT) or spec.patch is not None:
        side = pin.side("stock")
        try:
            tree = resolve_tree(side, cache=cache)
        except Exception as err:  # noqa: BLE001 - one line, whatever the cache says
            raise UsageError(f"{spec.pin}: its tree is not in the cache ({err}); run "
                             "'topp-gate sources pin' on this machine, or give the path "
                             "with --stock-path/--patched-path") from None
        kernel = (tree / side.kernel_path).read_bytes()
    if spec.patch is not None and kernel is not None:
        try:
            patch_bytes = read_regular_file(spec.patch, "patch", MAX_PATCH_BYTES)
        except OSError as err:
            raise UsageError(f"cannot read patch {spec.patch}: {err.strerror or err}") from None
        kernel = apply_patch(kernel, patch_bytes, str(pin.data["kernel_path"]))
        entry["patch"] = {"sha256": sha256_hex(patch_bytes), "kernel_sha256": sha256_hex(kernel)}
    family = families.get(pin.family)
    if pin.family == families.DEFAULT:
        entry["dispatch"] = spec.dispatch or detect_dispatch(kernel or b"")
    else:  # another family: its own path names (a version 3 manifest)
        entry["dispatch"] = spec.dispatch or family.default_dispatch
    if entry["dispatch"] not in family.dispatch_paths:
        raise UsageError(f"{spec.pin}: family {family.id} has no dispatch path "
                         f"{entry['dispatch']!r} (paths: {', '.join(family.dispatch_paths)})")
    entry["family"] = pin.family
    return entry


def _what(entry: dict[str, Any]) -> str:
    return "vLLM" if entry["family"] == families.DEFAULT else str(entry["family"])


def new_manifest(sides: dict[str, SideSpec], matrix_spec: str, out: Path, *,
                 cache: Path | None = None) -> Path:
    """Write ``out`` and ``out.sha256``; refuse to overwrite either. Returns ``out``."""
    frozen = out.with_name(out.name + FROZEN_SUFFIX)
    for path in (out, frozen):
        if os.path.lexists(path):
            raise UsageError(f"{path} already exists; a frozen manifest is never overwritten")
    if not out.name.endswith(".json") or not _NAME.fullmatch(out.name[: -len(".json")]):
        raise UsageError(f"{out.name}: the manifest file name must be NAME.json with NAME of "
                         "lowercase letters, digits, '.', '_' or '-'")
    matrix = load_matrix(matrix_spec)
    root = cache_root(cache)
    entries = {}
    for name in SIDES:
        spec = sides[name]
        entries[name] = _side_entry(spec, load_pin_file(spec.pin), out.parent, root)
    described = ", ".join(
        f"{name} {_what(entries[name])} {printable(entries[name]['version'])} "
        f"({entries[name]['dispatch']} path"
        + (", patched" if "patch" in entries[name] else "") + ")" for name in SIDES)
    # version 3 when a side is of another family than vLLM's Triton kernel or the matrix
    # names its rule set; version 2 (byte for byte as before) otherwise
    v3 = "rules" in matrix or any(e["family"] != families.DEFAULT for e in entries.values())
    if not v3:
        for entry in entries.values():
            del entry["family"]
    document = {
        "schema": SCHEMA_V3 if v3 else SCHEMA_V2,
        "name": out.name[: -len(".json")],
        "description": f"{described}. {matrix['description']}",
        **({"rules": matrix.get("rules", SERVE_V1)} if v3 else {}),
        "sources": {"sides": entries},
        "backend": matrix["backend"],
        "limits": matrix["limits"],
        "cases": matrix["cases"],
    }
    raw = (json.dumps(document, indent=2) + "\n").encode("utf-8")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_bytes(raw)
    try:
        os.replace(tmp, out)
        frozen.write_text(sha256sum_line(raw, out.name), encoding="utf-8")
        load_manifest(out)  # schema, limits and the frozen hash: what a run will check
    except BaseException:
        out.unlink(missing_ok=True)
        frozen.unlink(missing_ok=True)
        raise
    return out
