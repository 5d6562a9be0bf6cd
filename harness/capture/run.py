"""One gate run, end to end, into a signed bundle. Kernel side (needs the ``gpu`` extra).

Data flows one way:

    frozen manifest -> pinned sources checked -> captured input bytes (built once)
      -> stock child, patched child (same bytes, one process each, timeouts)
      -> outputs + kernel-path evidence -> judge (oracle + gate) -> verdict
      -> report -> bundle written to a temporary folder, signed, renamed into place.

Every refusal before the kernels run (not frozen, drifted sources, limits, an existing
output folder, a missing key) is a typed error and nothing runs. Kernel crashes, hangs,
unproven split paths and input mismatches are *results*: they become stop reasons in a
complete, signed bundle. There is no retry inside a run.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import json
import os
import platform
import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__, families
from ..core.cases_index import check_index
from ..core.digest import sha256_hex
from ..core.errors import EvidenceDriftError, UsageError
from ..core.judge import CaseBytes, RowSpec, judge_cases
from ..core.limits import workers as worker_count
from ..core.manifest import PINNED_BY_FILE, PINNED_INLINE, CaseLayout, Manifest, load_manifest
from ..core.names import SIDES, SPLIT, WHEEL_PIN_FIELDS, proven_by_case, recorded_cases
from ..core.oracle import numpy_available
from ..core.report import DEFAULT_REPORT
from ..core.rulesets import rule_set
from ..core.support_rules import case_draws
from ..core.terminal import printable
from ..kernels.private_tree import PrivateTree, private_tree
from ..kernels.runner import (
    BACKENDS,
    DEFAULT_NUM_SM,
    SideResult,
    child_output_dir,
    require_sandbox,
    run_side,
)
from ..kernels.sandbox import Isolation, exposes
from ..kernels.sandbox import unsandboxed as unsandboxed_isolation
from ..pins.sources import (
    Pins,
    Side,
    cache_root,
    fetch_wheel,
    kernel_diff,
    load_pins,
    resolve_tree,
    user_candidate,
    verified_wheel,
)
from .bundle_writer import BundleContent, WrittenBundle, write_bundle
from .cases import write_cases
from .provenance import source_revision
from .signing import check_key_file, load_private_key

Progress = Callable[[str], None]


@dataclass(frozen=True)
class RunOptions:
    manifest: Path
    out: Path
    key: Path
    backend: str = "auto"
    sources: Path | None = None
    cache: Path | None = None
    patch: Path | None = None
    workers: int = 0  # 0: the default (harness.core.limits.default_workers)
    repeats: int = 0  # extra timed CUDA calls per case (timings only)
    unsandboxed: bool = False  # run the kernel children without a sandbox (trusted code only)


@dataclass(frozen=True)
class RunOutcome:
    bundle: WrittenBundle
    verdict: dict[str, Any]


def _say(progress: Progress | None, message: str) -> None:
    if progress is not None:
        progress(message)


# --- before anything runs -------------------------------------------------------------------


def resolve_backend(requested: str, manifest: Manifest) -> str:
    """The manifest decides the path; asking for another one is a refused drift."""
    required = str(manifest.backend["required"])
    if requested not in ("auto", *BACKENDS):
        raise UsageError(f"unknown backend {requested!r}; use cuda, interpreter or auto")
    if requested != "auto" and requested != required:
        raise UsageError(f"manifest {manifest.name} requires backend {required}; "
                         f"--backend {requested} would change the dispatch path")
    if required == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise UsageError(f"manifest {manifest.name} requires CUDA and torch sees no CUDA "
                             "device (the smoke manifest runs in Triton's interpreter)")
    return required


def check_pins_match(manifest: Manifest, pins: Pins, patch: Path | None) -> None:
    """The frozen manifest's sources must be exactly what this harness pins."""
    declared = manifest.sources
    for name in SIDES:
        if patch is not None and name == "patched":
            continue
        want = declared["sides"][name]
        have = pins.side(name)
        for key in WHEEL_PIN_FIELDS:
            if str(want[key]) != str(getattr(have, key)):
                raise EvidenceDriftError(f"{name} {key} (manifest vs pins.json)",
                                         str(want[key]), str(getattr(have, key)))
    if patch is None and declared.get("patch_sha256") != pins.patch_sha256:
        raise EvidenceDriftError("patch sha256 (manifest vs pins.json)",
                                 str(declared.get("patch_sha256")), pins.patch_sha256)


def _prepare_parent(out: Path) -> None:
    """Create the bundle's parent folder if needed; refuse one that cannot hold it."""
    parent = out.parent if str(out.parent) else Path(".")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"cannot create {parent} for the bundle: {err.strerror or err}") from None
    if not os.access(parent, os.W_OK):
        raise UsageError(f"{parent} is not writable; the bundle cannot be written there")


def prepare_sides(manifest: Manifest, options: RunOptions,
                  progress: Progress | None) -> dict[str, tuple[Side, Path]]:
    """Verified source trees for both sides, by how the manifest pins them; fetches a
    missing pinned wheel when allowed."""
    return _PREPARE_SIDES[manifest.pinned_by](manifest, options, progress)


def _prepare_by_pin_file(manifest: Manifest, options: RunOptions,
                         progress: Progress | None) -> dict[str, tuple[Side, Path]]:
    """Versions 2 and 3: each side from its pin file (``pinned_sides``)."""
    from ..pins.pinned_sides import prepare_pinned_sides

    return prepare_pinned_sides(manifest, cache=cache_root(options.cache),
                                sources=options.sources, patch=options.patch,
                                say=lambda message: _say(progress, message))


def _prepare_inline(manifest: Manifest, options: RunOptions,
                    progress: Progress | None) -> dict[str, tuple[Side, Path]]:
    """Version 1: the wheels pinned inline, which must be this harness's packaged pins."""
    pins = load_pins()
    check_pins_match(manifest, pins, options.patch)
    cache = cache_root(options.cache)
    sides: dict[str, tuple[Side, Path]] = {}
    for name in SIDES:
        if name == "patched" and options.patch is not None:
            continue
        side = pins.side(name)
        if options.sources is None and not (cache / "trees" / side.digest).exists() \
                and verified_wheel(side, cache) is None:
            _say(progress, f"fetching {side.wheel} (pinned sha256 {side.wheel_sha256[:12]}...)")
            fetch_wheel(side, cache)
        sides[name] = (side, resolve_tree(side, cache=cache, sources=options.sources))
    if options.patch is not None:
        patch_bytes = _read(options.patch, "patch")
        declared = manifest.sources
        if sha256_hex(patch_bytes) != declared.get("patch_sha256"):
            raise EvidenceDriftError(f"patch file {options.patch.name} (vs frozen manifest)",
                                     str(declared.get("patch_sha256")),
                                     sha256_hex(patch_bytes))
        side, tree = user_candidate(pins, options.patch, cache=cache, sources=options.sources)
        want = declared["sides"]["patched"]["kernel_sha256"]
        if side.kernel_sha256 != want:
            raise EvidenceDriftError("patched kernel (stock + patch, vs frozen manifest)",
                                     want, side.kernel_sha256)
        sides["patched"] = (side, tree)
    return sides


_PREPARE_SIDES: dict[str, Callable[[Manifest, RunOptions, Progress | None],
                                   dict[str, tuple[Side, Path]]]] = {
    PINNED_INLINE: _prepare_inline,
    PINNED_BY_FILE: _prepare_by_pin_file,
}


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as err:
        raise UsageError(f"cannot read {what} {path}: {err.strerror or err}") from None


# --- after the kernels ----------------------------------------------------------------------


def _side_case_bytes(result: SideResult, case_id: str, logits: bytes, p: bytes,
                     k: bytes | None = None, call: Mapping[str, bytes] | None = None
                     ) -> bytes | str:
    """A side's output bytes for one case, or the failure status that replaces them (the
    child must have hashed exactly the captured logits, p and, when captured, k, and the
    files its call pattern adds: ``call`` maps the evidence key, ``padding_sha256`` or
    ``indices_sha256``, to the captured bytes)."""
    if not result.ok or result.evidence is None:
        return "timeout" if result.status == "timeout" else "kernel_crash"
    record = next((c for c in result.evidence.get("cases", []) if c.get("id") == case_id), None)
    if record is None:
        return "unreadable_output"
    if (record.get("logits_sha256") != sha256_hex(logits)
            or record.get("p_sha256") != sha256_hex(p)
            or (k is not None and record.get("k_sha256") != sha256_hex(k))
            or any(record.get(key) != sha256_hex(data) for key, data in (call or {}).items())):
        return "input_mismatch"
    try:
        data = (result.out_dir / f"{case_id}.out.f32").read_bytes()
    except OSError:
        return "unreadable_output"
    if sha256_hex(data) != record.get("output_sha256"):
        return "unreadable_output"
    return data


def _masked_copy(output: bytes | str, logits: bytes, vocab: int) -> bytes | str:
    """Kept-value integrity before anything is signed: an output whose rows are not all
    masked copies of the input rows (each position -inf or the input's exact bits) is not
    signed as "ok", which ``verify`` would refuse (a binding of every bundle, whatever rule
    set judges it); it is ``unreadable_output`` (it cannot be read as a mask), so every row
    of that case stops, by every rule set. An output of another size is left to the judge
    (``unreadable_output`` too)."""
    from ..core.integrity import first_changed_row

    if isinstance(output, str) or len(output) != len(logits):
        return output
    if first_changed_row(logits, output, vocab, fast=numpy_available()) is not None:
        return "unreadable_output"
    return output


def _split_path_failed(results: Mapping[str, SideResult],
                       dispatch: Mapping[str, Mapping[str, str]]) -> bool:
    """Whether any side recorded a case whose declared path it could not prove, or found
    no such path in its kernel module.

    A side that failed before recording cases is otherwise already a stop (timeout,
    kernel_crash).
    """
    def unproven(evidence: Any, paths: Mapping[str, str]) -> bool:
        recorded = proven_by_case(evidence, paths)
        return not all(recorded[case_id] for case_id in recorded_cases(evidence)
                       if case_id in recorded)

    return any((result.evidence or {}).get("declared_path_missing") is True
               or unproven(result.evidence, dispatch[name])
               for name, result in results.items())


def _pinned_requirements(tree: Path) -> dict[str, str]:
    """What a vLLM release pins for torch and triton (its METADATA), for the receipt."""
    found: dict[str, str] = {}
    for metadata in sorted(tree.glob("vllm-*.dist-info/METADATA")):
        for line in metadata.read_text("utf-8", "replace").splitlines():
            match = re.match(r"Requires-Dist:\s*(torch|triton)\b\s*([^;]*)", line)
            if match and "extra ==" not in line:
                found.setdefault(match.group(1), match.group(2).strip() or "(any)")
    return found


def _environment(results: Mapping[str, SideResult],
                 trees: Mapping[str, Path]) -> dict[str, Any]:
    running: dict[str, Any] = {}
    for name, result in results.items():
        ev = result.evidence or {}
        running[name] = {k: ev.get(k) for k in ("python", "torch", "triton", "device")}
    return {
        "harness_version": __version__,
        "host_python": platform.python_version(),
        "host_platform": platform.platform(terse=True),
        "running": running,
        "pinned_by_vllm": {name: _pinned_requirements(tree) for name, tree in trees.items()},
    }


# --- scratch ------------------------------------------------------------------------------


def scratch_prefix(out: Path) -> str:
    """Scratch folders of a run (and the writer's temporary bundle) live beside the output,
    named ``.<out name>.partial-<pid>-XXXX``: never in a shared /tmp, and recognisable by
    the next run for the same output. The pid is informative only (another PID namespace
    may reuse it): who owns scratch is decided by the output's claim (``claim_output``)."""
    return f".{out.name}.partial-{os.getpid()}-"


def claim_path(out: Path) -> Path:
    parent = out.parent if str(out.parent) else Path(".")
    return parent / f".{out.name}.lock"


@contextmanager
def claim_output(out: Path) -> Iterator[None]:
    """Hold ``--out`` for this run, before any kernel runs: an exclusive ``flock`` on
    ``.<name>.lock`` beside it (kernel-level, so it holds across PID namespaces and
    containers sharing the folder), then ``out`` must not exist. A second run into the same
    ``--out`` is refused at once instead of after its kernels."""
    lock = claim_path(out)
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as err:
        raise UsageError(f"cannot claim {printable(out)}: {printable(lock)}: "
                         f"{err.strerror or err}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise UsageError(f"another run is writing {printable(out)} (it holds "
                             f"{printable(lock)}); give another --out") from None
        if os.path.lexists(out):  # checked under the claim: a finished run's bundle
            raise UsageError(f"{printable(out)} already exists; a run never overwrites a "
                             "bundle")
        yield
    finally:
        # unlinked while still held: a run that opens the old file fails to lock it, one
        # that makes a new file finds the bundle (or no bundle) under its own claim
        with suppress(OSError):
            os.unlink(lock)
        os.close(fd)


def remove_stale_scratch(out: Path) -> list[Path]:
    """Remove what a killed run for ``out`` left beside it: ``.<name>.partial-*`` folders
    not of this process. Call it only under ``claim_output(out)``: no other live run for
    ``out`` can then own scratch, whatever its pid. Returns the folders removed."""
    removed = []
    mine = scratch_prefix(out)
    parent = out.parent if str(out.parent) else Path(".")
    for entry in parent.glob(f".{glob.escape(out.name)}.partial-*"):
        if entry.name.startswith(mine) or not entry.is_dir() or entry.is_symlink():
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed


# --- the run --------------------------------------------------------------------------------


def run_gate(options: RunOptions, *, progress: Progress | None = None,
             row_progress: Callable[[int], None] | None = None,
             on_rows: Callable[[int], None] | None = None) -> RunOutcome:
    started = time.monotonic()
    manifest = load_manifest(options.manifest)  # refuses anything but the frozen bytes
    if os.path.lexists(options.out):
        raise UsageError(f"{options.out} already exists; a run never overwrites a bundle")
    _prepare_parent(options.out)  # fail now, not after the kernels have run
    with claim_output(options.out):
        return _run_claimed(options, manifest, started, progress=progress,
                            row_progress=row_progress, on_rows=on_rows)


def _run_claimed(options: RunOptions, manifest: Manifest, started: float, *,
                 progress: Progress | None, row_progress: Callable[[int], None] | None,
                 on_rows: Callable[[int], None] | None) -> RunOutcome:
    backend = resolve_backend(options.backend, manifest)
    isolation = child_isolation(options.unsandboxed, options.key)
    limits = dict(manifest.limits)
    checked = prepare_sides(manifest, options, progress)
    clock = _Clock(started, started + float(limits["run_timeout_s"]))

    remove_stale_scratch(options.out)
    with tempfile.TemporaryDirectory(prefix=scratch_prefix(options.out),
                                     dir=options.out.parent) as scratch, \
            contextlib.ExitStack() as copies:
        work = Path(scratch)
        # Each side's private copy, made once and hashed after copying, before anything
        # else: what runs (and what the diff and the receipt read) is what was pinned,
        # whatever happens to the checked source trees from now on.
        private = private_copies(checked, copies)
        sides = {name: (side, private[name].tree) for name, (side, _) in checked.items()}
        _say(progress, f"building captured inputs for {len(manifest.cases)} cases")
        write_cases(manifest, work)
        cases_raw = (work / "cases.json").read_bytes()
        layout = check_index(cases_raw, manifest)
        clock.timings["build_cases_s"] = clock.since_start()

        results, run_stops = run_children(manifest, sides, private, backend, work, layout,
                                           clock, repeats=options.repeats, progress=progress,
                                           isolation=isolation)
        # the key is read only now, every child having exited with its namespace
        key = load_private_key(options.key, owner_only=True)
        collected = collect_outputs(manifest, layout, work, results)
        if collected.path_failed:
            run_stops.append("split_path_not_taken")
        rows = _judge(collected.case_bytes, options.workers, clock, progress=progress,
                      row_progress=row_progress, on_rows=on_rows, rules=manifest.rules)
        if time.monotonic() > clock.deadline:
            run_stops.append("run_timeout")
        result = rule_set(manifest.rules).verdict(rows, run_stops)
        content = bundle_content(manifest, backend, sides, cases_raw, layout, collected,
                                 results, rows, run_stops, result, clock)
        _say(progress, f"writing and signing the bundle {options.out}")
        written = write_bundle(options.out, content, key,
                               max_bytes=int(limits["max_bundle_bytes"]))
    return RunOutcome(written, result)


def child_isolation(unsandboxed: bool, key: Path | None) -> Isolation | None:
    """How the kernel children will run, decided before anything runs: in the sandbox
    (None: ``run_side``'s default; refused now, in one line, where none can be made or
    where the sandbox would show the signing key) or, with ``--unsandboxed``, without one.
    The key file is checked by ``stat`` alone: it is opened after the children exit."""
    if key is not None:
        check_key_file(key)
    if unsandboxed:
        return unsandboxed_isolation("--unsandboxed: the children ran as the runner's user, "
                                     "with its files in view")
    require_sandbox()
    if key is not None:
        shown = exposes(key)
        if shown is not None:
            raise UsageError(f"the signing key {printable(key)} lies under "
                             f"{printable(shown)}, which kernel children see (read-only); "
                             "keep it elsewhere")
    return None


def private_copies(checked: Mapping[str, tuple[Side, Path]],
                   copies: contextlib.ExitStack) -> dict[str, PrivateTree]:
    """Each side's private copy, removed when ``copies`` closes. Two sides of a family that
    asks for a stable copy (``Family.stable_copy``) share one when they pin the same files
    (the same bytes at the same paths: its run-time build is made once); every other side
    gets its own."""
    private: dict[str, PrivateTree] = {}
    for name, (side, tree) in checked.items():
        stable = families.get(side.family).stable_copy
        twin = next((private[other] for other, (seen, _) in checked.items()
                     if other in private and stable and seen.family == side.family
                     and dict(seen.files) == dict(side.files)), None)
        private[name] = twin if twin is not None else copies.enter_context(
            private_tree(name, side.files, tree, stable=stable))
    return private


@dataclass
class _Clock:
    """A run's start, its deadline (``run_timeout_s``) and the timings it records."""

    started: float
    deadline: float
    timings: dict[str, Any] = field(default_factory=dict)

    def since_start(self) -> float:
        return round(time.monotonic() - self.started, 3)


class CaseProgress:
    """One line per case (not per side) as the running children write its outputs (each
    child writes ``<case id>.out.f32`` into its folder, case after case): ``run`` watches one
    side at a time, ``pr`` both sides at once."""

    def __init__(self, layout: Sequence[CaseLayout], dirs: Sequence[Path],
                 say: Callable[[str], None], note: str = "") -> None:
        self._layout, self._dirs, self._say, self._note = layout, dirs, say, note
        self._done = threading.Event()
        self._next = 0
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> CaseProgress:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    def _watch(self) -> None:
        while not self._done.wait(0.5):
            self._report()

    def _report(self) -> None:
        total = len(self._layout)
        while self._next < total:
            case = self._layout[self._next]
            name = f"{case.id}.out.f32"  # written in the child's folder, then collected
            if not all((d / name).exists() or (child_output_dir(d) / name).exists()
                       for d in self._dirs):
                return
            self._next += 1
            self._say(f"case {self._next}/{total} {case.id}: done{self._note}")


def _side_say(progress: Progress | None, side: str) -> Callable[[str], None]:
    return lambda line: _say(progress, f"{side}: {line}")


def run_children(manifest: Manifest, sides: Mapping[str, tuple[Side, Path]],
                 private: Mapping[str, PrivateTree], backend: str, work: Path,
                 layout: Sequence[CaseLayout], clock: _Clock, *, repeats: int,
                 progress: Progress | None, isolation: Isolation | None = None
                 ) -> tuple[dict[str, SideResult], list[str]]:
    """One kernel child per side, in order, each within what is left of the run's time,
    importing from the side's private copy. Returns each side's result and the run stops
    so far (``run_timeout``)."""
    limits = manifest.limits
    num_sm = int(manifest.backend.get("interpreter_sm_count", DEFAULT_NUM_SM))
    results: dict[str, SideResult] = {}
    run_stops: list[str] = []
    for name in SIDES:
        side, _ = sides[name]
        remaining = clock.deadline - time.monotonic()
        timeout = min(float(limits["child_timeout_s"]), remaining)
        if timeout <= 0:
            run_stops.append("run_timeout")
            timeout = 0.001  # the child is started and killed: recorded as timeout
        _say(progress, f"{name}: vLLM {printable(side.version)} on {backend} "
                       f"({len(layout)} cases, timeout {timeout:.0f} s)")
        t0 = time.monotonic()
        with CaseProgress(layout, [work / "out" / name], _side_say(progress, name)):
            results[name] = run_side(side, private[name], backend, num_sm,
                                     work / "cases.json", work / "out" / name, timeout,
                                     repeats=repeats, dispatch=manifest.dispatch(name),
                                     paths=manifest.case_dispatch(name), isolation=isolation)
        clock.timings[f"{name}_s"] = round(time.monotonic() - t0, 3)
        if not results[name].ok:
            _say(progress, f"{name}: {results[name].status}: "
                           f"{printable(results[name].reason)}")  # the child's own words
    return results, run_stops


@dataclass(frozen=True)
class CollectedOutputs:
    """What the children left, per case: captured inputs, each side's output bytes (or the
    failure status replacing them), the dispatch path each side proved, and the judge's
    input. ``path_failed``: some side did not prove its declared path."""

    inputs: dict[str, bytes]
    outputs: dict[str, dict[str, bytes | str]]
    split_path: dict[str, bool]
    paths: dict[str, dict[str, str | None]]
    case_bytes: list[CaseBytes]
    path_failed: bool


def collect_outputs(manifest: Manifest, layout: Sequence[CaseLayout], work: Path,
                    results: Mapping[str, SideResult]) -> CollectedOutputs:
    dispatch = {name: manifest.case_dispatch(name) for name in SIDES}
    inputs: dict[str, bytes] = {}
    outputs: dict[str, dict[str, bytes | str]] = {name: {} for name in SIDES}
    split_path: dict[str, bool] = {}
    paths: dict[str, dict[str, str | None]] = {}
    case_bytes: list[CaseBytes] = []
    proven = {name: proven_by_case(results[name].evidence, dispatch[name]) for name in SIDES}
    for case in layout:
        logits = (work / case.logits_path).read_bytes()
        p = (work / case.p_path).read_bytes()
        k = (work / case.k_path).read_bytes() if case.k_path is not None else None
        inputs[case.logits_path], inputs[case.p_path] = logits, p
        if case.k_path is not None and k is not None:
            inputs[case.k_path] = k
        call = {key: (work / rel).read_bytes() for key, rel in
                (("padding_sha256", case.padding_path), ("indices_sha256", case.indices_path))
                if rel is not None}
        inputs.update({rel: call[key] for key, rel in
                       (("padding_sha256", case.padding_path),
                        ("indices_sha256", case.indices_path)) if rel is not None})
        for name in SIDES:
            outputs[name][case.id] = _masked_copy(
                _side_case_bytes(results[name], case.id, logits, p, k, call), logits,
                case.vocab)
        paths[case.id] = {n: dispatch[n][case.id] if proven[n].get(case.id, False) else None
                          for n in SIDES}
        split_path[case.id] = all(paths[case.id][n] == SPLIT for n in SIDES)
        case_bytes.append(CaseBytes(
            case.id, case.vocab,
            [RowSpec(r.judge, r.forced_id, r.label) for r in case.rows],
            logits, p, outputs["stock"][case.id], outputs["patched"][case.id],
            split_path[case.id],
            split_sides=(tuple(paths[case.id][n] == SPLIT for n in SIDES)  # type: ignore[arg-type]
                         if manifest.receipt_paths else None), k=k,
            draws=case_draws({n: results[n].evidence for n in SIDES}, case.id)))
    return CollectedOutputs(inputs, outputs, split_path, paths, case_bytes,
                            _split_path_failed(results, dispatch))


def _judge(case_bytes: Sequence[CaseBytes], workers: int, clock: _Clock, *,
           progress: Progress | None, row_progress: Callable[[int], None] | None,
           on_rows: Callable[[int], None] | None, rules: str) -> list[dict[str, Any]]:
    """Every row against the binary64 oracle and the gate's rules."""
    total_rows = sum(c.batch for c in case_bytes)
    if on_rows is not None:
        on_rows(total_rows)
    _say(progress, f"judging {total_rows} rows against the binary64 oracle")
    t0 = time.monotonic()
    rows = judge_cases(case_bytes, workers=worker_count(workers),
                       fast=numpy_available(), progress=row_progress, rules=rules)
    clock.timings["judge_s"] = round(time.monotonic() - t0, 3)
    return rows


def bundle_content(manifest: Manifest, backend: str, sides: Mapping[str, tuple[Side, Path]],
                   cases_raw: bytes, layout: Sequence[CaseLayout], collected: CollectedOutputs,
                   results: Mapping[str, SideResult], rows: list[dict[str, Any]],
                   run_stops: list[str], result: dict[str, Any],
                   clock: _Clock, signing: str = "persistent") -> BundleContent:
    """Everything the writer signs: artifacts, evidence, reports and the run's record."""
    evidence = {name: json.dumps(r.evidence or {"status": r.status, "reason": r.reason},
                                 indent=2, sort_keys=True).encode() + b"\n"
                for name, r in results.items()}
    # the report reads the evidence exactly as the receipt will record it (verify
    # regenerates report.md from the receipt's copy and requires the same bytes)
    reports = _reports(manifest, backend, rows, result,
                       {name: json.loads(data) for name, data in evidence.items()}, cases_raw)
    clock.timings["total_s"] = clock.since_start()
    return BundleContent(
        manifest=manifest.raw,
        cases=cases_raw,
        case_ids=[c.id for c in layout],
        inputs=collected.inputs,
        outputs=collected.outputs,
        evidence=evidence,
        split_path=collected.split_path,
        rows=rows,
        run_stops=sorted(set(run_stops)),
        verdict=result,
        sources={name: side.describe() for name, (side, _) in sides.items()},
        patch_sha256=_change_sha256(manifest, sides),
        paths=collected.paths if manifest.receipt_paths else None,
        environment={**_environment(results, {n: t for n, (_, t) in sides.items()}),
                     "backend": backend,
                     "isolation": {n: r.isolation.record() for n, r in results.items()},
                     "signing": {"key": signing},
                     "side_results": {n: {"status": r.status, "reason": r.reason,
                                          "returncode": r.returncode}
                                      for n, r in results.items()}},
        timings=clock.timings,
        limits=dict(manifest.limits),
        reports=reports,
        harness_source=source_revision(),
        judgement={"rules": manifest.rules, "report": DEFAULT_REPORT},
    )


def _change_sha256(manifest: Manifest, sides: Mapping[str, tuple[Side, Path]]) -> str:
    """The receipt's ``hashes.patch``: the change the manifest freezes (version 1's
    ``patch_sha256``; ``prepare_sides`` refused a version 1 run without it), else the frozen
    patch of the side that has one, else the sha256 of the kernel diff between the two sides
    (``sources.kernel_diff``: the change under test)."""
    if manifest.patch_sha256 is not None:
        return manifest.patch_sha256
    for name in SIDES:
        frozen = manifest.side_patch(name)
        if frozen is not None:
            return frozen["sha256"]
    stock, patched = (sides[name] for name in SIDES)
    diff = kernel_diff((stock[1] / stock[0].kernel_path).read_bytes(),
                       (patched[1] / patched[0].kernel_path).read_bytes(), stock[0].kernel_path)
    return sha256_hex(diff)


def _reports(manifest: Manifest, backend: str, rows: list[dict[str, Any]],
             result: dict[str, Any], evidence: Mapping[str, Any],
             cases_raw: bytes) -> dict[str, bytes]:
    from ..core.report import ReportInputs, render_markdown
    from .report_png import render_png

    inputs = ReportInputs(manifest_name=manifest.name, backend=backend, rows=rows,
                          verdict=result,
                          evidence=dict(evidence),
                          cases=json.loads(cases_raw), rules=manifest.rules)
    reports = {"report.md": render_markdown(inputs, DEFAULT_REPORT).encode("utf-8")}
    try:
        reports["report.png"] = render_png(inputs)
    except ImportError:
        print("topp-gate: matplotlib is not installed; the bundle has no report.png",
              file=sys.stderr)
    return reports
