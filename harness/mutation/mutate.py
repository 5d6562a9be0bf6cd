"""``topp-gate mutate``: mutation-test the gate itself (issue 20).

A gate is worth what it catches. From a frozen manifest (both sides pinned; the PR matrices
under ``evidence/manifests/pr/`` pin vLLM 0.33.0 on both) and optionally the patch under
review, this module writes one *mutant* of the patched side's kernel file per entry of a
documented catalogue (:data:`CATALOGUE`, id :data:`CATALOGUE_ID`), each as a unified diff
against the pinned kernel (``sources.kernel_diff``, applied by the strict applier
``sources.apply_patch`` exactly as ``run --patch`` applies it), freezes one manifest per
mutant with ``manifest new`` (the frozen manifest's matrix with the mutant's patch on the
patched side), runs the gate on each (several at once), verifies every bundle
(:func:`harness.core.verify.verify_bundle`), and writes a signed summary. The base runs
first: its verified stock side is kept and every mutant's run
(:mod:`harness.mutation.mutant_run`, ``topp-gate pr``'s phases) carries it instead of running
it again; ``reuse_base=False`` (``--no-base-reuse``) runs ``topp-gate run --patch`` for each.

``mutation.json``
    schema :data:`SUMMARY_SCHEMA`: the catalogue id, the frozen manifest's sha256, the base
    run (the unmutated patched side: it must PASS under ``regression/v1``), and per mutant
    its diff's sha256 and size, its manifest's sha256, its bundle path, the sha256 of the
    bundle's signed payload (what ``verify`` returns as ``payload_sha256``), the verified
    verdict, killed (verdict STOP) or survived, the stopped rows with their reasons, and
    vLLM's own criterion (:mod:`harness.mutation.vllm_criterion`) on the same bytes; the
    kill rates of both. Survivors are listed, smallest diff first, never dropped.
``mutation.dsse.json``
    a DSSE envelope (payload type :data:`SUMMARY_PAYLOAD_TYPE`) over ``mutation.json``'s
    bytes, signed with the key that signed the bundles; :func:`check_summary` re-verifies it
    and every bundle's payload digest against it.

The catalogues (:mod:`harness.mutation.mutant_catalogue`; kinds: comparison flips in keep
predicates, off-by-one in budgets and bounds, dropped clauses, changed search constants,
precision changes) are immutable by id: ``topp-gate/mutants/v1`` targets vLLM 0.33.0's split
top-p pipeline (``_topp_sb_*`` kernels); ``topp-gate/mutants/v2`` (the default) adds the
monolithic kernel ``_topk_topp_kernel`` and the dispatch, each entry naming its target and
principle; ``topp-gate/mutants/pytorch-v1`` mutates vLLM's PyTorch path
(``topk_topp_sampler.py``, family ``vllm-pytorch``); ``topp-gate/mutants/flashinfer-v1``
FlashInfer 0.7.2.post1's CUDA headers (family ``flashinfer``, issue 39). ``KERNEL_PATHS``
names each catalogue's kernel file, which must be the patched side's pinned kernel file; an
entry mutates that file or the pinned file its ``path`` names (each mutant is a diff of one
file of the pinned set, frozen with that file's path and hash). Each entry
names one line by its exact text (and which of several equal lines), so a mutant either
applies exactly or is refused; the summary records the catalogue id. Every
mutant keeps the module importable (``ast`` parses it before it is written); a mutant Triton
cannot compile records ``kernel_crash`` in a signed bundle and counts as killed, shown as such.
"""

from __future__ import annotations

import ast
import json
import lzma
import os
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.digest import sha256_hex
from ..core.errors import UsageError
from ..core.keys import keyid
from ..core.manifest import load_manifest
from .mutant_catalogue import (
    CATALOGUES,
    DEFAULT_ID,
    KERNEL_PATHS,
    TRITON_PATH,
    Mutation,
    mutation_path,
)
from .mutant_catalogue import KINDS as KINDS  # re-exported
from .summary_format import SUMMARY_PAYLOAD_TYPE, SUMMARY_SCHEMA

KERNEL_PATH = TRITON_PATH  # the Triton catalogues' file; each catalogue's is KERNEL_PATHS

# the default catalogue (``--catalogue``'s default); every known one is in CATALOGUES
CATALOGUE_ID = DEFAULT_ID
CATALOGUE: tuple[Mutation, ...] = CATALOGUES[CATALOGUE_ID]


def catalogue(only: Sequence[str] | None = None,
              catalogue_id: str = CATALOGUE_ID) -> list[Mutation]:
    """The entries of catalogue ``catalogue_id``, or those ``only`` names (an unknown
    catalogue or mutant id is refused)."""
    entries = CATALOGUES.get(catalogue_id)
    if entries is None:
        raise UsageError(f"unknown mutant catalogue {catalogue_id!r} (known: "
                         f"{', '.join(CATALOGUES)})")
    if not only:
        return list(entries)
    known = {m.id: m for m in entries}
    missing = [name for name in only if name not in known]
    if missing:
        raise UsageError(f"unknown mutant {missing[0]!r} in {catalogue_id} (see "
                         "'topp-gate mutate --list')")
    return [known[name] for name in only]


def mutate(kernel: bytes, mutation: Mutation, path: str = ".py") -> bytes:
    """The file with ``mutation`` applied to exactly the line(s) it names; refused when the
    line is not there (another release), or, for a Python file (``path``), when the result
    does not parse. A CUDA header is not parsed here (no nvcc): each such entry is one
    syntactically trivial replacement, compiled on the device machine
    (``scripts/device_fi_mutants_build.sh``)."""
    lines = kernel.decode("utf-8").splitlines(keepends=True)
    hits = [i for i, line in enumerate(lines) if mutation.old in line]
    if mutation.occurrence > len(hits) or not hits:
        raise UsageError(f"mutant {mutation.id}: line {mutation.old!r} (occurrence "
                         f"{mutation.occurrence}) is not in this kernel")
    targets = hits if mutation.occurrence == 0 else [hits[mutation.occurrence - 1]]
    for i in targets:
        lines[i] = lines[i].replace(mutation.old, mutation.new, 1)
    text = "".join(lines)
    if path.endswith(".py"):
        try:
            ast.parse(text)
        except SyntaxError as err:
            raise UsageError(f"mutant {mutation.id} does not parse: {err.msg}") from None
    return text.encode("utf-8")


def mutant_diff(pinned: bytes, base: bytes, mutation: Mutation,
                kernel_path: str = KERNEL_PATH) -> bytes:
    """The unified diff of ``kernel_path`` from the pinned kernel to ``base`` (the kernel
    under review: the pinned one, or it with the PR's patch) with ``mutation`` applied,
    re-applied with the strict applier to prove it gives exactly those bytes."""
    from ..pins.sources import apply_patch, kernel_diff

    mutated = mutate(base, mutation, kernel_path)
    diff = kernel_diff(pinned, mutated, kernel_path)
    if apply_patch(pinned, diff, kernel_path) != mutated:
        raise UsageError(f"mutant {mutation.id}: its diff does not reproduce it")
    return diff


# --- one mutation run -----------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    manifest: Path  # the frozen PR manifest (regression/v1; no patch, or the PR's patch)
    out: Path
    key: Path
    backend: str = "auto"
    sources: Path | None = None
    cache: Path | None = None
    patch: Path | None = None  # the PR's patch on the patched side (frozen in the manifest)
    jobs: int = 2
    only: tuple[str, ...] = ()
    run_timeout_s: int = 3600
    vllm_criterion: bool = True
    vllm_sampler: Path | None = None  # vLLM 0.33.0's topk_topp_sampler.py (else the wheel)
    catalogue: str = CATALOGUE_ID  # a key of CATALOGUES; recorded in the summary
    reuse_base: bool = True  # the base run first; every mutant reuses its verified base side


def _python() -> list[str]:
    return [sys.executable, "-m", "harness"]


def _kernel_bytes(options: Options) -> tuple[Callable[[str], tuple[bytes, bytes]], Any]:
    """For the manifest's patched side: a function from a pinned file's path to (the pinned
    file, the file under review: with the PR's patch when it changes that file), and the
    manifest. A mutant's diff is of one file, so a mutant of another file than the one the
    PR's patch changes is refused."""
    from ..pins.pinned_sides import pinned_side
    from ..pins.sources import apply_side_patch, cache_root, resolve_tree

    manifest = load_manifest(options.manifest)
    side = pinned_side(manifest, "patched")
    tree = resolve_tree(side, cache=cache_root(options.cache), sources=options.sources)
    path = KERNEL_PATHS[options.catalogue]
    if side.kernel_path != path:
        fits = [c for c, p in KERNEL_PATHS.items() if p == side.kernel_path]
        raise UsageError(f"the catalogue {options.catalogue} mutates {path}, not "
                         f"{side.kernel_path}"
                         + (f" (use --catalogue {fits[-1]})" if fits else ""))
    reviewed: tuple[str, bytes] | None = None
    if options.patch is not None:
        reviewed = apply_side_patch(side, tree, options.patch.read_bytes())

    def files(rel: str) -> tuple[bytes, bytes]:
        if rel not in side.files:
            raise UsageError(f"a mutant of {rel}: not a file of the patched side's pinned set")
        pinned = (tree / rel).read_bytes()
        if reviewed is None:
            return pinned, pinned
        if reviewed[0] != rel:
            raise UsageError(f"the patch under review changes {reviewed[0]}; a mutant of "
                             f"{rel} would make a diff of two files (use --only with "
                             f"mutants of {reviewed[0]})")
        return pinned, reviewed[1]

    return files, manifest


def _mutant_manifest(manifest: Any, diff_path: Path, out: Path, options: Options) -> Path:
    """The frozen manifest's matrix with the mutant's patch on the patched side, frozen by
    ``manifest new`` (same pins, same dispatch paths, same cases, limits and rules)."""
    from ..capture.manifest_new import SideSpec, new_manifest

    data = manifest.data
    matrix = {"schema": "topp-gate/matrix/v1",
              "description": f"Mutant {diff_path.stem} of {manifest.name}: "
                             + str(data["description"]),
              "backend": data["backend"], "limits": data["limits"], "cases": data["cases"]}
    if "rules" in data:
        matrix["rules"] = data["rules"]
    matrix_path = out.with_name(out.stem + ".matrix.json")
    matrix_path.write_text(json.dumps(matrix, indent=1) + "\n", encoding="utf-8")
    sides = {name: SideSpec(manifest.pin_path(name),
                            dispatch=str(data["sources"]["sides"][name]["dispatch"]),
                            patch=diff_path if name == "patched" else None)
             for name in ("stock", "patched")}
    try:
        return new_manifest(sides, str(matrix_path), out, cache=options.cache)
    finally:
        matrix_path.unlink(missing_ok=True)


def _run_one(name: str, manifest: Path, patch: Path | None, options: Options,
             log: Path, store: Path | None) -> int:
    """One gate run in a process of its own: ``topp-gate run``, or with a base store
    (``reuse_base``) :mod:`harness.mutation.mutant_run`, whose bundle carries the base run's
    verified base side instead of running it again (the base run keeps it)."""
    bundle = options.out / "bundles" / name
    if store is None:
        cmd = [*_python(), "run", "--workers", "1"]
    else:
        cmd = [sys.executable, "-m", "harness.mutation.mutant_run", "--base-store", str(store),
               "--public-key", str(options.out / "signer.pub")]
        if name == "base":
            cmd.append("--keep-base")
        elif (options.out / "bundles" / "base").is_dir():
            # the base's verified inputs, not built again: the same cases (reused_inputs)
            cmd += ["--inputs-from", str(options.out / "bundles" / "base")]
    cmd += ["--manifest", str(manifest), "--backend", options.backend,
            "--out", str(bundle), "--key", str(options.key)]
    if patch is not None:
        cmd += ["--patch", str(patch)]
    if options.sources is not None:
        cmd += ["--sources", str(options.sources)]
    if options.cache is not None:
        cmd += ["--cache", str(options.cache)]
    with log.open("wb") as handle:
        try:
            done = subprocess.run(cmd, stdout=handle, stderr=subprocess.STDOUT,  # noqa: S603
                                  timeout=options.run_timeout_s, check=False,
                                  env={**os.environ, "PYTHONUNBUFFERED": "1"})
        except subprocess.TimeoutExpired:
            return 124
    return done.returncode


def _stopped_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"row": f"{r['case']}[{r['row']}]", "stops": r["stops"]} for r in rows if r["stops"]]


def _judged(name: str, options: Options, public_key: Any, manifest: Path) -> dict[str, Any]:
    """Verify one bundle offline and read what the summary records of it."""
    from ..core.errors import HarnessError
    from ..core.verify import open_bundle, verify_bundle
    from .row_memo import process_memo

    bundle = options.out / "bundles" / name
    if not bundle.is_dir():
        return {"bundle": None, "verified": False, "error": "no bundle was written"}
    try:
        # two worker processes: the rerun leaves the thread (and its GIL) to the others; the
        # rows a mutant left as the base's are recalled from this process's memo
        verified = verify_bundle(bundle, public_key, frozen_manifest=manifest, workers=2,
                                 row_memo=process_memo())
    except HarnessError as err:
        return {"bundle": _rel(bundle, options.out), "verified": False, "error": str(err)}
    view = open_bundle(bundle, public_key)
    rows = view.statement["predicate"]["rows"]
    entry: dict[str, Any] = {
        "bundle": _rel(bundle, options.out), "verified": True,
        "payload_sha256": verified.payload_sha256, "verdict": verified.verdict,
        "stopped_rows": _stopped_rows(rows),
        "run_stops": view.statement["predicate"]["run_stops"],
    }
    if options.vllm_criterion:
        from .vllm_criterion import criterion_of_bundle

        entry["vllm_criterion"] = criterion_of_bundle(view, options)
    return entry


def _rel(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()


def one_at_a_time(say: Callable[[str], None]) -> Callable[[str], None]:
    """``say`` behind a lock: the runs' threads report as they end, and a ``say`` that writes
    a line in two writes (``print``: the text, then its newline) would otherwise let two
    reports share a line (seen in an H200 log: two "verified" lines run together)."""
    lock = threading.Lock()

    def locked(message: str) -> None:
        with lock:
            say(message)
    return locked


def run_mutation(options: Options, say: Callable[[str], None] = lambda _m: None
                 ) -> dict[str, Any]:
    """Write every mutant, its manifest and bundle, the signed summary; return the summary."""
    from ..capture.signing import load_private_key, public_pem, sign

    say = one_at_a_time(say)  # one() below reports from the pool's threads

    if options.out.exists():
        raise UsageError(f"{options.out} already exists; a mutation run never overwrites")
    mutations = catalogue(options.only, options.catalogue)  # refused before any work
    # the key's public half now; the key itself again only once every run has ended
    public_key = load_private_key(options.key).public_key()
    files, manifest = _kernel_bytes(options)
    if manifest.rules != "regression/v1":
        say(f"note: {manifest.name} is judged by {manifest.rules}, not regression/v1")
    for sub in ("mutants", "manifests", "bundles", "logs"):
        (options.out / sub).mkdir(parents=True)
    (options.out / "signer.pub").write_bytes(public_pem(public_key))
    jobs: list[tuple[str, Path, Path | None, Mutation | None]] = [
        ("base", options.manifest, options.patch, None)]
    for mutation in mutations:
        path = mutation_path(options.catalogue, mutation)
        pinned, base = files(path)
        diff = mutant_diff(pinned, base, mutation, path)
        diff_path = options.out / "mutants" / f"{mutation.id}.diff"
        diff_path.write_bytes(diff)
        mpath = _mutant_manifest(manifest, diff_path,
                                 options.out / "manifests" / f"{mutation.id}.json", options)
        jobs.append((mutation.id, mpath, diff_path, mutation))
    say(f"{len(jobs) - 1} mutants and the base, {options.jobs} runs at once")

    store_folder = (tempfile.TemporaryDirectory(prefix=f".{options.out.name}.base-side-",
                                                dir=options.out.parent)
                    if options.reuse_base else None)
    store = None if store_folder is None else Path(store_folder.name)

    def one(job: tuple[str, Path, Path | None, Mutation | None]) -> dict[str, Any]:
        # run, then verify at once: each bundle is verified while other runs go on (the
        # oracle rerun in worker processes, so the verifications of several threads overlap)
        name, mpath, patch, mutant = job
        started = time.monotonic()
        code = _run_one(name, mpath, patch, options, options.out / "logs" / f"{name}.log",
                        store)
        ran_s = time.monotonic() - started
        entry: dict[str, Any] = {"id": name, "run_exit": code,
                                 "manifest": _manifest_ref(mpath, options.out)}
        if mutant is not None and patch is not None:
            diff = patch.read_bytes()
            entry.update({"kind": mutant.kind, "what": mutant.what,
                          "diff": _rel(patch, options.out), "diff_sha256": sha256_hex(diff),
                          "diff_lines": _changed_lines(diff)})
        entry.update(_judged(name, options, public_key, mpath))
        # the seconds say where a GPU call's time went (the run, then its verification)
        say(f"{name}: run exit {code} after {ran_s:.0f} s, "
            + (f"verified {entry['verdict']['verdict']}" if entry.get("verified")
               else "not verified")
            + f" after {time.monotonic() - started - ran_s:.0f} s more")
        return entry

    try:
        if store is None:
            with ThreadPoolExecutor(max_workers=max(1, options.jobs)) as pool:
                entries = list(pool.map(one, jobs))  # in job order, whatever the finish
        else:
            # the base first, alone: the mutants then run only their patched side
            say("the base runs first; each mutant reuses its verified base side")
            entries = [one(jobs[0])]
            with ThreadPoolExecutor(max_workers=max(1, options.jobs)) as pool:
                entries += list(pool.map(one, jobs[1:]))
    finally:
        if store_folder is not None:
            store_folder.cleanup()
    summary = summarize(entries, manifest, options)
    raw = (json.dumps(summary, indent=1, sort_keys=True) + "\n").encode("utf-8")
    (options.out / "mutation.json").write_bytes(raw)
    private = load_private_key(options.key)
    if keyid(private.public_key()) != keyid(public_key):
        raise UsageError(f"{options.key} changed during the mutation run; the summary is not "
                         "signed")
    envelope = sign(raw, private, SUMMARY_PAYLOAD_TYPE)
    (options.out / "mutation.dsse.json").write_text(json.dumps(envelope, indent=1) + "\n",
                                                    encoding="utf-8")
    return summary


def _manifest_ref(path: Path, root: Path) -> dict[str, str]:
    raw = path.read_bytes()
    try:
        shown = _rel(path.resolve(), root.resolve())
    except ValueError:
        shown = path.as_posix()
    return {"path": shown, "sha256": sha256_hex(raw)}


def _changed_lines(diff: bytes) -> int:
    return sum(1 for line in diff.splitlines()
               if line[:1] in (b"+", b"-") and not line.startswith((b"+++", b"---")))


def _killed(entry: dict[str, Any]) -> bool | None:
    """True when the verified verdict is STOP; None when nothing verified (reported)."""
    if not entry.get("verified"):
        return None
    return bool(entry["verdict"]["verdict"] == "STOP")


def summarize(entries: list[dict[str, Any]], manifest: Any, options: Options) -> dict[str, Any]:
    base = entries[0]
    mutants = entries[1:]
    for entry in mutants:
        entry["killed"] = _killed(entry)
        if entry.get("vllm_criterion") is not None:
            entry["vllm_killed"] = entry["vllm_criterion"]["killed"]
    killed = [m for m in mutants if m["killed"]]
    survivors = sorted((m for m in mutants if m["killed"] is False),
                       key=lambda m: (m["diff_lines"], m["id"]))
    vllm_scored = [m for m in mutants if "vllm_killed" in m]
    return {
        "schema": SUMMARY_SCHEMA,
        "catalogue": options.catalogue,
        "manifest": {"name": manifest.name, "sha256": sha256_hex(options.manifest.read_bytes()),
                     "rules": manifest.rules},
        "backend": options.backend,
        "base": base,
        "base_passes": _killed(base) is False,
        "mutants": mutants,
        "kill_rate": {"gate": {"killed": len(killed), "of": len(mutants)},
                      "vllm_criterion": {"killed": sum(1 for m in vllm_scored
                                                       if m["vllm_killed"]),
                                         "of": len(vllm_scored)}},
        "survivors": [m["id"] for m in survivors],
        "unverified": [m["id"] for m in mutants if m["killed"] is None],
    }


MAX_ARCHIVE_MEMBERS = 20000
MAX_ARCHIVE_BYTES = 1 << 30  # uncompressed, all members together


@contextmanager
def mutation_folder(path: Path) -> Iterator[Path]:
    """A mutation folder, or one committed as a ``.tar.xz`` of it (its bundles repeat their
    captured inputs; xz stores them once): the archive is read whole first and refused unless
    every member is a regular file or folder under one top-level folder, with a relative
    name, no ``..``, at most :data:`MAX_ARCHIVE_MEMBERS` members and
    :data:`MAX_ARCHIVE_BYTES` declared bytes; then each member is written by hand (no mode,
    owner or time taken from the archive) into a temporary folder, removed afterwards.
    Nothing is trusted for being extracted: :func:`check_summary` verifies what it holds."""
    if path.is_dir():
        yield path
        return
    if not path.name.endswith(".tar.xz") or not path.is_file():
        raise UsageError(f"{path}: not a mutation folder or a .tar.xz of one")
    try:
        with tarfile.open(path, mode="r:xz") as archive:
            members = archive.getmembers()
            _check_members(path, members)
            with tempfile.TemporaryDirectory(prefix="topp-gate-mutation-") as tmp:
                _extract(archive, members, Path(tmp))
                yield Path(tmp) / members[0].name.split("/")[0]
    except (tarfile.TarError, lzma.LZMAError, EOFError) as err:
        raise UsageError(f"{path}: not a readable .tar.xz ({err})") from None


def _extract(archive: tarfile.TarFile, members: list[tarfile.TarInfo], into: Path) -> None:
    """Checked members only, written by hand (no mode, owner or time from the archive; a
    file never overwrites, never follows a link): the same on every Python 3.11."""
    for member in members:
        target = into.joinpath(*member.name.split("/"))
        if member.isdir():
            target.mkdir(mode=0o755, parents=True, exist_ok=True)
            continue
        target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        source = archive.extractfile(member)
        if source is None:  # pragma: no cover - a checked regular member always has data
            raise UsageError(f"member {member.name!r} has no data")
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o644)
        with os.fdopen(fd, "wb") as out, source:
            while chunk := source.read(1 << 20):
                out.write(chunk)


def _check_members(path: Path, members: list[tarfile.TarInfo]) -> None:
    if not members or len(members) > MAX_ARCHIVE_MEMBERS:
        raise UsageError(f"{path}: {len(members)} members (1 to {MAX_ARCHIVE_MEMBERS})")
    tops = {m.name.split("/")[0] for m in members}
    if len(tops) != 1:
        raise UsageError(f"{path}: members under {len(tops)} top-level names (one folder)")
    total = 0
    for member in members:
        parts = member.name.split("/")
        if member.name.startswith("/") or ".." in parts or "" in parts[:-1]:
            raise UsageError(f"{path}: member name {member.name!r} is not a plain relative "
                             "path")
        if not (member.isreg() or member.isdir()):
            raise UsageError(f"{path}: member {member.name!r} is not a regular file or a "
                             "folder (links, devices and FIFOs are refused)")
        total += member.size
    if total > MAX_ARCHIVE_BYTES:
        raise UsageError(f"{path}: declares {total} bytes, over {MAX_ARCHIVE_BYTES}")


# --- checking a summary: harness/mutation/mutation_check.py (every claim recomputed) ---------

MAX_SUMMARY_BYTES = 16 << 20


def summary_path(folder: Path, shown: Any) -> Path:
    """Re-export of :func:`harness.mutation.mutation_check.summary_path`."""
    from .mutation_check import summary_path as checked_path

    return checked_path(folder, shown)


def summary_id(shown: Any) -> str:
    """Re-export of :func:`harness.mutation.mutation_check.summary_id`."""
    from .mutation_check import summary_id as checked_id

    return checked_id(shown)


def check_summary(folder: Path, public_key: Any, *, roots: Sequence[Path] = (),
                  progress: Callable[[str], None] | None = None,
                  workers: int | None = 1) -> dict[str, Any]:
    """Re-export of :func:`harness.mutation.mutation_check.check_summary`: the signature,
    every bundle, and every claim of the summary recomputed from them."""
    from .mutation_check import check_summary as check

    return check(folder, public_key, roots=roots, progress=progress, workers=workers)
