"""``topp-gate manifest new``: a frozen version 3 manifest from two pin files and a matrix.

A matrix template (package data ``harness/data/matrices/<name>.json``, or a user's file of
the same shape) holds the backend, the limits and the cases. Each side is named by its pin
file and sha256 (the path relative to the repository holding the pin, never one that climbs
out of it: :func:`pin_name`; the loader finds it by that path and sha256, wherever the
manifest is written and whatever folder it is run from), with the version, kernel and tree
digests and its kernel family copied from it so the verifier can bind a receipt without
the pin file. The dispatch path of a side, unless given, is the family's guess from the
side's kernel source (``Family.guess_dispatch``; for vllm-triton ``split`` when the module
defines the split pipeline, vLLM 0.30.0 and later, else ``single``), read from the side's
cached tree; and for each traffic case whose path differs from it (top-k rows, batches
above 64), the family's guess for that case (``Family.guess_case_path``) is frozen in the
case's ``paths``. A path given for a side (``--stock-path``) holds for all its cases. A
patch (``--patch DIFF --on SIDE``) is a unified diff of exactly one file of that side's
pinned set (the kernel file, or any other: a FlashInfer CUDA header), applied exactly now;
it is frozen by its sha256, the kernel file's sha256 after it, the file it changed
(``path``), that file's new sha256 (``file_sha256``) and the candidate tree's digest
(``tree_sha256``). The rule set is ``serve/v1`` when some case
is a traffic case, else ``seed/v2``, unless given (``--rules``). A matrix may declare the
draws of its sampling paths (``sampling``: ``draws_per_row``, ``seed``, ``offset``; issue
39), copied into the manifest when some case takes a path that draws on some side and
refused otherwise; the kernel child draws with them and ``verify`` checks that it did.

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

from .. import families
from ..core.digest import sha256_hex, sha256sum_line
from ..core.errors import HarnessError, UsageError
from ..core.f32 import to_float32
from ..core.limits import MAX_BATCH_V3, check_work
from ..core.manifest import (
    FROZEN_SUFFIX,
    SAMPLING_FIELDS,
    SCHEMA_V3,
    case_batch,
    load_manifest,
    manifest_schema,
    parse_manifest,
    traffic_sampling,
)
from ..core.names import SIDES, TRAFFIC
from ..core.regression_support import REGRESSION_SUPPORT_V1, REGRESSION_SUPPORT_V2
from ..core.rulesets import RULE_SETS
from ..core.safeio import read_regular_file
from ..core.support_rules import SUPPORT_V1
from ..core.terminal import printable
from ..pins.pinfile import MAX_PIN_FILE_BYTES, PinFile, load_pin_file
from ..pins.sources import (
    MAX_PATCH_BYTES,
    apply_side_patch,
    build_candidate_tree,
    cache_root,
    candidate,
    resolve_tree,
)

MATRIX_SCHEMA = "topp-gate/matrix/v1"
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
    check_work(sized, max_batch=MAX_BATCH_V3)  # manifest new writes version 3


def matrix_rules() -> dict[str, str]:
    """Each predeclared matrix's rule set: the one it predeclares, else :func:`default_rules`
    of its cases (what ``manifest new --matrix NAME`` freezes without ``--rules``)."""
    rules: dict[str, str] = {}
    for name in matrix_names():
        matrix = load_matrix(name)
        rules[name] = str(matrix.get("rules") or default_rules(matrix["cases"]))
    return rules


def detect_dispatch(kernel: bytes, family: str | None = None) -> str:
    """The side's default path for this kernel source, as its family guesses it (for
    vllm-triton: ``split`` when the module defines the split pipeline, else ``single``)."""
    return families.get(family).guess_dispatch(kernel)


def default_rules(cases: list[dict[str, Any]]) -> str:
    """``serve/v1`` when some case is a traffic case (top-k rows), else ``seed/v2``."""
    return "serve/v1" if any(c.get("kind") == TRAFFIC for c in cases) else "seed/v2"


def case_paths(cases: list[dict[str, Any]], side: str, family: families.Family,
               kernel: bytes, dispatch: str) -> None:
    """Freeze, into each traffic case's ``paths``, the family's path for ``side`` where it
    differs from the side's ``dispatch`` (a path the matrix gives is kept)."""
    for case in cases:
        if case.get("kind") != TRAFFIC or side in case.get("paths", {}):
            continue
        sampling = traffic_sampling(case)
        ks = [k for _, k in sampling]
        ps = [to_float32(float(p)) for p, _ in sampling]
        path = family.guess_case_path(kernel, int(case["batch"]), int(case["vocab"]), ks, ps)
        if path is None:
            path = dispatch
        if path not in family.dispatch_paths:
            raise UsageError(f"case {case['id']}: family {family.id} has no path {path!r}")
        if path != dispatch:
            case.setdefault("paths", {})[side] = path


def matrix_sampling(matrix: dict[str, Any]) -> dict[str, int] | None:
    """The matrix's declared draws (``sampling``), each value an integer in the range the
    manifest schema allows (draws per row from 1, Philox seed and offset uint64), else a
    one-line refusal before anything is resolved; None when it declares none."""
    declared = matrix.get("sampling")
    if declared is None:
        return None
    if not isinstance(declared, dict) or sorted(declared) != sorted(SAMPLING_FIELDS):
        raise UsageError(f"matrix sampling: an object of exactly {', '.join(SAMPLING_FIELDS)}")
    ranges = manifest_schema()["$defs"]["samplingDraws"]["properties"]
    for name in SAMPLING_FIELDS:
        value, low, high = declared[name], ranges[name]["minimum"], ranges[name]["maximum"]
        if type(value) is not int or not low <= value <= high:
            raise UsageError(f"matrix sampling: {name} {value!r} is not an integer in "
                             f"{low}..{high}")
    return {name: declared[name] for name in SAMPLING_FIELDS}


def _used_paths(entry: dict[str, Any], cases: list[dict[str, Any]], name: str) -> set[str]:
    """The paths side ``name`` takes on some case: a case's own, else the side's own."""
    used = {c["paths"][name] for c in cases if name in c.get("paths", {})}
    if any(name not in c.get("paths", {}) for c in cases):
        used.add(entry["dispatch"])
    return used


def _check_sampling_draws(entries: dict[str, dict[str, Any]], cases: list[dict[str, Any]],
                          sampling: dict[str, int] | None) -> None:
    """A declared sampling needs a case that some side takes on a path that draws (the
    family's ``sampling_paths``); else nothing would read it, and it is refused."""
    if sampling is None:
        return
    for name in SIDES:
        family = families.get(entries[name]["family"])
        if _used_paths(entries[name], cases, name) & set(family.sampling_paths):
            return
    found = " and ".join(sorted({str(entries[n]["family"]) for n in SIDES}))
    raise UsageError(f"matrix sampling: no case takes a path that draws tokens on either "
                     f"side ({found}); only a sampling path reads the declared draws")


def _check_samplers_judged_by_support(entries: dict[str, dict[str, Any]],
                                      cases: list[dict[str, Any]], rules: str) -> None:
    """A sampling path returns draws, not a mask: only ``support/v1`` and
    ``regression-support/v1`` or ``/v2`` (a pull request: ``support/v1``'s checks on both
    sides) judge draws (any other rule set would stop every row on a sample's gaps). Refused
    before anything is written."""
    if rules in (SUPPORT_V1, REGRESSION_SUPPORT_V1, REGRESSION_SUPPORT_V2):
        return
    for name in SIDES:
        family = families.get(entries[name]["family"])
        # the side's own path counts only where some case takes it (has no path of its own)
        drawn = sorted(_used_paths(entries[name], cases, name) & set(family.sampling_paths))
        if drawn:
            raise UsageError(f"{name} side: {family.id} path {drawn[0]} draws tokens; a "
                             f"sampler is judged by rule set {SUPPORT_V1}, not {rules} (use a "
                             f"matrix that predeclares {SUPPORT_V1}, or none and --rules "
                             f"{SUPPORT_V1}; or a masking path with --stock-path/--patched-path)")


@dataclass(frozen=True)
class SideSpec:
    pin: Path
    dispatch: str | None = None  # None: detect from the kernel
    patch: Path | None = None


_CHECKOUT = Path(__file__).resolve().parents[2]  # the repository this code runs from, if any


def pin_name(pin: Path, out_dir: Path) -> str:
    """The pin file's path relative to the repository that holds it (issue 27 item 4): the
    nearest folder above it with a ``.git``, else the checkout this code runs from when the
    pin is in it, else the nearest folder above both the pin and the manifest's folder.
    Never a path that climbs (``..``): a manifest written outside the repository (``mutate``'s
    per-mutant manifests, a user's folder) names ``evidence/pins/x.json``, not
    ``../../../../<somewhere>/evidence/pins/x.json``; :meth:`Manifest.pin_path` finds it by
    that path and its sha256."""
    path = Path(os.path.abspath(pin))
    root = next((folder for folder in path.parents if (folder / ".git").exists()), None)
    if root is None and path.is_relative_to(_CHECKOUT) \
            and (_CHECKOUT / "pyproject.toml").is_file():
        root = _CHECKOUT
    if root is None:
        root = Path(os.path.commonpath([path.parent, os.path.abspath(out_dir)]))
    return path.relative_to(root).as_posix()


def _check_pins_found(manifest: Any, out: Path) -> None:
    """Each side's pin is found again from the manifest about to be written (by its name and
    sha256, as every later ``run`` will look), else nothing is written."""
    for name in SIDES:
        entry = manifest.sources["sides"][name]
        found = manifest.pin_path(name)
        try:
            ok = sha256_hex(read_regular_file(found, "pin file", MAX_PIN_FILE_BYTES)) \
                == entry["pin_sha256"]
        except (OSError, HarnessError):
            ok = False
        if not ok:
            raise UsageError(f"{name} pin {printable(entry['pin'])}: a manifest at "
                             f"{printable(out)} would not find it again (it names pins by "
                             "their path in their repository); write the manifest inside "
                             "that repository, or run manifest new from inside it")


def _side_entry(spec: SideSpec, pin: PinFile, out_dir: Path, cache: Path,
                sources: Path | None = None) -> tuple[dict[str, Any], bytes | None]:
    """A side's manifest entry, and its kernel source when it was read (to guess paths)."""
    family = families.get(pin.family)
    if spec.dispatch is not None and spec.dispatch not in family.dispatch_paths:
        raise UsageError(f"{spec.pin}: family {family.id} has no path {spec.dispatch!r} "
                         f"(its paths: {', '.join(family.dispatch_paths)})")
    entry: dict[str, Any] = {
        "pin": pin_name(spec.pin, out_dir),
        "pin_sha256": pin.sha256,
        "version": pin.version,
        "kernel_sha256": pin.data["kernel_sha256"],
        "tree_sha256": pin.data["tree_sha256"],
    }
    kernel: bytes | None = None
    if spec.dispatch is None or spec.patch is not None:  # the family guesses from the source
        side = pin.side("stock")
        try:
            tree = resolve_tree(side, cache=cache, sources=sources)
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
        # one file of the pinned set (the kernel file or another: a FlashInfer CUDA header),
        # applied exactly; the candidate tree is built and verified now, as run will build it
        path, patched = apply_side_patch(side, tree, patch_bytes)
        changed = candidate(side, patched, patch_bytes, path=path)
        build_candidate_tree(changed, tree, patched, cache / "trees", path=path)
        if path == side.kernel_path:
            kernel = patched
        entry["patch"] = {"sha256": sha256_hex(patch_bytes),
                          "kernel_sha256": changed.kernel_sha256,
                          "path": path, "file_sha256": changed.files[path],
                          "tree_sha256": changed.digest}
    entry["dispatch"] = spec.dispatch or family.guess_dispatch(kernel or b"")
    entry["family"] = family.id
    return entry, (kernel if spec.dispatch is None else None)


def _what(entry: dict[str, Any]) -> str:
    return "vLLM" if entry["family"] == families.DEFAULT else str(entry["family"])


def new_manifest(sides: dict[str, SideSpec], matrix_spec: str, out: Path, *,
                 cache: Path | None = None, rules: str | None = None,
                 sources: Path | None = None) -> Path:
    """Write ``out`` and ``out.sha256``; refuse to overwrite either. Returns ``out``.
    ``sources``: an export (``topp-gate sources export``) to read the pinned trees from
    instead of the cache, on a machine with no network."""
    frozen = out.with_name(out.name + FROZEN_SUFFIX)
    for path in (out, frozen):
        if os.path.lexists(path):
            raise UsageError(f"{path} already exists; a frozen manifest is never overwritten")
    if not out.name.endswith(".json") or not _NAME.fullmatch(out.name[: -len(".json")]):
        raise UsageError(f"{out.name}: the manifest file name must be NAME.json with NAME of "
                         "lowercase letters, digits, '.', '_' or '-'")
    matrix = load_matrix(matrix_spec)
    _check_matrix_limits(matrix)  # before any pin is resolved or wheel fetched
    sampling = matrix_sampling(matrix)
    predeclared = matrix.get("rules")
    if rules is not None and predeclared is not None and rules != predeclared:
        raise UsageError(f"--rules {rules}: the matrix predeclares rule set {predeclared}")
    rules = rules or predeclared or default_rules(matrix["cases"])
    if rules not in RULE_SETS:
        raise UsageError(f"--rules {rules}: unknown rule set (known: {', '.join(RULE_SETS)})")
    root = cache_root(cache)
    entries = {}
    cases = json.loads(json.dumps(matrix["cases"]))  # the matrix's cases, paths added
    for name in SIDES:
        spec = sides[name]
        entries[name], kernel = _side_entry(spec, load_pin_file(spec.pin), out.parent, root,
                                              sources)
        if kernel is not None:
            case_paths(cases, name, families.get(entries[name]["family"]), kernel,
                       entries[name]["dispatch"])
    _check_samplers_judged_by_support(entries, cases, rules)
    _check_sampling_draws(entries, cases, sampling)
    described = ", ".join(
        f"{name} {_what(entries[name])} {printable(entries[name]['version'])} "
        f"({entries[name]['dispatch']} path"
        + (", patched" if "patch" in entries[name] else "") + ")" for name in SIDES)
    document = {
        "schema": SCHEMA_V3,
        "name": out.name[: -len(".json")],
        "description": f"{described}. {matrix['description']}",
        "rules": rules,
        "sources": {"sides": entries},
        "backend": matrix["backend"],
        "limits": matrix["limits"],
        **({"sampling": sampling} if sampling is not None else {}),
        "cases": cases,
    }
    raw = (json.dumps(document, indent=2) + "\n").encode("utf-8")
    # what run and verify will accept, its pins found again, before writing
    _check_pins_found(parse_manifest(raw, source=str(out)), out)
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
