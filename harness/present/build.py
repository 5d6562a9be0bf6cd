"""Find the evidence under a folder, verify each piece once, and build the model.

Each bundle folder (and each bundle inside a committed ``.tar.xz``) and each mutation run is
one task in a process pool; a task verifies with the trusted core and returns only model
values (:mod:`harness.present.model`). A progress line per finished task goes to the
``progress`` callable (the CLI writes them to stderr).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import HarnessError, UsageError
from ..core.terminal import printable
from .model import (
    BUNDLE_GLOBS,
    MUTATION_GLOBS,
    BundleModel,
    Evidence,
    Mutant,
    MutationRun,
    RefusedBundle,
    RefusedRun,
    bundle_model,
)

if TYPE_CHECKING:
    from .record import Recorded


@dataclass(frozen=True)
class Task:
    kind: str  # "bundle", "archive" (a .tar.xz of bundles) or "mutation"
    path: Path
    shown: str  # the path as pages show it (relative to the evidence folder's parent)
    group: str
    # the key file verdicts.tsv names for the bundle, else None: each trusted key in turn.
    # A record, never a grant of trust: it only picks among the trusted keys (the project
    # keys and --pubkey), and a file that is none of them leaves the bundle refused.
    recorded: Path | None


def discover(evidence: Path, *, mutations: bool = True,
             record: dict[str, Recorded] | None = None) -> list[Task]:
    """Every bundle and mutation run under ``evidence`` (the committed layout), with the key
    file ``evidence/verdicts.tsv`` names for a bundle where it names one (``record``: that
    file as the caller already read it). The file named is only held against the trusted
    keys (:mod:`harness.present.verified`), never trusted for being named."""
    from .record import RECORD, read_record

    if not evidence.is_dir():
        raise UsageError(f"no evidence folder at {printable(evidence)}")
    root = evidence.resolve().parent
    if record is None:
        table = evidence / RECORD
        record = read_record(table) if table.is_file() else {}
    keys = {(root / path).resolve(): root / line.key for path, line in record.items()}
    tasks: list[Task] = []
    for group, patterns in BUNDLE_GLOBS.items():
        for pattern in patterns:
            for path in sorted(evidence.glob(pattern)):
                shown = _shown(path, root)
                if path.is_dir() and (path / "receipt.dsse.json").exists():
                    tasks.append(Task("bundle", path, shown, group, keys.get(path.resolve())))
                elif path.is_file() and path.name.endswith(".tar.xz"):
                    tasks.append(Task("archive", path, shown, group, None))
    if mutations:
        for pattern in MUTATION_GLOBS:
            for path in sorted(evidence.glob(pattern)):
                if path.is_file() or (path / "mutation.json").exists():
                    tasks.append(Task("mutation", path, _shown(path, root), "mutation", None))
    return tasks


def _shown(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


Result = BundleModel | RefusedBundle | MutationRun | RefusedRun


def run_task(task: Task, extra_keys: Sequence[bytes] = (), lines: Any = None) -> list[Result]:
    """One task in a worker: verify, then model (never raises a HarnessError). ``lines``:
    a queue for progress lines from inside a long task (a mutation run's bundles)."""
    keys = [_key(k) for k in extra_keys]
    if task.kind == "bundle":
        return [_bundle(task.path, task.shown, task.group, task.recorded, keys)]
    if task.kind == "archive":
        return _archive(task, keys)
    say: Callable[[str], None] = (lambda _l: None) if lines is None else lines.put
    return [_mutation(task, keys, say)]


def _key(pem: bytes) -> Any:
    from cryptography.hazmat.primitives import serialization

    return serialization.load_pem_public_key(pem)


def _bundle(path: Path, shown: str, group: str, recorded: Path | None, keys: list[Any],
            frozen: Path | None = None, archive: str | None = None
            ) -> BundleModel | RefusedBundle:
    from .verified import Refused, checked

    result = checked(path, recorded=recorded, extra_keys=keys, frozen_manifest=frozen)
    if isinstance(result, Refused):
        return RefusedBundle(shown, group, result.code, result.reason, archive)
    try:
        return bundle_model(path, shown, group, result, archive)
    except (HarnessError, ValueError, KeyError, TypeError) as err:
        return RefusedBundle(shown, group, "malformed_evidence",
                             f"verified, but its model could not be built: "
                             f"{printable(str(err))}", archive)


def _archive(task: Task, keys: list[Any]) -> list[Result]:
    """A committed ``.tar.xz`` of ``topp-gate pr`` runs: every bundle inside, verified
    against the frozen ``pr.json`` beside it when there is one."""
    from ..mutation.mutate import mutation_folder

    try:
        with mutation_folder(task.path) as folder:
            found = sorted(p.parent for p in folder.rglob("receipt.dsse.json"))
            out: list[Result] = []
            for bundle in found:
                inner = bundle.relative_to(folder).as_posix()
                frozen = bundle.parent / "pr.json"
                out.append(_bundle(bundle, f"{task.shown}/{inner}", task.group, None, keys,
                                   frozen if frozen.is_file() else None, task.shown))
            if not out:
                out.append(RefusedBundle(task.shown, task.group, "malformed_evidence",
                                         "the archive holds no bundle", task.shown))
            return out
    except HarnessError as err:
        return [RefusedBundle(task.shown, task.group, err.code, printable(str(err)),
                              task.shown)]


def _mutation(task: Task, keys: list[Any], say: Callable[[str], None]
              ) -> MutationRun | RefusedRun:
    from ..core.errors import SignatureError
    from ..core.keys import project_public_keys
    from ..mutation.mutate import mutation_folder

    candidates = [*keys, *project_public_keys().values()]
    last: HarnessError | None = None
    root = task.path.resolve().parent.parent.parent
    try:
        with mutation_folder(task.path) as folder:
            for key in candidates:
                try:
                    return mutation_run(folder, key, task.shown, root, say)
                except SignatureError as err:
                    last = err
                    continue
                except HarnessError as err:
                    last = err
                    break
    except HarnessError as err:
        last = err
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        return RefusedRun(task.shown, "malformed_evidence",
                          f"malformed mutation summary ({type(err).__name__}: "
                          f"{printable(str(err))})")
    assert last is not None
    return RefusedRun(task.shown, last.code, printable(str(last)))


def mutation_run(folder: Path, key: Any, shown: str, root: Path,
                 say: Callable[[str], None], workers: int | None = 1) -> MutationRun:
    """The model of a mutation run (``folder``: extracted), after
    :func:`harness.mutation.mutation_check.check_summary` re-verified it with ``key`` (every
    bundle, every claim of the signed summary; the frozen PR manifest from ``root`` only).
    A run that does not verify raises the core's HarnessError."""
    from ..core.keys import keyid
    from ..core.safeio import read_regular_file
    from ..core.verify import open_bundle
    from ..mutation.mutant_catalogue import CATALOGUES
    from ..mutation.mutant_outputs import changed_rows
    from ..mutation.mutation_check import check_summary, summary_path

    s = check_summary(folder, key, roots=(root,), workers=workers, progress=say)
    base = open_bundle(summary_path(folder, s["base"]["bundle"]), key)
    survivors = set(s["survivors"])
    mutants = []
    for m in s["mutants"]:
        diff = read_regular_file(summary_path(folder, m["diff"]), "mutant diff", 1 << 20)
        changed = None
        if m["id"] in survivors:
            rows = changed_rows(base, open_bundle(summary_path(folder, m["bundle"]), key))
            changed = tuple(rows) if rows is not None else None
        mutants.append(Mutant(
            id=str(m["id"]), kind=str(m.get("kind", "")), killed=bool(m["killed"]),
            verdict=str(m["verdict"]["verdict"]), reasons=tuple(m["verdict"]["reasons"]),
            stopped_rows=tuple(f"{r['row']}: {', '.join(r['stops'])}"
                               for r in m.get("stopped_rows", [])),
            criterion_kills=bool(m.get("vllm_killed", False)),
            diff=diff.decode("utf-8", "replace"), changed=changed))
    g, v = s["kill_rate"]["gate"], s["kill_rate"]["vllm_criterion"]
    # a run made with --no-vllm-criterion (FlashInfer's: its samplers draw tokens, and the
    # criterion compares kept counts) records the criterion on no entry
    criterion_run = "vllm_criterion" in s["base"]
    base_batches = s["base"]["vllm_criterion"]["batches"] if criterion_run else []
    failed = {b["case"] for b in base_batches if not b["passes"]}
    telling = sum(any(not b["passes"] and b["case"] not in failed
                      for b in m["vllm_criterion"]["batches"])
                  for m in s["mutants"]) if criterion_run else 0
    return MutationRun(
        path=shown, matrix=str(s["manifest"]["name"]), rules=str(s["manifest"]["rules"]),
        backend=str(s["backend"]), catalogue=str(s["catalogue"]),
        base_verdict="PASS" if s["base_passes"] else "STOP",
        base_defects=int(s["base"].get("verdict", {}).get("base_defects", {}).get("rows", 0)),
        gate_kills=(int(g["killed"]), int(g["of"])),
        criterion_kills=(int(v["killed"]), int(v["of"])), mutants=tuple(mutants),
        survivors=tuple(s["survivors"]), signer=keyid(key),
        catalogue_entries=len(CATALOGUES[s["catalogue"]]), criterion_batches=len(base_batches),
        criterion_base_failed=len(failed), criterion_telling=telling,
        criterion_run=criterion_run)


def build(tasks: Sequence[Task], *, workers: int | None = None,
          extra_keys: Sequence[bytes] = (),
          progress: Callable[[str], None] = lambda _line: None) -> Evidence:
    """Run every task (``workers`` processes; 1: in this process) into one model."""
    evidence = Evidence()
    count = workers or len(os.sched_getaffinity(0))
    done = 0
    for task, results in _results(tasks, count, extra_keys, progress):
        done += 1
        for result in results:
            if isinstance(result, (MutationRun, RefusedRun)):
                evidence.mutations.append(result)
            else:
                evidence.bundles.append(result)
            progress(f"[{done}/{len(tasks)}] {_said(result)}")
    order = {t.shown: i for i, t in enumerate(tasks)}
    evidence.bundles.sort(key=lambda b: (order.get(b.archive or b.path, 0), b.path))
    evidence.mutations.sort(key=lambda m: order.get(m.path, 0))
    return evidence


def _results(tasks: Sequence[Task], count: int, extra_keys: Sequence[bytes],
             progress: Callable[[str], None]) -> Iterator[tuple[Task, list[Result]]]:
    if count <= 1 or len(tasks) <= 1:
        for task in tasks:
            yield task, run_task(task, extra_keys, _Say(progress))
        return
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, wait

    # the longest first (mutation runs, archives), so the pool's tail is short
    ordered = sorted(tasks, key=lambda t: t.kind == "bundle")
    with multiprocessing.Manager() as manager, ProcessPoolExecutor(max_workers=count) as pool:
        lines = manager.Queue()
        pending: dict[Future[list[Result]], Task] = {
            pool.submit(run_task, t, tuple(extra_keys), lines): t for t in ordered}
        while pending:
            done, _ = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            _drain(lines, progress)
            for future in done:
                yield pending.pop(future), future.result()
        _drain(lines, progress)


class _Say:
    """A queue's ``put`` for the in-process path: the line goes straight to progress."""

    def __init__(self, progress: Callable[[str], None]) -> None:
        self.put = lambda line: progress(f"  {line}")


def _drain(lines: Any, progress: Callable[[str], None]) -> None:
    import queue

    while True:
        try:
            progress(f"  {lines.get_nowait()}")
        except queue.Empty:
            return


def _said(result: Result) -> str:
    if isinstance(result, (RefusedBundle, RefusedRun)):
        return f"{printable(result.path)}: refused: {printable(result.reason)}"
    if isinstance(result, MutationRun):
        return (f"{printable(result.path)}: verified mutation run, gate kills "
                f"{result.gate_kills[0]}/{result.gate_kills[1]}")
    return f"{printable(result.path)}: verified, {result.verdict}"
