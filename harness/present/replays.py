"""The "Bugs it would have caught" table: every committed replay, from verified bundles only.

For each frozen replay file ``evidence/replays/ID/replay.json`` (:mod:`harness.replay.spec`:
its bytes, pins and matrices checked), every bundle committed beside it (a folder holding
``receipt.dsse.json``, or inside a ``.tar.xz`` the device wrote) is verified in this process
with the trusted keys (:mod:`.verified`: the project keys and the caller's), against the
frozen ``pr.json`` beside it; then it must be a run of this replay (:func:`bound_to`: the
broken release's pin as the base, the fixed release's as the change, the replay's matrix for
the backend its manifest requires) before its outcome (:mod:`harness.replay.outcome`) is
read from the statement that verified. A bundle that fails any of this is shown as refused,
with the reason, never with its claims.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.bundle import MANIFEST
from ..core.errors import HarnessError
from ..core.names import SIDES
from ..core.terminal import markdown_cell, printable
from ..replay.outcome import Outcome, outcome_of
from ..replay.spec import Replay, load_replay

REPLAYS = "replays"  # the folder under evidence/


@dataclass(frozen=True)
class ReplayRun:
    """One committed run of a replay: its outcome, or why it was refused."""

    replay: Replay
    shown: str  # the bundle as pages show it (relative to the evidence folder's parent)
    backend: str | None
    device: str | None
    outcome: Outcome | None
    refused: str | None = None  # the reason, when the bundle did not verify or bind


def bound_to(replay: Replay, manifest: dict[str, Any]) -> str | None:
    """None when the verified manifest is a run of ``replay``; else what differs."""
    sides = manifest.get("sources", {}).get("sides", {})
    for side, release in zip(SIDES, (replay.broken, replay.fixed), strict=True):
        if sides.get(side, {}).get("pin_sha256") != release.sha256:
            return (f"its {side} side is not the replay's {release.release} pin "
                    f"({release.sha256[:12]}...)")
    backend = manifest.get("backend", {}).get("required")
    if backend not in replay.matrices:
        return f"it ran on {backend}, for which the replay has no matrix"
    matrix = json.loads(replay.matrices[backend].read_bytes())
    ids = [case.get("id") for case in manifest.get("cases", [])]
    if ids != [case["id"] for case in matrix["cases"]] or not str(
            manifest.get("description", "")).endswith(str(matrix["description"])):
        return f"its cases are not the replay's {backend} matrix"
    return None


def _device(predicate: dict[str, Any]) -> str | None:
    evidence = predicate.get("kernel_path", {}).get(SIDES[0]) or {}
    device = evidence.get("device") if isinstance(evidence, dict) else None
    name = device.get("name") if isinstance(device, dict) else None
    return str(name) if name is not None else None


def _shown(path: Path, root: Path) -> str:
    """``path`` as pages show it: relative to the evidence folder's parent when inside it."""
    try:
        return path.resolve().relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def _runs_in(replay: Replay, folder: Path, root: Path, keys: Sequence[Any]) -> list[ReplayRun]:
    from ..mutation.mutate import mutation_folder
    from .verified import Refused, checked

    runs: list[ReplayRun] = []
    sources = sorted(p for p in folder.iterdir()
                     if p.name.endswith(".tar.xz") or (p / "bundle").is_dir())
    for source in sources:
        shown_source = _shown(source, root)
        try:
            with mutation_folder(source) as opened:
                bundles = sorted(p.parent for p in opened.rglob("receipt.dsse.json"))
                if not bundles:
                    runs.append(ReplayRun(replay, shown_source, None, None, None,
                                          "it holds no bundle"))
                for bundle in bundles:
                    shown = f"{shown_source}/{bundle.relative_to(opened).as_posix()}"
                    frozen = bundle.parent / "pr.json"
                    result = checked(bundle, extra_keys=keys,
                                     frozen_manifest=frozen if frozen.is_file() else None)
                    if isinstance(result, Refused):
                        runs.append(ReplayRun(replay, shown, None, None, None,
                                              f"{result.code}: {result.reason}"))
                        continue
                    manifest = json.loads(result.view.raw(MANIFEST))
                    predicate = result.view.statement["predicate"]
                    unbound = bound_to(replay, manifest)
                    runs.append(ReplayRun(
                        replay, shown, str(manifest["backend"]["required"]),
                        _device(predicate), None if unbound else outcome_of(predicate),
                        f"verified, but not a run of this replay: {unbound}" if unbound
                        else None))
        except HarnessError as err:
            runs.append(ReplayRun(replay, shown_source, None, None, None,
                                  f"{err.code}: {printable(str(err))}"))
    return runs


def replay_runs(evidence: Path, keys: Sequence[Any] = ()) -> list[ReplayRun]:
    """Every committed run of every replay under ``evidence/replays/``, in replay order. A
    replay file that does not load is a HarnessError (the callers' exit 2): the table never
    shows a bug whose frozen description moved."""
    root = evidence.resolve().parent
    runs: list[ReplayRun] = []
    folder = evidence / REPLAYS
    if not folder.is_dir():
        return runs
    for spec in sorted(folder.glob("*/replay.json")):
        replay = load_replay(spec)
        runs.extend(_runs_in(replay, spec.parent, root, keys))
    return runs


def replays_without_runs(evidence: Path) -> list[Replay]:
    """The frozen replays with nothing committed beside them yet (not run)."""
    folder = evidence / REPLAYS
    found = []
    for spec in sorted(folder.glob("*/replay.json")) if folder.is_dir() else []:
        if not any(p.name.endswith(".tar.xz") or (p / "bundle").is_dir()
                   for p in spec.parent.iterdir()):
            found.append(load_replay(spec))
    return found


def said(outcome: Outcome, broken: str, fixed: str) -> str:
    """What the gate said, in one sentence."""
    failed = len(outcome.failed)
    text = (f"{broken} fails {failed} of {outcome.rows} rows against the oracle; {fixed}: "
            f"{outcome.upgrade_said()}")
    wrote = outcome.wrote_outside_view.get(SIDES[0], ())
    if wrote:
        text += f"; {broken} wrote outside its logits view in {len(wrote)} case(s)"
    return text


def rows_named(outcome: Outcome, limit: int = 6) -> str:
    names = [row.row for row in outcome.failed]
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def table(runs: Sequence[ReplayRun], waiting: Sequence[Replay] = ()) -> list[str]:
    """The Markdown table (every evidence string escaped by the one escaper)."""
    lines = ["| bug | thread | releases (broken -> fixed) | backend, device | what the gate "
             "said | rows the broken release fails | bundle |", "|---|---|---|---|---|---|---|"]
    for run in runs:
        data = run.replay.data
        broken, fixed = run.replay.broken.release, run.replay.fixed.release
        head = (f"| {markdown_cell(data['title'])} | {markdown_cell(data['thread'])} | "
                f"{markdown_cell(broken)} -> {markdown_cell(fixed)} | ")
        where = f"{markdown_cell(run.backend or '?')}, {markdown_cell(run.device or '?')}"
        if run.outcome is None:
            lines.append(head + f"{where} | refused: {markdown_cell(run.refused or '')} | - | "
                         f"{markdown_cell(run.shown)} |")
            continue
        lines.append(head + f"{where} | **{markdown_cell(run.outcome.answer)}**: "
                     f"{markdown_cell(said(run.outcome, broken, fixed))} | "
                     f"{markdown_cell(rows_named(run.outcome)) or 'none'} | "
                     f"{markdown_cell(run.shown)} |")
    for replay in waiting:
        data = replay.data
        lines.append(f"| {markdown_cell(data['title'])} | {markdown_cell(data['thread'])} | "
                     f"{markdown_cell(replay.broken.release)} -> "
                     f"{markdown_cell(replay.fixed.release)} | - | not run yet (frozen: "
                     f"{markdown_cell(', '.join(sorted(replay.matrices)))} matrix) | - | - |")
    return lines
