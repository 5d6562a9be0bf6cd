"""The frozen manifest: load, schema-check, frozen-hash check, limits, expected case layout.

Verifier side: standard library and jsonschema only (never torch or numpy).

A manifest ``X.json`` is *frozen* by a committed sibling ``X.json.sha256`` in ``sha256sum``
format (``<64 hex>  X.json``). :func:`load_manifest` hashes the very bytes it parses and
refuses them unless that hash is the frozen one. Schema and semantic checks, and every
resource limit, are enforced here, before anything runs.

Exact decimal values (p, forced values, constructed logits) are JSON strings, converted by
the harness rule: ``float(text)`` (binary64), then round to float32 (``harness.core.f32``).

:func:`expected_layout` computes, without torch, the case list a ``cases.json`` built from
this manifest must hold: id, kind, batch, vocab and per row ``judge``, ``forced_id``,
``label``. The verifier compares a bundle's ``cases.json`` against it.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from . import call_pattern, schema
from .call_pattern import CallPattern
from .digest import parse_sha256sum_line, sha256_hex
from .errors import (
    EvidenceDriftError,
    HarnessError,
    LimitError,
    ManifestError,
    ManifestNotFrozenError,
    UsageError,
    wrap_as,
)
from .f32 import runtime_p, to_float32
from .limits import MAX_BATCH, MAX_BATCH_V3, check_case, check_work
from .names import (
    BOUNDARY,
    FORCED,
    ORDINARY,
    PIN_FILE_FIELDS,
    SIDES,
    SPLIT,
    TRAFFIC,
    WHEEL_PIN_FIELDS,
)
from .rulesets import LEGACY_RULES, RULE_SETS
from .safeio import read_regular_file
from .strictjson import no_duplicate_keys

SCHEMA = "topp-gate/manifest/v1"
SCHEMA_V2 = "topp-gate/manifest/v2"  # sides by pin file, a patch on either side, dispatch paths
SCHEMA_V3 = "topp-gate/manifest/v3"  # version 2 plus the rule set by id and each side's family
PINNED_INLINE = "inline"  # version 1: each side's wheel pinned inline (trees: the packaged pins)
PINNED_BY_FILE = "pin-file"  # versions 2 and 3: each side named by a pin file
DEFAULT_FAMILY = "vllm-triton"  # the family of every side that names none (versions 1, 2)
SCHEMA_RESOURCE = "manifest.schema.json"
FROZEN_SUFFIX = ".sha256"
MAX_MANIFEST_BYTES = 1 << 20  # the H200 matrix is 11 kB; a manifest is never near this
MAX_FROZEN_HASH_BYTES = 4096
_FLOAT32_MAX_KEY = 0x7F7FFFFF  # ordered-integer key of the largest finite float32
# a version 3 manifest's declared draws of its sampling paths (``sampling``; issue 39)
SAMPLING_FIELDS = ("draws_per_row", "seed", "offset")


# --- layout (what cases.json must hold) ----------------------------------------------------


@dataclass(frozen=True)
class RowLayout:
    judge: str  # "forced" or "ordinary" (boundary rows are judged by the ordinary rules)
    forced_id: int | None
    label: str

    def to_json(self) -> dict[str, Any]:
        return {"judge": self.judge, "forced_id": self.forced_id, "label": self.label}


@dataclass(frozen=True)
class CaseLayout:
    id: str
    kind: str  # "forced", "ordinary", "boundary" or "traffic" (version 3)
    batch: int
    vocab: int
    rows: tuple[RowLayout, ...]
    has_k: bool = False  # a captured per-row top-k file (version 3 cases)
    call: CallPattern = call_pattern.DEFAULT  # how the kernel is called (version 3 cases)

    @property
    def logits_path(self) -> str:
        return f"inputs/{self.id}.logits.f32"

    @property
    def p_path(self) -> str:
        return f"inputs/{self.id}.p.f32"

    @property
    def k_path(self) -> str | None:
        """``inputs/<id>.k.i32``: one little-endian int32 top-k per row (the vocabulary for
        a row without top-k, as vLLM's sampler writes it); None for cases before version 3."""
        return f"inputs/{self.id}.k.i32" if self.has_k else None

    @property
    def logits_bytes(self) -> int:
        return 4 * self.batch * self.vocab

    @property
    def p_bytes(self) -> int:
        return 4 * self.batch

    def input_sizes(self) -> dict[str, int]:
        """Every captured input file of the case and its raw size."""
        sizes = {self.logits_path: self.logits_bytes, self.p_path: self.p_bytes}
        if self.k_path is not None:
            sizes[self.k_path] = 4 * self.batch
        sizes.update(call_pattern.input_sizes(self.id, self.batch, self.vocab, self.call))
        return sizes

    @property
    def padding_path(self) -> str | None:
        """The captured padding of a strided logits buffer (:mod:`.call_pattern`)."""
        return call_pattern.padding_path(self.id, self.call)

    @property
    def indices_path(self) -> str | None:
        """The captured index array of the call, if it has one (:mod:`.call_pattern`)."""
        return call_pattern.indices_path(self.id, self.call)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "batch": self.batch,
            "vocab": self.vocab,
            "logits": self.logits_path,
            "p": self.p_path,
            **({"k": self.k_path} if self.k_path is not None else {}),
            **({"call": call} if (call := call_pattern.to_index_json(self.id, self.call))
               is not None else {}),
            "rows": [r.to_json() for r in self.rows],
        }


# --- the manifest ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ManifestSide:
    """One side in the one model every manifest version is parsed into (:func:`_side`)."""

    family: str  # the kernel family (version 3 names it; before: vLLM's Triton)
    dispatch: str  # the path the side must take (version 1: always ``split``)
    pin: str | None  # the pin file, relative to the manifest (version 1: None, pinned inline)
    patch: Mapping[str, str] | None  # a frozen patch (``sha256``, ``kernel_sha256``), if any
    receipt_pins: Mapping[str, str]  # what a receipt's ``hashes.sources[side]`` must record


@dataclass(frozen=True)
class Manifest:
    """A parsed, schema-valid, limit-checked manifest and the exact bytes it came from.

    Every schema version is converted into one model when the manifest is built (the
    fields after ``source``); ``raw`` and ``sha256`` stay the frozen bytes receipts bind.
    Where version 1 records something else in a receipt, the model says so as data
    (``pinned_by``, ``receipt_paths``, ``patch_sha256``, each side's ``receipt_pins``).
    """

    data: Mapping[str, Any]
    raw: bytes
    sha256: str
    source: str = "manifest"
    sides: Mapping[str, ManifestSide] = field(init=False, repr=False, compare=False)
    pinned_by: str = field(init=False, repr=False, compare=False)  # PINNED_INLINE or _BY_FILE
    receipt_paths: bool = field(init=False, repr=False, compare=False)
    patch_sha256: str | None = field(init=False, repr=False, compare=False)
    case_paths: Mapping[str, Mapping[str, str]] = field(init=False, repr=False,
                                                         compare=False)

    def __post_init__(self) -> None:
        inline = self.data["schema"] == SCHEMA
        sources = self.data["sources"]
        model: dict[str, Any] = {
            "sides": {side: _side(sources["sides"][side], inline=inline) for side in SIDES},
            "pinned_by": PINNED_INLINE if inline else PINNED_BY_FILE,
            # a version 1 receipt records no per-case ``paths``: its ``split_path`` flag alone
            "receipt_paths": not inline,
            # version 1 freezes the change under test for the whole manifest
            "patch_sha256": sources.get("patch_sha256"),
            # version 3 traffic cases may name their own path per side
            "case_paths": {str(case["id"]): {str(side): str(path) for side, path
                                              in case.get("paths", {}).items()}
                           for case in self.data["cases"]},
        }
        for name, value in model.items():
            object.__setattr__(self, name, value)

    @property
    def name(self) -> str:
        return str(self.data["name"])

    @property
    def backend(self) -> Mapping[str, Any]:
        return dict(self.data["backend"])

    @property
    def limits(self) -> Mapping[str, int]:
        return dict(self.data["limits"])

    @property
    def sources(self) -> Mapping[str, Any]:
        return dict(self.data["sources"])

    @property
    def cases(self) -> list[Mapping[str, Any]]:
        return list(self.data["cases"])

    @property
    def rules(self) -> str:
        """The rule set that judges this manifest's rows: version 3 names it; versions 1 and
        2 predate rule-set ids and are judged by the seed's rules."""
        return str(self.data.get("rules", LEGACY_RULES))

    @property
    def sampling(self) -> dict[str, int] | None:
        """The declared draws of every sampling call (``draws_per_row``, ``seed``,
        ``offset``; version 3 may declare them, from ``pr-flashinfer-v3`` on), or None: a
        sampling family then draws with its own constants, which nothing checks."""
        declared = self.data.get("sampling")
        if declared is None:
            return None
        return {name: int(declared[name]) for name in SAMPLING_FIELDS}

    def family(self, side: str) -> str:
        """The kernel family of ``side`` (version 3 names it; before: vLLM's Triton)."""
        return self.sides[side].family

    def dispatch(self, side: str, case_id: str | None = None) -> str:
        """The path ``side`` must take: the side's ``dispatch`` (``split`` in version 1); in
        version 3 a traffic case's ``paths`` may name its own path for a side (``case_id``:
        that case; None or a case without one: the side's)."""
        if case_id is not None and side in self.case_paths.get(case_id, {}):
            return self.case_paths[case_id][side]
        return self.sides[side].dispatch

    def case_dispatch(self, side: str) -> dict[str, str]:
        """Case id -> the path ``side`` must take for it (:meth:`dispatch`), in case order."""
        return {str(case["id"]): self.dispatch(side, str(case["id"])) for case in self.cases}

    def side_patch(self, side: str) -> Mapping[str, str] | None:
        """A side's frozen patch (``sha256``, ``kernel_sha256``), if it has one (version 1
        freezes none per side: ``patch_sha256`` is the whole manifest's)."""
        return self.sides[side].patch

    def pin_path(self, side: str) -> Path:
        """A side's pin file (versions 2 and 3): the first of :func:`pin_candidates` whose
        bytes are the ``pin_sha256`` the manifest froze; else the path as written, against
        the manifest's folder (what every manifest before repository-relative pins meant),
        for the pin-file loader to refuse."""
        pin = self.sides[side].pin
        if pin is None:
            raise ManifestError(f"{self.source}: the {side} side is pinned inline, by no file")
        folder = Path(self.source).parent
        want = str(self.sources["sides"][side]["pin_sha256"])
        for candidate in pin_candidates(folder, pin):
            if _holds(candidate, want):
                return candidate
        return folder / pin


# A pin file lists a few hundred hashes (the capture side's MAX_PIN_FILE_BYTES, once here
# too: the core imports nothing from the capture side); a larger file is no candidate.
_MAX_PIN_BYTES = 16 << 20
_CHECKOUT = Path(__file__).resolve().parents[2]  # the repository this code runs from, if any


def pin_candidates(folder: Path, pin: str) -> list[Path]:
    """Where a manifest's pin file may be, in order: the path against the manifest's folder
    (the meaning of every committed manifest), then the path (a repository-relative name
    such as ``evidence/pins/x.json``, as ``manifest new`` writes) against each folder above
    the manifest's, above the working folder and at the root of the checkout this code runs
    from. A path written climbing out (``../../x/evidence/pins/y.json``, older ``manifest
    new`` runs) is also tried without its climb and by each shorter tail. Candidates are
    only places to look: :meth:`Manifest.pin_path` takes the first whose bytes have the
    frozen sha256, so a file found elsewhere is never another pin."""
    parts = [part for part in PurePosixPath(pin).parts if part != "."]
    first = folder / pin
    found = [first]
    climbed = 0
    while climbed < len(parts) and parts[climbed] == "..":
        climbed += 1
    tail = parts[climbed:]
    if not tail or ".." in tail:
        return found
    tails = [tail[i:] for i in range(len(tail) - 1)] if climbed else [tail]
    anchors: list[Path] = []
    try:
        here = Path.cwd()
    except OSError:  # a working folder removed under us: no candidates from it
        here = None
    for start in (folder, here, _CHECKOUT):
        if start is None:
            continue
        start = Path(os.path.abspath(start))
        for anchor in (start, *start.parents):
            if anchor not in anchors:
                anchors.append(anchor)
    for names in tails:
        for anchor in anchors:
            candidate = anchor.joinpath(*names)
            if candidate not in found:
                found.append(candidate)
    return found


def _holds(path: Path, sha256: str) -> bool:
    """Whether ``path`` is a regular file whose bytes hash to ``sha256``."""
    try:
        if not os.path.isfile(path):
            return False
        return sha256_hex(read_regular_file(path, "pin file", _MAX_PIN_BYTES)) == sha256
    except (OSError, HarnessError):
        return False


def _side(entry: Mapping[str, Any], *, inline: bool) -> ManifestSide:
    """A manifest side in the one model. Version 1 (``inline``) pins a wheel inline, takes
    the split path in vLLM's Triton family, and its receipt records the wheel pins; versions
    2 and 3 name a pin file, and the receipt records the pin file's sha256, version and
    kernel (after the frozen patch, if any: then the patch file's sha256 too), and the tree
    digest of an unpatched side. A patch frozen with the file it changed (``path``, its
    ``file_sha256``; issue 39) binds the receipt's ``patch_path`` and
    ``patched_file_sha256`` too, and one frozen with the candidate tree's digest
    (``tree_sha256``) binds the receipt's ``tree_sha256`` (and so a run-time library's
    sources, :func:`.verify_bindings.check_library_binding`)."""
    if inline:
        return ManifestSide(family=DEFAULT_FAMILY, dispatch=SPLIT, pin=None, patch=None,
                            receipt_pins={key: str(entry[key]) for key in WHEEL_PIN_FIELDS})
    recorded = {key: str(entry[key]) for key in PIN_FILE_FIELDS}
    patch = entry.get("patch")
    if patch is None:
        recorded["tree_sha256"] = str(entry["tree_sha256"])
    else:
        recorded["kernel_sha256"] = str(patch["kernel_sha256"])
        recorded["patch_file_sha256"] = str(patch["sha256"])
        if "path" in patch:  # the file the diff changed (issue 39: any file of the pinned set)
            recorded["patch_path"] = str(patch["path"])
            recorded["patched_file_sha256"] = str(patch["file_sha256"])
        if "tree_sha256" in patch:
            recorded["tree_sha256"] = str(patch["tree_sha256"])
    return ManifestSide(family=str(entry.get("family", DEFAULT_FAMILY)),
                        dispatch=str(entry["dispatch"]), pin=str(entry["pin"]),
                        patch=dict(patch) if patch is not None else None,
                        receipt_pins=recorded)


def manifest_schema() -> dict[str, Any]:
    """The manifest JSON Schema (2020-12), read from package data."""
    return schema.load(SCHEMA_RESOURCE)


def parse_manifest(raw: bytes, *, source: str = "manifest") -> Manifest:
    """Parse manifest bytes: JSON, schema, semantic checks and limits. No frozen check."""
    try:
        if len(raw) > MAX_MANIFEST_BYTES:
            raise ManifestError(f"{source}: {len(raw)} bytes, over the {MAX_MANIFEST_BYTES} "
                                "a manifest may hold")
        data = json.loads(raw.decode("utf-8"), parse_float=_refuse_float,
                          parse_constant=_refuse_constant,
                          object_pairs_hook=no_duplicate_keys(source, ManifestError))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise ManifestError(f"{source}: not UTF-8 JSON ({err})") from None
    problem = schema.violation(SCHEMA_RESOURCE, data)
    if problem is not None:
        raise ManifestError(f"{source}: schema violation {problem}")
    manifest = Manifest(data=data, raw=raw, sha256=sha256_hex(raw), source=source)
    check_manifest(manifest)
    return manifest


def frozen_sha256(path: Path) -> str:
    """The frozen sha256 of manifest ``path``, read from its ``.sha256`` sibling."""
    sibling = path.with_name(path.name + FROZEN_SUFFIX)
    if not os.path.lexists(sibling):
        raise ManifestNotFrozenError(f"{path}: no frozen hash file {sibling.name}")
    try:
        text = read_regular_file(sibling, "frozen hash file", MAX_FROZEN_HASH_BYTES,
                                 error=ManifestNotFrozenError).decode("utf-8")
    except UnicodeDecodeError as err:
        raise ManifestNotFrozenError(f"{sibling}: unreadable ({err})") from None
    line = parse_sha256sum_line(text)
    if line is None or line[1] is None:
        raise ManifestNotFrozenError(f"{sibling}: not one sha256sum line for {path.name}")
    digest, name = line
    if name != path.name:
        raise ManifestNotFrozenError(f"{sibling}: freezes {name!r}, not {path.name!r}")
    return digest


def read_manifest_bytes(path: Path) -> bytes:
    """A manifest file's bytes: a regular file only (never a FIFO), at most
    :data:`MAX_MANIFEST_BYTES`; every failure is a ManifestError (exit 2)."""
    try:
        return read_regular_file(path, "manifest", MAX_MANIFEST_BYTES, error=ManifestError)
    except ManifestError as err:
        raise ManifestError(f"{path}: unreadable ({err.detail})") from None


def load_manifest(path: str | Path, *, require_frozen: bool = True) -> Manifest:
    """Load a manifest for a run. Refuses one whose bytes are not the frozen ones."""
    path = Path(path)
    raw = read_manifest_bytes(path)
    if require_frozen:
        expected = frozen_sha256(path)
        actual = sha256_hex(raw)
        if actual != expected:
            raise EvidenceDriftError(f"manifest {path.name} (not the frozen bytes)",
                                     expected, actual)
    return parse_manifest(raw, source=str(path))


def read_frozen_hash(path: Path) -> str:
    """The frozen sha256 an auditor supplies: a ``.sha256`` file, or a committed manifest
    whose ``.sha256`` sibling freezes it (the manifest's bytes must match that hash).

    Everything wrong here is wrong with the argument, not with the bundle: a UsageError
    (exit 2), whether the file is missing, not a regular file, malformed, or a committed
    manifest that no longer matches its own ``.sha256``.
    """
    with wrap_as(UsageError, "--frozen-manifest: ", keep=UsageError):
        if path.name.endswith(".sha256"):
            text = read_regular_file(path, "--frozen-manifest", MAX_FROZEN_HASH_BYTES)
            line = parse_sha256sum_line(text.decode("utf-8", "replace"))
            if line is None:
                raise UsageError(f"--frozen-manifest {path} is not a sha256sum line")
            return line[0]
        actual = sha256_hex(read_manifest_bytes(path))
        frozen = frozen_sha256(path)
    if frozen != actual:
        raise UsageError(f"--frozen-manifest {path} does not match its own "
                         f"{path.name}.sha256 (frozen {frozen}, file {actual})")
    return frozen


# --- exact values ---------------------------------------------------------------------------


def decimal_float32(text: str, *, what: str) -> float:
    """A decimal string to a finite float32 value (harness rule: binary64, then float32)."""
    value = to_float32(float(text))
    if not math.isfinite(value):
        raise ManifestError(f"{what}={text} is not finite after float32 conversion")
    return value


def _key(value: float) -> int:
    """Order-preserving integer key of a finite float32 (both zeros map to 0)."""
    bits = int(struct.unpack("<I", struct.pack("<f", value))[0])
    return -(bits & 0x7FFFFFFF) if bits & 0x80000000 else bits


def _from_key(key: int) -> float:
    bits = key if key >= 0 else 0x80000000 | -key
    (value,) = struct.unpack("<f", struct.pack("<I", bits))
    return float(value)


def float32_step(value: float, ulps: int) -> float:
    """Move a finite float32 ``ulps`` representable float32 steps (negative: downward).

    Zero counts once (``-0.0`` and ``0.0`` are one step). Refuses to leave the finite range.
    """
    if to_float32(value) != value or not math.isfinite(value):
        raise ManifestError(f"{value!r} is not a finite float32 value")
    key = _key(value) + ulps
    if abs(key) > _FLOAT32_MAX_KEY:
        raise ManifestError(f"{value!r} moved {ulps} float32 steps is not finite")
    return _from_key(key)


# --- semantic checks and limits -------------------------------------------------------------


def case_batch(case: Mapping[str, Any]) -> int:
    """Number of rows of a manifest case."""
    kind = case["kind"]
    if kind in (ORDINARY, TRAFFIC):
        return int(case["batch"])
    if kind == FORCED:
        grid = case["grid"]
        return len(grid["value"]) * len(grid["p"]) * len(grid["forced_id"])
    return len(case["rows"])


def check_limits(manifest: Manifest) -> None:
    """Refuse (LimitError) any case over the manifest's limits, and a manifest over the
    ceilings every tool shares (:mod:`harness.core.limits`: per case, rows and total work),
    so ``manifest new``, ``run`` and ``verify`` refuse the same manifests."""
    limits = manifest.limits
    max_batch = min(int(limits["max_batch"]),
                    MAX_BATCH_V3 if manifest.data["schema"] == SCHEMA_V3 else MAX_BATCH)
    for case in manifest.cases:
        batch, vocab = case_batch(case), int(case["vocab"])
        if batch > max_batch:
            raise LimitError(f"case {case['id']}: batch {batch} is over the limit {max_batch}")
        if vocab > int(limits["max_vocab"]):
            raise LimitError(
                f"case {case['id']}: vocab {vocab} is over the limit {limits['max_vocab']}"
            )
        stride = (case.get("call") or {}).get("logits_row_stride")
        if stride is not None:  # the whole buffer a strided view lives in
            if int(stride) > int(limits["max_vocab"]):
                raise LimitError(f"case {case['id']}: logits row stride {stride} is over the "
                                 f"limit {limits['max_vocab']}")
            check_case(f"{case['id']} (its logits buffer)", batch, int(stride),
                       max_batch=max_batch)
    check_work(((str(case["id"]), case_batch(case), int(case["vocab"]))
                for case in manifest.cases),
               max_batch=MAX_BATCH_V3 if manifest.data["schema"] == SCHEMA_V3 else MAX_BATCH)


def check_manifest(manifest: Manifest) -> None:
    """Everything the schema cannot say: limits, unique ids, ids in range, finite values."""
    check_limits(manifest)
    if manifest.rules not in RULE_SETS:
        raise ManifestError(f"{manifest.source}: unknown rule set {manifest.rules!r} (known: "
                            f"{', '.join(RULE_SETS)})")
    traffic = [c["id"] for c in manifest.cases if c["kind"] == TRAFFIC]
    if traffic and not RULE_SETS[manifest.rules].top_k:
        raise ManifestError(f"case {traffic[0]}: traffic rows carry top-k and p = 1; rule set "
                            f"{manifest.rules} judges top-p rows only (use serve/v1)")
    patched = [side for side in SIDES if manifest.sides[side].patch is not None]
    if len(patched) > 1:
        raise ManifestError("a manifest may freeze a patch on one side only "
                            f"(found on {' and '.join(sorted(patched))})")
    seen: set[str] = set()
    for case in manifest.cases:
        cid = case["id"]
        if cid in seen:
            raise ManifestError(f"case id {cid} appears twice")
        seen.add(cid)
        if "call" in case and manifest.data["schema"] != SCHEMA_V3:
            raise ManifestError(f"case {cid}: a call pattern needs a version 3 manifest")
        call_pattern.from_manifest(case)
        if case["kind"] == FORCED:
            _check_forced(case)
        elif case["kind"] == TRAFFIC:
            _check_traffic(case)
        elif case["kind"] == BOUNDARY:
            for index, row in enumerate(case["rows"]):
                runtime_p(row["p"])
                _check_construction(case, index, row["construction"])


def _check_traffic(case: Mapping[str, Any]) -> None:
    """p in (0, 1] after float32 conversion (1.0: no top-p), 1 <= k <= vocab, and a forced
    id that the row spec forces alone (so the verifier knows the forced token)."""
    cid, vocab = case["id"], int(case["vocab"])
    for p, k in traffic_sampling(case):
        value = to_float32(float(p))
        if not (math.isfinite(value) and 0.0 < value <= 1.0):
            raise ManifestError(f"case {cid}: p={p} is not in (0, 1] after float32 conversion")
        if k > vocab:
            raise ManifestError(f"case {cid}: k={k} is above the vocabulary {vocab}")
    spec = case.get("rows", {})
    if not isinstance(spec, Mapping):  # pragma: no cover - the schema says object
        raise ManifestError(f"case {cid}: rows is not an object")
    if "forced_id" in case:
        forced = int(case["forced_id"])
        ids = spec.get("force", {}).get("ids") if isinstance(spec.get("force"), Mapping) else None
        if forced >= vocab or ids != [forced]:
            raise ManifestError(f"case {cid}: forced_id {forced} must be inside the vocabulary "
                                "and the only id rows.force.ids names")


def _check_forced(case: Mapping[str, Any]) -> None:
    grid, vocab, cid = case["grid"], int(case["vocab"]), case["id"]
    for text in grid["value"]:
        decimal_float32(text, what=f"case {cid} forced value")
    for text in grid["p"]:
        runtime_p(text)
    for token in grid["forced_id"]:
        if token >= vocab:
            raise ManifestError(f"case {cid}: forced id {token} is outside vocab {vocab}")


def _check_construction(case: Mapping[str, Any], index: int, spec: Mapping[str, Any]) -> None:
    vocab = int(case["vocab"])
    where = f"case {case['id']} row {index}"
    kind = spec["type"]
    if kind == "randn":
        if "offset" in spec:
            decimal_float32(spec["offset"], what=f"{where} offset")
        ids = [item["id"] for item in spec.get("set", [])]
        if len(set(ids)) != len(ids):
            raise ManifestError(f"{where}: a token id is set twice")
        for item in spec.get("set", []):
            if item["id"] >= vocab:
                raise ManifestError(f"{where}: token id {item['id']} is outside vocab {vocab}")
            base = decimal_float32(item["value"], what=f"{where} value")
            float32_step(base, int(item.get("ulps", 0)))
    elif kind == "ties":
        total = sum(int(group["count"]) for group in spec["groups"])
        if total > vocab:
            raise ManifestError(f"{where}: tie groups hold {total} ids, vocab is {vocab}")
        if total < vocab and "rest" not in spec:
            raise ManifestError(f"{where}: tie groups leave ids but no 'rest' logit is given")
        for group in spec["groups"]:
            decimal_float32(group["logit"], what=f"{where} tie logit")
        if "rest" in spec:
            decimal_float32(spec["rest"], what=f"{where} rest")
    elif kind == "adjacent":
        count = int(spec["count"])
        if count > vocab:
            raise ManifestError(f"{where}: {count} adjacent values exceed vocab {vocab}")
        float32_step(decimal_float32(spec["below"], what=f"{where} below"), -count)
    else:  # pragma: no cover - the schema allows no other type
        raise ManifestError(f"{where}: unknown construction {kind!r}")


# --- layout ---------------------------------------------------------------------------------


def forced_grid(case: Mapping[str, Any]) -> list[tuple[str, str, int]]:
    """(value, p, forced_id) per row: value outermost, forced_id innermost."""
    grid = case["grid"]
    return list(itertools.product(grid["value"], grid["p"], grid["forced_id"]))


NO_TOP_P = "1.0"  # a traffic row without top-p (vLLM's sampler writes p = 1.0)


def traffic_sampling(case: Mapping[str, Any]) -> list[tuple[str, int]]:
    """(p as written, k) per row of a traffic case: row i takes ``sampling[i mod n]``; an
    absent p is 1.0 (no top-p) and an absent k the vocabulary (no top-k), as vLLM's sampler
    fills its per-request tensors."""
    vocab, entries = int(case["vocab"]), case["sampling"]
    return [(str(entries[i % len(entries)].get("p", NO_TOP_P)),
             int(entries[i % len(entries)].get("k", vocab)))
            for i in range(int(case["batch"]))]


def row_ks(case: Mapping[str, Any], *, has_k: bool) -> list[int] | None:
    """The captured int32 top-k of each row (None for a case without a k file): a traffic
    case's sampling, or the vocabulary (no top-k) for the other kinds in version 3."""
    if not has_k:
        return None
    if case["kind"] == TRAFFIC:
        return [k for _, k in traffic_sampling(case)]
    return [int(case["vocab"])] * len(case_layout(case, has_k=False).rows)


def _traffic_label(case: Mapping[str, Any], p: str, k: int) -> str:
    shown_k = "none" if k >= int(case["vocab"]) else str(k)
    sampling = f"p={p} k={shown_k}"
    if "forced_id" not in case:
        return sampling
    value = case.get("rows", {}).get("force", {}).get("value", "1e9")
    return f"value={value} {sampling} id={case['forced_id']}"


def case_layout(case: Mapping[str, Any], *, has_k: bool = False) -> CaseLayout:
    kind, cid, vocab = case["kind"], case["id"], int(case["vocab"])
    rows: list[RowLayout]
    if kind == TRAFFIC:
        forced = case.get("forced_id")
        rows = [RowLayout(FORCED if forced is not None else ORDINARY, forced,
                          _traffic_label(case, p, k)) for p, k in traffic_sampling(case)]
        return CaseLayout(id=cid, kind=kind, batch=len(rows), vocab=vocab, rows=tuple(rows),
                          has_k=True, call=call_pattern.from_manifest(case))
    if kind == FORCED:
        rows = [
            RowLayout(FORCED, token, f"value={value} p={p} id={token}")
            for value, p, token in forced_grid(case)
        ]
    elif kind == ORDINARY:
        rows = [
            RowLayout(ORDINARY, None, f"seed={case['seed']} row={i}")
            for i in range(int(case["batch"]))
        ]
    else:
        rows = [RowLayout(ORDINARY, None, str(row["label"])) for row in case["rows"]]
    return CaseLayout(id=cid, kind=kind, batch=len(rows), vocab=vocab, rows=tuple(rows),
                      has_k=has_k, call=call_pattern.from_manifest(case))


def expected_layout(manifest: Manifest) -> list[CaseLayout]:
    """The cases (in manifest order) that a cases.json built from ``manifest`` must hold.
    Every case of a version 3 manifest captures a per-row top-k file."""
    has_k = manifest.data["schema"] == SCHEMA_V3
    return [case_layout(case, has_k=has_k) for case in manifest.cases]


def raw_input_bytes(manifest: Manifest) -> int:
    """Total raw size of the captured inputs the manifest asks for (logits, p, k and what a
    call pattern adds)."""
    return sum(sum(c.input_sizes().values()) for c in expected_layout(manifest))


def _refuse_float(text: str) -> float:
    raise ManifestError(f"JSON number {text} is not allowed: write exact values as strings")


def _refuse_constant(text: str) -> float:
    raise ManifestError(f"JSON constant {text} is not allowed")


def row_ps(case: Mapping[str, Any]) -> Sequence[str] | None:
    """The decimal p of each row as written (None for ordinary cases: the generator's p)."""
    if case["kind"] == TRAFFIC:
        return [p for p, _ in traffic_sampling(case)]
    if case["kind"] == FORCED:
        return [p for _, p, _ in forced_grid(case)]
    if case["kind"] == BOUNDARY:
        return [row["p"] for row in case["rows"]]
    return None
