"""``topp-gate manifest new``: a frozen version 2 manifest from two pin files and a matrix
(version 3 when the matrix predeclares its rule set: ``"rules": ID``).

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
from ..core.limits import check_work
from ..core.manifest import (
    FROZEN_SUFFIX,
    SCHEMA_V2,
    SCHEMA_V3,
    case_batch,
    load_manifest,
    parse_manifest,
)
from ..core.names import SIDES, SINGLE, SPLIT
from ..core.safeio import read_regular_file
from ..core.terminal import printable
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


def _check_matrix_limits(matrix: dict[str, Any]) -> None:
    """Refuse (LimitError) a matrix whose cases a verifier would refuse
    (:mod:`harness.core.limits`). Cases too malformed to size are left to the schema check
    of the finished manifest."""
    try:
        sized = [(str(case["id"]), case_batch(case), int(case["vocab"]))
                 for case in matrix["cases"]]
    except (KeyError, TypeError, ValueError):
        return
    check_work(sized)


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
    if spec.dispatch is None or spec.patch is not None:
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
    entry["dispatch"] = spec.dispatch or detect_dispatch(kernel or b"")
    return entry


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
    _check_matrix_limits(matrix)  # before any pin is resolved or wheel fetched
    root = cache_root(cache)
    entries = {}
    for name in SIDES:
        spec = sides[name]
        pin = load_pin_file(spec.pin)
        entries[name] = _side_entry(spec, pin, out.parent, root)
        if "rules" in matrix:  # version 3: each side names its kernel family
            entries[name]["family"] = pin.family
    described = ", ".join(
        f"{name} vLLM {printable(entries[name]['version'])} ({entries[name]['dispatch']} path"
        + (", patched" if "patch" in entries[name] else "") + ")" for name in SIDES)
    document = {
        "schema": SCHEMA_V3 if "rules" in matrix else SCHEMA_V2,
        "name": out.name[: -len(".json")],
        "description": f"{described}. {matrix['description']}",
        "sources": {"sides": entries},
        "backend": matrix["backend"],
        "limits": matrix["limits"],
        "cases": matrix["cases"],
    }
    if "rules" in matrix:  # a matrix that predeclares its rule set makes a version 3 manifest
        document["rules"] = matrix["rules"]
    raw = (json.dumps(document, indent=2) + "\n").encode("utf-8")
    parse_manifest(raw, source=str(out))  # what run and verify will accept, before writing
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
