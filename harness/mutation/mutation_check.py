"""Check a signed mutation summary: every claim recomputed from the bundles it names (issue 27).

A signature says who wrote ``mutation.json``, not that it is true: a key holder can sign a
summary naming one PASS bundle twice, as the base and as a "killed" mutant, and claim 28/28.
:func:`check_summary` therefore trusts nothing the summary says that it can recompute:

* the frozen PR manifest comes from the repository only (``evidence/manifests/pr/NAME.json``
  under one of ``roots``, its bytes matching its committed ``.sha256`` sibling and the
  summary's sha256), never from the mutation folder; its name and rule set are the summary's;
* every entry is verified offline (:func:`harness.core.verify.verify_bundle`) against its
  manifest: the base against the frozen one, each mutant against ``manifests/ID.json`` of the
  folder, which must be the frozen manifest with only the patched side's patch changed (to
  the mutant's diff); every bundle ran the base's captured inputs;
* each mutant id names an entry of the summary's catalogue (a known catalogue id), once;
  its kind, description and diff (sha256, changed-line count and, when the base carries no
  patch, each changed line being the catalogue entry's replacement) are the catalogue's;
* no bundle, diff, manifest or signed payload is named twice;
* killed (verified verdict STOP), base_passes, stopped rows, run stops, run exits, both kill
  rates, the survivors (and their order: smallest diff first) and ``unverified`` (which must
  be empty: a table states only verified results) are recomputed and compared;
* vLLM's criterion: each batch's pass is recomputed from its recorded figures, each mutant's
  kill from its batches; the figures are held to the verified outputs: the kept counts are
  read from each bundle's patched output, a batch's maximum reference count is the same in
  every entry (same inputs, same reference), ``max_diff >= |max_reference - max kept|``, and
  two entries' ``max_diff`` differ by no more than their kept counts do (the triangle
  inequality). The reference counts themselves (vLLM's PyTorch sort path) are not rerun here:
  another torch build gives 30547 where the device's gave 30548 on a tie-heavy batch.

Any difference is a :class:`~harness.core.errors.VerificationError` (exit 4, one line).

Every bundle of a run ran the same inputs, so a row judged in an earlier bundle (or an
earlier run checked by this process) with every byte equal is taken from
:mod:`harness.mutation.row_memo` rather than judged again; the rows recomputed or recalled
are compared with each bundle's recorded rows all the same.
"""

from __future__ import annotations

import json
import re
import sys
from array import array
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..core.digest import sha256_hex
from ..core.errors import (
    BindingMismatchError,
    MalformedEvidenceError,
    VerificationError,
    wrap_as,
)
from .row_memo import RowMemo, process_memo

MAX_SUMMARY_BYTES = 16 << 20
SAID_BY = "mutation summary"
BASE_ID = "base"
_SUMMARY_ID = re.compile(r"[a-z0-9][a-z0-9.-]{0,63}")
_SUMMARY_PATH = re.compile(r"(?:bundles|mutants)/[a-z0-9][a-z0-9.-]{0,63}(?:\.diff)?")
# the frozen PR manifest as a run records it: relative to the repository it ran in, or an
# absolute path ending so; only that tail is ever looked up, and only under the repository
_FROZEN_PATH = re.compile(r"(?:/(?:[^\x00]*/)?)?(evidence/manifests/pr/[a-z0-9][a-z0-9.-]{0,63}"
                          r"\.json)")
_NEG_INF = 0xFF800000  # float32 -inf, as a little-endian uint32


def summary_path(folder: Path, shown: Any) -> Path:
    """A bundle or diff path the signed summary names, refused unless it is one plain name
    under ``bundles/`` or ``mutants/`` of the folder (never ``..``, absolute or odd text)."""
    if not isinstance(shown, str) or not _SUMMARY_PATH.fullmatch(shown):
        raise MalformedEvidenceError(f"mutation summary names the path {shown!r}")
    return folder / shown


def summary_id(shown: Any) -> str:
    """A mutant id the signed summary names (printed into README tables): catalogue-shaped."""
    if not isinstance(shown, str) or not _SUMMARY_ID.fullmatch(shown):
        raise MalformedEvidenceError(f"mutation summary names the mutant {shown!r}")
    return shown


def _differ(what: str, claimed: Any, actual: Any) -> None:
    if claimed != actual:
        raise BindingMismatchError(what, json.dumps(claimed, sort_keys=True),
                                   json.dumps(actual, sort_keys=True), said_by=SAID_BY)


def _once(seen: set[str], what: str, value: str) -> None:
    if value in seen:
        raise MalformedEvidenceError(f"mutation summary names the {what} {value!r} twice")
    seen.add(value)


def catalogue_entries(catalogue_id: Any) -> dict[str, Any]:
    """The entries (id -> Mutation) of a known catalogue
    (:data:`harness.mutation.mutant_catalogue.CATALOGUES`); an unknown id is refused."""
    from .mutant_catalogue import CATALOGUES

    if not isinstance(catalogue_id, str) or catalogue_id not in CATALOGUES:
        raise MalformedEvidenceError(f"mutation summary names the catalogue {catalogue_id!r} "
                                     f"(known: {', '.join(sorted(CATALOGUES))})")
    return {m.id: m for m in CATALOGUES[catalogue_id]}


def frozen_pr_manifest(shown: Any, roots: Sequence[Path]) -> tuple[Path, bytes]:
    """The frozen PR manifest a summary's base names, from the repository only: the path
    must be ``evidence/manifests/pr/NAME.json`` under one of ``roots`` and its bytes must
    match its ``.sha256`` sibling (never a file of the mutation folder)."""
    from ..core.digest import parse_sha256sum_line
    from ..core.safeio import read_regular_file

    match = _FROZEN_PATH.fullmatch(shown) if isinstance(shown, str) else None
    if match is None:
        raise MalformedEvidenceError(f"mutation summary names the frozen manifest {shown!r} "
                                     "(expected evidence/manifests/pr/NAME.json)")
    tail = match.group(1)
    for root in roots:
        path = root / tail
        sibling = path.with_name(path.name + ".sha256")
        if not (path.is_file() and sibling.is_file()):
            continue
        with wrap_as(MalformedEvidenceError, f"frozen manifest {tail}: "):
            raw = read_regular_file(path, "frozen manifest", MAX_SUMMARY_BYTES)
            line = parse_sha256sum_line(read_regular_file(
                sibling, "frozen manifest hash", 4096).decode("utf-8", "replace"))
        if line is None or line[0] != sha256_hex(raw):
            raise MalformedEvidenceError(f"frozen manifest {tail} does not match its "
                                         f"committed {path.name}.sha256")
        return path, raw
    raise MalformedEvidenceError(f"the frozen manifest {tail} is not in the repository "
                                 "(a mutation folder never supplies its own)")


def _manifest_core(data: Any) -> Any:
    """A manifest's content less what a mutant's may change: its name, description, the
    pin files' relative paths and the patched side's patch."""
    core = json.loads(json.dumps(data))
    for key in ("name", "description"):
        core.pop(key, None)
    for side in core.get("sources", {}).get("sides", {}).values():
        side.pop("pin", None)
    core["sources"]["sides"]["patched"].pop("patch", None)
    return core


def _kept_counts(output: bytes, batch: int, vocab: int) -> list[int]:
    """Per row, positions that are not float32 -inf (vLLM's criterion's kept count)."""
    values = array("I")
    values.frombytes(output)
    if sys.byteorder != "little":  # pragma: no cover - the bytes are little-endian
        values.byteswap()
    if len(values) != batch * vocab:
        raise MalformedEvidenceError(f"an output holds {len(values)} values, not "
                                     f"{batch} x {vocab}")
    return [vocab - values[i * vocab:(i + 1) * vocab].count(_NEG_INF) for i in range(batch)]


def _stopped_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"row": f"{r['case']}[{r['row']}]", "stops": r["stops"]} for r in rows if r["stops"]]


def _changed(diff: bytes) -> tuple[list[str], list[str]]:
    removed, added = [], []
    for line in diff.decode("utf-8", "replace").splitlines():
        if line.startswith(("+++", "---")):
            continue
        if line[:1] == "-":
            removed.append(line[1:])
        elif line[:1] == "+":
            added.append(line[1:])
    return removed, added


def _check_diff(mid: str, diff: bytes, mutation: Any, base_patched: bool) -> int:
    """The number of changed lines; without a PR patch under the base, each changed line
    must be the catalogue entry's replacement (one line, or every line for occurrence 0)."""
    removed, added = _changed(diff)
    if not base_patched:
        pairs = list(zip(removed, added, strict=False))
        if (len(removed) != len(added) or not pairs
                or (mutation.occurrence != 0 and len(pairs) != 1)
                or any(mutation.old not in old or new != old.replace(mutation.old,
                                                                     mutation.new, 1)
                       for old, new in pairs)):
            raise MalformedEvidenceError(f"mutant {mid}: its diff is not the catalogue's "
                                         f"mutation {mutation.old!r} -> {mutation.new!r}")
    return len(removed) + len(added)


class _Criterion:
    """vLLM's criterion figures held to the verified outputs, across entries."""

    def __init__(self) -> None:
        self.top: dict[str, int] = {}
        self.base: dict[str, tuple[int, list[int]]] = {}

    def check(self, eid: str, claimed: Any, cases: list[dict[str, Any]], view: Any) -> bool:
        from .vllm_criterion import LABEL, SAMPLER_SHA256

        if not isinstance(claimed, dict):
            raise MalformedEvidenceError(f"entry {eid}: vllm_criterion is not an object")
        _differ(f"entry {eid} vllm_criterion label", claimed.get("label"), LABEL)
        _differ(f"entry {eid} vllm_criterion sampler", claimed.get("sampler_sha256"),
                SAMPLER_SHA256)
        batches = claimed.get("batches")
        if not isinstance(batches, list):
            raise MalformedEvidenceError(f"entry {eid}: vllm_criterion has no batches")
        _differ(f"entry {eid} vllm_criterion cases",
                [b.get("case") if isinstance(b, dict) else None for b in batches],
                [c["id"] for c in cases])
        for case, b in zip(cases, batches, strict=True):
            self._batch(eid, case, b, view)
        killed = not all(b["passes"] for b in batches)
        _differ(f"entry {eid} vllm_criterion killed", claimed.get("killed"), killed)
        return killed

    def _batch(self, eid: str, case: dict[str, Any], b: dict[str, Any], view: Any) -> None:
        cid = case["id"]
        name = f"outputs/patched/{cid}.out.f32"
        if name not in view.statement_subjects:
            _differ(f"entry {eid} vllm_criterion {cid}", b,
                    {"case": cid, "passes": False, "reason": "no output"})
            return
        diff, top = b.get("max_diff"), b.get("max_reference")
        if not (type(diff) is int and type(top) is int and diff >= 0 and top >= 0):
            raise MalformedEvidenceError(f"entry {eid}: vllm_criterion {cid} figures are not "
                                         "counts")
        _differ(f"entry {eid} vllm_criterion {cid}", b,
                {"case": cid, "passes": diff <= 3 or 200 * diff < top, "max_diff": diff,
                 "max_reference": top})
        kept = _kept_counts(view.raw(name), len(case["rows"]), int(case["vocab"]))
        _differ(f"entry {eid} vllm_criterion {cid} max_reference (every entry ran the same "
                "inputs)", top, self.top.setdefault(cid, top))
        if diff < abs(top - max(kept)):
            raise BindingMismatchError(f"entry {eid} vllm_criterion {cid} max_diff",
                                       str(diff), f"at least {abs(top - max(kept))} (kept "
                                       f"counts of the verified output)", said_by=SAID_BY)
        if cid not in self.base:
            self.base[cid] = (diff, kept)
            return
        base_diff, base_kept = self.base[cid]
        bound = max(abs(a - c) for a, c in zip(kept, base_kept, strict=True))
        if abs(diff - base_diff) > bound:
            raise BindingMismatchError(
                f"entry {eid} vllm_criterion {cid} max_diff", str(diff),
                f"within {bound} of the base's {base_diff} (their verified outputs' kept "
                "counts differ by at most that)", said_by=SAID_BY)


class _View:
    """A verified bundle's statement, its bytes, and the subjects it binds."""

    def __init__(self, view: Any) -> None:
        self.view = view
        self.statement = view.statement
        self.statement_subjects = {s["name"] for s in view.statement["subject"]}

    def raw(self, name: str) -> bytes:
        data: bytes = self.view.raw(name)
        return data


def check_summary(folder: Path, public_key: Any, *, roots: Sequence[Path] = (),
                  progress: Callable[[str], None] | None = None,
                  workers: int | None = 1,
                  row_memo: RowMemo | None = process_memo()) -> dict[str, Any]:
    """Re-verify a mutation folder and recompute every claim of its signed summary (see the
    module's docstring). Returns the summary. ``roots``: the repositories the frozen PR
    manifest may come from; ``progress``: called with one line per verified bundle;
    ``workers``: oracle-rerun processes per bundle (None: every usable CPU); ``row_memo``:
    rows judged earlier in this process (default: the process's memo; None: judge every
    row afresh)."""
    from ..core.safeio import read_regular_file

    # an unreadable summary or envelope (missing, a FIFO, too large): a UsageError, as before
    envelope = read_regular_file(folder / "mutation.dsse.json", "mutation envelope",
                                 MAX_SUMMARY_BYTES)
    written = read_regular_file(folder / "mutation.json", "mutation summary",
                                MAX_SUMMARY_BYTES)
    with wrap_as(MalformedEvidenceError, keep=VerificationError,
                 failing_closed="checking a mutation summary"):
        summary = _read_summary(envelope, written, public_key)
        return _check(folder, summary, public_key, tuple(roots),
                      progress or (lambda _line: None), workers, row_memo)


def _read_summary(envelope: bytes, written: bytes, public_key: Any) -> dict[str, Any]:
    from ..core import dsse
    from ..core.strictjson import loads_strict
    from .summary_format import SUMMARY_PAYLOAD_TYPE, SUMMARY_SCHEMA

    payload = dsse.verify(envelope, public_key, SUMMARY_PAYLOAD_TYPE)
    if payload != written:
        raise BindingMismatchError("mutation.json vs its signed payload", sha256_hex(payload),
                                   sha256_hex(written))
    summary = loads_strict(payload, "mutation summary")
    if not isinstance(summary, dict) or summary.get("schema") != SUMMARY_SCHEMA:
        raise MalformedEvidenceError(f"mutation summary is not a {SUMMARY_SCHEMA} object")
    for key in ("base", "manifest", "kill_rate"):
        if not isinstance(summary.get(key), dict):
            raise MalformedEvidenceError(f"mutation summary's {key} is not an object")
    for key in ("mutants", "survivors", "unverified"):
        if not isinstance(summary.get(key), list):
            raise MalformedEvidenceError(f"mutation summary's {key} is not a list")
    return summary


def _check(folder: Path, summary: dict[str, Any], public_key: Any, roots: tuple[Path, ...],
           progress: Callable[[str], None], workers: int | None,
           row_memo: RowMemo | None) -> dict[str, Any]:
    from ..core.manifest import load_manifest

    catalogue = catalogue_entries(summary.get("catalogue"))
    base, mutants = summary["base"], summary["mutants"]
    _differ("base id", base.get("id"), BASE_ID)
    frozen_path, frozen_raw = frozen_pr_manifest(base.get("manifest", {}).get("path"), roots)
    frozen = load_manifest(frozen_path)
    _differ("manifest", summary["manifest"],
            {"name": frozen.name, "sha256": sha256_hex(frozen_raw), "rules": frozen.rules})
    base_patched = "patch" in frozen.data["sources"]["sides"]["patched"]
    seen: dict[str, set[str]] = {k: set() for k in ("id", "bundle", "manifest", "diff",
                                                     "payload")}
    criterion = _Criterion()
    backends: set[str] = set()
    inputs: list[Any] = []
    diff_lines: dict[str, int] = {}
    killed: dict[str, bool] = {}
    vllm_killed: dict[str, bool] = {}
    entries = [base, *mutants]
    for number, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise MalformedEvidenceError("mutation summary has an entry that is not an object")
        eid = summary_id(entry.get("id"))
        _once(seen["id"], "mutant", eid)
        if not entry.get("verified"):
            raise MalformedEvidenceError(f"mutation summary entry {eid} did not verify; a "
                                         "table states only verified results")
        _differ(f"entry {eid} bundle", entry.get("bundle"), f"bundles/{eid}")
        _once(seen["bundle"], "bundle", entry["bundle"])
        if eid == BASE_ID:
            manifest_path, manifest_raw = frozen_path, frozen_raw
        else:
            manifest_path, manifest_raw = _mutant_manifest(folder, eid, entry, catalogue,
                                                           frozen, base_patched, diff_lines)
        _once(seen["manifest"], "manifest", sha256_hex(manifest_raw))
        _differ(f"entry {eid} manifest", entry.get("manifest"),
                {"path": base["manifest"]["path"] if eid == BASE_ID
                 else f"manifests/{eid}.json", "sha256": sha256_hex(manifest_raw)})
        view, verified = _verified(folder, eid, entry, public_key, manifest_path, workers,
                                   row_memo)
        _once(seen["payload"], "signed bundle payload", verified.payload_sha256)
        progress(f"{folder.name}: {eid} verified ({number + 1} of {len(entries)}, "
                 f"{verified.verdict['verdict']})")
        _differ(f"entry {eid} rules", verified.rules, frozen.rules)
        for side in view.statement["predicate"]["kernel_path"].values():  # verify bound it
            if isinstance(side, dict) and "backend" in side:
                backends.add(str(side["backend"]))
        cases = json.loads(view.raw("cases.json"))["cases"]
        inputs.append([(c["id"], view.view.digest(c["logits"]), view.view.digest(c["p"]))
                       for c in cases])
        _differ(f"entry {eid} captured inputs (every bundle runs the base's)",
                inputs[-1], inputs[0])
        stop = verified.verdict["verdict"] == "STOP"
        _differ(f"entry {eid} run_exit", entry.get("run_exit"), 1 if stop else 0)
        _differ(f"entry {eid} stopped_rows", entry.get("stopped_rows"),
                _stopped_rows(view.statement["predicate"]["rows"]))
        _differ(f"entry {eid} run_stops", entry.get("run_stops"),
                view.statement["predicate"]["run_stops"])
        if "vllm_criterion" in entry:
            vk = criterion.check(eid, entry["vllm_criterion"], cases, view)
            if eid != BASE_ID:
                vllm_killed[eid] = vk
                _differ(f"entry {eid} vllm_killed", entry.get("vllm_killed"), vk)
        elif "vllm_killed" in entry:
            raise MalformedEvidenceError(f"entry {eid}: vllm_killed without its criterion")
        if eid != BASE_ID:
            killed[eid] = stop
            _differ(f"entry {eid} killed", entry.get("killed"), stop)
    if len(backends) != 1:
        raise MalformedEvidenceError(f"the bundles ran on {len(backends)} backends "
                                     f"({', '.join(sorted(backends))}), not one")
    if summary.get("backend") != "auto":  # `mutate --backend auto` records what was asked
        _differ("backend (the bundles' recorded one)", summary.get("backend"), backends.pop())
    _differ("base_passes", summary.get("base_passes"), not _is_stop(base))
    ids = [m["id"] for m in mutants]
    _differ("kill_rate", summary["kill_rate"],
            {"gate": {"killed": sum(killed.values()), "of": len(ids)},
             "vllm_criterion": {"killed": sum(vllm_killed.values()), "of": len(vllm_killed)}})
    _differ("survivors", summary["survivors"],
            sorted((i for i in ids if not killed[i]), key=lambda i: (diff_lines[i], i)))
    _differ("unverified", summary["unverified"], [])
    return summary


def _is_stop(entry: dict[str, Any]) -> bool:
    return bool(entry["verdict"]["verdict"] == "STOP")


def _mutant_manifest(folder: Path, eid: str, entry: dict[str, Any],
                     catalogue: dict[str, Any], frozen: Any, base_patched: bool,
                     diff_lines: dict[str, int]) -> tuple[Path, bytes]:
    """A mutant's catalogue entry, diff and manifest, each checked; (manifest path, bytes)."""
    from ..core.manifest import load_manifest
    from ..core.safeio import read_regular_file

    mutation = catalogue.get(eid)
    if mutation is None:
        raise MalformedEvidenceError(f"mutant {eid} is not in the summary's catalogue")
    _differ(f"mutant {eid} catalogue entry", [entry.get("kind"), entry.get("what")],
            [mutation.kind, mutation.what])
    _differ(f"mutant {eid} diff", entry.get("diff"), f"mutants/{eid}.diff")
    diff = read_regular_file(summary_path(folder, entry["diff"]), "mutant diff",
                             MAX_SUMMARY_BYTES)
    _differ(f"mutant {eid} diff_sha256", entry.get("diff_sha256"), sha256_hex(diff))
    diff_lines[eid] = _check_diff(eid, diff, mutation, base_patched)
    _differ(f"mutant {eid} diff_lines", entry.get("diff_lines"), diff_lines[eid])
    shown = f"manifests/{eid}.json"
    path = folder / shown
    raw = read_regular_file(path, "mutant manifest", MAX_SUMMARY_BYTES)
    manifest = load_manifest(path)
    _differ(f"mutant {eid} manifest name", manifest.name, eid)
    _differ(f"mutant {eid} manifest (the frozen one with only the patched side's patch "
            "changed)", _manifest_core(manifest.data), _manifest_core(frozen.data))
    patch = manifest.data["sources"]["sides"]["patched"].get("patch", {})
    _differ(f"mutant {eid} manifest's patch", patch.get("sha256"), sha256_hex(diff))
    return path, raw


def _verified(folder: Path, eid: str, entry: dict[str, Any], public_key: Any,
              manifest: Path, workers: int | None,
              row_memo: RowMemo | None) -> tuple[_View, Any]:
    from ..core.verify import open_bundle, verify_bundle

    bundle = summary_path(folder, entry["bundle"])
    with wrap_as(MalformedEvidenceError, f"bundle {entry['bundle']}: "):
        verified = verify_bundle(bundle, public_key, frozen_manifest=manifest,
                                 workers=workers, row_memo=row_memo)
    view = open_bundle(bundle, public_key)
    _differ(f"bundle {entry['bundle']} payload (read twice)", view.payload_sha256,
            verified.payload_sha256)
    _differ(f"entry {eid} payload_sha256", entry.get("payload_sha256"),
            verified.payload_sha256)
    _differ(f"entry {eid} verdict", entry.get("verdict"), verified.verdict)
    return _View(view), verified
