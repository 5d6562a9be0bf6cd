"""One model of the evidence: release x path x implementation x workload x row.

Built only from bundles :mod:`harness.present.verified` has just verified (a bundle that
does not verify is a :class:`RefusedBundle` with the core's reason, never its claims) and
from mutation runs :func:`harness.mutation.mutation_check.check_summary` has just re-verified.
Plain, picklable values: the site builds each bundle's model in a worker process.

Evidence strings are kept as they are here; every view escapes them for its own medium.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import HarnessError
from ..core.names import PATCHED, SIDES

if TYPE_CHECKING:
    from ..ci.changes import Changes

# The committed evidence's bundle folders, by group (a group names what the bundles answer).
# The committed evidence's bundle folders, by group: the folder each group's bundles lie in
# (what each bundle answers is its manifest's own name and description, shown beside it).
GROUPS: dict[str, str] = {
    "bundles": "bundles/",
    "sweep": "sweep/bundles/",
    "deploy": "deploy/bundles/",
    "impls": "impls/bundles/",
    "pr": "pr/ (topp-gate pr runs, in archives)",
    "replays": "replays/ (upstream bugs replayed with topp-gate replay, in archives)",
}
BUNDLE_GLOBS: dict[str, tuple[str, ...]] = {
    "bundles": ("bundles/*/",),
    "sweep": ("sweep/bundles/*/",),
    "deploy": ("deploy/bundles/*/",),
    "impls": ("impls/bundles/*/",),
    "pr": ("pr/*/", "pr/*.tar.xz"),
    "replays": ("replays/*/*.tar.xz",),
}
MUTATION_GLOBS = ("mutation/*/", "mutation/*.tar.xz")


@dataclass(frozen=True)
class Side:
    """One side of a comparison: the implementation, its release and the paths it proved."""

    family: str
    version: str
    dispatch: str  # the path the manifest requires
    proven: tuple[str, ...]  # the paths the kernel evidence proved, over the cases
    status: str  # the runner's status for the side ("ok", "kernel_crash", ...)
    reason: str  # the runner's one-line reason when it did not run
    declared: tuple[str, ...] = ()  # the paths the manifest's cases require of the side


@dataclass(frozen=True)
class Row:
    """One judged row: the oracle's count beside each side's kept count and mass."""

    case: str
    row: int
    kind: str
    stops: tuple[str, ...]
    oracle: int | None
    kept: dict[str, int | None]
    mass_outside: dict[str, float | None]
    mass_dropped: dict[str, float | None]
    forced_failures: dict[str, tuple[str, ...]] = field(default_factory=dict)  # forced rows

    @property
    def label(self) -> str:
        return f"{self.case}[{self.row}]"


@dataclass(frozen=True)
class Case:
    id: str
    paths: dict[str, str | None]  # the path each side proved for the case (None: unproven)
    status: dict[str, str]


@dataclass(frozen=True)
class Workload:
    """One case of the manifest: what the rows are (the workload axis of the model)."""

    id: str
    kind: str
    vocab: int
    # the manifest's sampling parameters, applied to the case's rows in turn (row i takes
    # entry i modulo their number; empty: the rows carry their own p)
    sampling: tuple[dict[str, str], ...] = ()

    def row_sampling(self, row: int) -> dict[str, str]:
        return dict(self.sampling[row % len(self.sampling)]) if self.sampling else {}


@dataclass(frozen=True)
class TieRow:
    """A constructed boundary row whose oracle boundary falls inside a group of exactly tied
    logits: which of the group's token ids the canonical order keeps (the lowest ids) and
    which each side's output keeps (a sampler's output: the ids it drew). Read from the
    verified bundle's captured logits and outputs and the verified oracle count."""

    index: int  # the row's position in the bundle's rows (its anchor on the bundle page)
    case: str
    row: int
    label: str  # the row's label in the bundle's cases index
    p: float | None
    oracle: int
    logit: float  # the tied value
    size: int  # tokens in the group
    members: tuple[int, ...]  # the group's token ids, ascending (at most TIE_MEMBERS)
    canonical: tuple[int, ...]  # members the canonical order keeps
    kept: dict[str, tuple[int, ...]]  # members each side's output keeps

    @property
    def ref(self) -> str:
        return f"{self.case}[{self.row}]"


@dataclass(frozen=True)
class BundleModel:
    """A verified bundle: every field read from the verified statement or recomputed."""

    path: str  # as shown: relative to the evidence folder's parent
    group: str
    name: str  # the manifest's name
    description: str
    sides: dict[str, Side]
    cases: tuple[Case, ...]
    rows: tuple[Row, ...]
    workload: tuple[Workload, ...]
    rules: str
    report_format: str
    verdict: str
    reasons: tuple[str, ...]
    rows_total: int
    rows_stopped: int
    stop_rows: dict[str, int]
    base_defects: dict[str, Any] | None  # regression rule sets: the base's own failures
    base_defect_rows: tuple[dict[str, Any], ...]
    broken_rows: dict[str, list[str]] | None
    signer: str
    payload_sha256: str
    manifest_sha256: str
    harness: dict[str, Any]
    devices: tuple[str, ...]
    backend: str  # the manifest's required backend (verify checks each side's against it)
    library_binding: str
    archive: str | None = None  # the .tar.xz it came from, if any
    # the figures report.md shows, as the core computes them (:func:`_figures`): forced
    # groups, kept-count envelope, symmetric difference, diagnostics, oracle statuses
    figures: dict[str, Any] = field(default_factory=dict)
    # every row's exact-real count beside its binary64 and kernel counts (``topp-gate
    # exact``; derived here, never attested by the receipt), when asked for (exact=True)
    exact: tuple[dict[str, Any], ...] | None = None
    # the boundary rows whose oracle boundary splits a tie group (:func:`_ties`; read for
    # FlashInfer and vLLM's PyTorch path only, whose tie handling the front page shows)
    ties: tuple[TieRow, ...] = ()
    # both sides as the verified manifest pins them (the core's verify_sides.side_facts:
    # role, family, version, pin, tree, kernel, patch) and the change the receipt names
    compared: dict[str, dict[str, Any]] = field(default_factory=dict)
    change: dict[str, Any] = field(default_factory=dict)
    # regression rule sets (a pull request's gate): what the change changed, the figures
    # pr's answer and verify --json report (harness.ci.changes: rows whose outputs differ
    # from the base's, of them the rows the base got right, each broken row with its kept
    # counts, the base's failure); None for other rule sets
    changes: Changes | None = None

    @property
    def slug(self) -> str:
        return _slug(self.path)

    def side_named(self, family: str) -> str | None:
        """The first side (stock, then patched) of the family, if either is."""
        return next((s for s in SIDES if self.sides[s].family == family), None)


@dataclass(frozen=True)
class RowOutput:
    """One side's output for one row, fingerprinted: its bytes and its kept set."""

    sha256: str  # the row's output bytes
    kept: int  # tokens the output keeps (not masked to -inf)
    kept_sha256: str  # the kept set (one byte per token: kept or not)


@dataclass(frozen=True)
class RowBytes:
    """One row's captured bytes, fingerprinted, so two bundles' rows compare without being
    held: the same case id and label with equal ``inputs_sha256`` are the same captured row."""

    case: str
    row: int  # the row's index in its case
    label: str
    inputs_sha256: str  # the row's logits and p bytes
    outputs: dict[str, RowOutput]  # each side that wrote an output for the case


@dataclass(frozen=True)
class RefusedBundle:
    path: str
    group: str
    code: str
    reason: str
    archive: str | None = None

    @property
    def slug(self) -> str:
        return _slug(self.path)


@dataclass(frozen=True)
class Mutant:
    id: str
    kind: str
    killed: bool
    verdict: str
    reasons: tuple[str, ...]
    stopped_rows: tuple[str, ...]
    criterion_kills: bool
    diff: str  # the mutation's source diff (checked against the signed summary's digest)
    changed: tuple[str, ...] | None = None  # survivors: rows whose patched output changed


@dataclass(frozen=True)
class MutationRun:
    path: str
    matrix: str
    rules: str
    backend: str
    catalogue: str
    base_verdict: str
    base_defects: int
    gate_kills: tuple[int, int]
    criterion_kills: tuple[int, int]
    mutants: tuple[Mutant, ...]
    survivors: tuple[str, ...]
    signer: str
    catalogue_entries: int = 0  # how many entries the catalogue holds (a run may take part)
    criterion_batches: int = 0  # vLLM's criterion on the base: its batches
    criterion_base_failed: int = 0  # ... the batches the unchanged base already fails
    criterion_telling: int = 0  # mutants it kills on a batch the base passes
    criterion_run: bool = True  # False: made with --no-vllm-criterion (FlashInfer's runs)

    @property
    def slug(self) -> str:
        return _slug(self.path)


@dataclass(frozen=True)
class RefusedRun:
    path: str
    code: str
    reason: str

    @property
    def slug(self) -> str:
        return _slug(self.path)


@dataclass
class Evidence:
    bundles: list[BundleModel | RefusedBundle] = field(default_factory=list)
    mutations: list[MutationRun | RefusedRun] = field(default_factory=list)
    # the committed replays of upstream bugs (harness.present.replays.ReplayRun), each run
    # verified and held to its frozen replay file; with the replays not run yet
    replays: list[Any] = field(default_factory=list)
    replays_waiting: list[Any] = field(default_factory=list)


SLUG_CHARS = 64  # the readable part of a page name, at most


def page_name(path: str) -> str:
    """A page's file name (no suffix) for the piece shown as ``path``: a readable slug (ASCII
    letters, digits, ``-._``; anything else becomes ``-``; at most :data:`SLUG_CHARS`) and
    the first 16 hex digits of the sha256 of the exact path. The slug alone is not one to
    one (``a b``, ``a-b`` and ``a+b`` share one); the digest makes names differ wherever
    paths do, names differing only in case included, since the digest is lowercase hex.
    The site still refuses to write two pieces under one name
    (:func:`harness.present.site.write_site`)."""
    import hashlib

    slug = "".join(c if c.isascii() and (c.isalnum() or c in "-._") else "-" for c in path)
    slug = slug[:SLUG_CHARS].strip("-.") or "bundle"
    digest = hashlib.sha256(path.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{slug}-{digest}"


def _slug(path: str) -> str:
    return page_name(path)


def _mass(value: Any) -> float | None:
    from ..core.f32 import unhexf

    if not isinstance(value, str):
        return None
    try:
        return unhexf(value)
    except (ValueError, HarnessError):
        return None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _row(raw: dict[str, Any]) -> Row:
    found, judged = raw.get("diagnostics"), raw.get("oracle")
    diagnostics: dict[str, Any] = found if isinstance(found, dict) else {}
    oracle: dict[str, Any] = judged if isinstance(judged, dict) else {}
    kept: dict[str, int | None] = {}
    for side in SIDES:
        entry = raw.get(side)
        kept[side] = _int(entry.get("kept")) if isinstance(entry, dict) else None
    return Row(case=str(raw.get("case")), row=_int(raw.get("row")) or 0,
               kind=str(raw.get("kind")), stops=tuple(str(s) for s in raw.get("stops", [])),
               oracle=_int(oracle.get("count")), kept=kept,
               mass_outside={s: _mass(diagnostics.get(f"{s}_mass_outside")) for s in SIDES},
               mass_dropped={s: _mass(diagnostics.get(f"{s}_mass_dropped")) for s in SIDES},
               forced_failures={s: tuple(str(f) for f in diagnostics.get(
                   f"{s}_forced_failures", [])) for s in SIDES})


def verified_model(path: Path, key: Any, group: str = "", *,
                   exact: bool = False) -> BundleModel:
    """For the README section scripts: the model of the bundle at ``path``, verified with
    ``key`` in this process first (once per process); a bundle that does not verify is a
    SectionInputError naming it and the core's reason (the scripts' exit 2). ``exact``:
    with every row's exact-real count (needs the exact extra)."""
    from .verified import verified_checked

    return bundle_model(path, path.name, group, verified_checked(path, key), exact=exact)


def _figures(view: Any, manifest: dict[str, Any], rows: Any, verdict: dict[str, Any],
             report_format: str) -> dict[str, Any]:
    """The figures report.md shows (:func:`harness.core.report.summarize`), from the inputs
    verify regenerates report.md from: the manifest's backend, the re-judged verdict, each
    side's ``evidence.json`` and the cases index; a forced row's failures read as the
    bundle's report format reads them."""
    from ..core.bundle import CASES, evidence_name
    from ..core.report import REPORT_V1, REPORT_V2, ReportInputs, forced_failures_v3, summarize

    names = {s["name"] for s in view.statement["subject"]}
    evidence = {side: json.loads(view.raw(evidence_name(side)))
                for side in SIDES if evidence_name(side) in names}
    inputs = ReportInputs(str(manifest.get("name", "")),
                          str(manifest.get("backend", {}).get("required", "?")), rows,
                          verdict, evidence, json.loads(view.raw(CASES)))
    if report_format in (REPORT_V1, REPORT_V2):
        return summarize(inputs)
    return summarize(inputs, forced_failures_v3)


def _exact(view: Any) -> tuple[dict[str, Any], ...]:
    """Every row's exact-real count (what ``topp-gate exact`` computes; the exact extra)."""
    from ..core.limits import default_workers
    from ..diagnostics.exact_bundle import bundle_exact

    return tuple(row.to_json() for row in bundle_exact(view, workers=default_workers()))


def bundle_model(path: Path, shown: str, group: str, checked: Any,
                 archive: str | None = None, *, exact: bool = False) -> BundleModel:
    """The model of one verified bundle (``checked``: :class:`verified.Checked`); ``exact``:
    with every row's exact-real count (seconds per bundle; needs the exact extra)."""
    from ..core.report import device_name
    from ..core.verify import case_paths

    verified, view = checked.verified, checked.view
    predicate = view.statement["predicate"]
    manifest = json.loads(view.raw("manifest.json"))
    rows_doc = json.loads(view.raw("results/rows.json"))
    rows = rows_doc["rows"] if isinstance(rows_doc, dict) else rows_doc
    side_results = predicate.get("environment", {}).get("side_results", {})
    cases = tuple(Case(str(c["id"]), {s: p for s, p in case_paths(dict(c)).items()},
                       {s: str(c.get(s, "")) for s in SIDES}) for c in predicate["cases"])
    sides = {}
    for side in SIDES:
        entry = manifest["sources"]["sides"][side]
        result = side_results.get(side, {}) if isinstance(side_results, dict) else {}
        sides[side] = Side(
            family=str(entry.get("family", "vllm-triton")), version=str(entry["version"]),
            dispatch=str(entry.get("dispatch", "split")),
            proven=tuple(sorted({str(c.paths.get(side)) for c in cases
                                 if c.paths.get(side)})),
            status=str(result.get("status", "ok")), reason=str(result.get("reason", "")),
            declared=tuple(sorted({str((c.get("paths") or {}).get(
                side, entry.get("dispatch", "split"))) for c in manifest["cases"]})))
    running = predicate.get("environment", {}).get("running", {})
    devices = tuple(sorted({device_name(ev) for ev in running.values()} - {""})) \
        if isinstance(running, dict) else ()
    v = verified.verdict
    return BundleModel(
        path=shown, group=group, name=str(manifest.get("name", path.name)),
        description=str(manifest.get("description", "")), sides=sides, cases=cases,
        rows=tuple(_row(r) for r in rows if isinstance(r, dict)),
        workload=tuple(Workload(str(c["id"]), str(c["kind"]), int(c["vocab"]),
                                tuple({str(k): str(v) for k, v in e.items()}
                                      for e in c.get("sampling") or () if isinstance(e, dict)))
                       for c in manifest["cases"]), rules=verified.rules,
        report_format=verified.report_format, verdict=str(v["verdict"]),
        reasons=tuple(v["reasons"]), rows_total=int(v["rows"]),
        rows_stopped=int(v["rows_stopped"]), stop_rows=dict(verified.stop_rows),
        base_defects=v.get("base_defects"), base_defect_rows=tuple(v.get("base_defect_rows")
                                                                   or ()),
        broken_rows=v.get("broken_rows"), signer=verified.keyid,
        payload_sha256=verified.payload_sha256, manifest_sha256=verified.manifest_sha256,
        harness={"algorithm": verified.harness_algorithm, "sha256": verified.harness_recorded,
                 "matches": verified.harness_matches, "source": verified.harness_source},
        devices=devices, backend=str(manifest.get("backend", {}).get("required", "?")),
        library_binding=verified.library_binding, archive=archive,
        figures=_figures(view, manifest, rows, v, verified.report_format),
        exact=_exact(view) if exact else None,
        ties=_ties(view, rows) if any(sides[s].family in TIE_FAMILIES for s in SIDES)
        else (), compared={k: dict(v) for k, v in verified.sides.items()},
        change=dict(verified.change),
        changes=_changes(view, rows, cases) if v.get("base_defects") is not None else None)


def _changes(view: Any, rows: Any, cases: tuple[Case, ...]) -> Changes:
    """What the change changed, as pr's answer and verify --json say it (one computation:
    :func:`harness.ci.changes.changes_of_view` on the verified bundle)."""
    from ..ci.changes import changes_of_view

    paths = {c.id: c.paths.get(PATCHED) for c in cases}
    return changes_of_view(view, [r for r in rows if isinstance(r, dict)], paths.get)


TIE_FAMILIES = ("flashinfer", "vllm-pytorch")
TIE_MEMBERS = 64  # a tie group shows at most this many of its ids


def _ties(view: Any, rows: Any) -> tuple[TieRow, ...]:
    """The boundary rows whose oracle boundary falls inside a group of equal logits (the
    canonical order, by logit then lowest id, keeps part of the group): the group's ids, the
    part the canonical order keeps and the part each side's output keeps."""
    import numpy as np

    from ..core.bundle import CASES, output_name

    names = {s["name"] for s in view.statement["subject"]}
    position = {(str(r.get("case")), _int(r.get("row"))): i for i, r in enumerate(rows)
                if isinstance(r, dict)}
    out = []
    for case in json.loads(view.raw(CASES)).get("cases", []):
        if case.get("kind") != "boundary":
            continue
        vocab = int(case["vocab"])
        logits = np.frombuffer(view.raw(case["logits"]), dtype="<f4").reshape(-1, vocab)
        outputs = {side: np.frombuffer(view.raw(output_name(side, case["id"])),
                                       dtype="<u4").reshape(-1, vocab)
                   for side in SIDES if output_name(side, case["id"]) in names}
        for i, entry in enumerate(case["rows"]):
            index = position.get((str(case["id"]), i))
            if index is None or i >= len(logits):
                continue
            raw = rows[index]
            count = _int((raw.get("oracle") or {}).get("count"))
            if count is None or not 0 < count < vocab:
                continue
            x = logits[i]
            order = np.lexsort((np.arange(vocab), -x.astype(np.float64)))
            tied = x[order[count - 1]]
            group = np.flatnonzero(x == tied)
            canonical = np.intersect1d(order[:count], group)
            if group.size < 2 or canonical.size == group.size:
                continue
            shown = group[:TIE_MEMBERS]
            out.append(TieRow(
                index, str(case["id"]), i, str(entry.get("label", "")), _mass(raw.get("p")),
                count, float(tied), int(group.size), tuple(int(t) for t in shown),
                tuple(int(t) for t in np.intersect1d(canonical, shown)),
                {side: tuple(int(t) for t in shown if data[i][t] != _NEG_INF)
                 for side, data in outputs.items() if i < len(data)}))
    return tuple(out)


_NEG_INF = 0xFF800000  # float32 -inf: a masked token


def _row_output(data: bytes) -> RowOutput:
    import numpy as np

    from ..core.digest import sha256_hex

    kept = np.frombuffer(data, dtype="<u4") != _NEG_INF
    return RowOutput(sha256_hex(data), int(kept.sum()), sha256_hex(kept.tobytes()))


def row_bytes(path: Path, key: Any, cases: Collection[str]) -> tuple[RowBytes, ...]:
    """The rows of the named cases of the bundle at ``path``, fingerprinted (each case's
    captured logits and p, and each side's output, read from the bundle verified with
    ``key`` in this process; a bundle that does not verify is a SectionInputError)."""
    from ..core.bundle import CASES, output_name
    from ..core.digest import sha256_hex
    from .verified import verified_checked

    view = verified_checked(path, key).view
    names = {s["name"] for s in view.statement["subject"]}
    out = []
    for case in json.loads(view.raw(CASES)).get("cases", []):
        if case["id"] not in cases:
            continue
        width = 4 * int(case["vocab"])  # float32 bytes of one row
        logits, p = view.raw(case["logits"]), view.raw(case["p"])
        outputs = {side: view.raw(output_name(side, case["id"])) for side in SIDES
                   if output_name(side, case["id"]) in names}  # a failed side wrote none
        for i, row in enumerate(case["rows"]):
            out.append(RowBytes(
                str(case["id"]), i, str(row["label"]),
                sha256_hex(logits[width * i:width * (i + 1)] + p[4 * i:4 * i + 4]),
                {side: _row_output(data[width * i:width * (i + 1)])
                 for side, data in outputs.items()}))
    return tuple(out)
