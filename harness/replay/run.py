"""``topp-gate replay``: gate an upstream bug's fixed release as an upgrade of its broken
release, on the replay's matrix for the backend. Kernel side (through ``topp-gate pr``).

The broken release is the base and the fixed release the change, each by the pin file the
frozen replay names (checked by its sha256); the matrix is the replay's for the backend.
Everything else is ``pr``'s: the frozen manifest, the sandboxed children, the signed bundle
and its offline verification. The outcome (:mod:`.outcome`) is read from the statement that
verified.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..pr.flow import PrAnswer, PrOptions, Say, choose_backend, gate_pr
from .outcome import Outcome, outcome_of
from .spec import Replay


@dataclass(frozen=True)
class ReplayOptions:
    out: Path
    key: Path
    backend: str = "auto"
    sources: Path | None = None
    cache: Path | None = None
    workers: int = 0
    unsandboxed: bool = False
    ephemeral_key: bool = False


def gate_replay(replay: Replay, options: ReplayOptions, say: Say) -> tuple[PrAnswer, Outcome]:
    backend = choose_backend(options.backend)
    matrix = replay.matrix(backend)  # refused before anything is pinned or run
    say(f"replay {replay.id}: {replay.broken.release} (broken) -> {replay.fixed.release} "
        f"(fixed) on {backend}")
    answer = gate_pr(PrOptions(base=str(replay.broken.pin), change=str(replay.fixed.pin),
                               out=options.out, key=options.key, backend=backend,
                               matrix=str(matrix), sources=options.sources,
                               cache=options.cache, reuse=False, workers=options.workers,
                               unsandboxed=options.unsandboxed,
                               ephemeral_key=options.ephemeral_key), say)
    if answer.predicate is None:  # pragma: no cover - gate_pr always reads it back
        raise AssertionError("pr answered without its verified statement")
    return answer, outcome_of(answer.predicate)
