"""Every number that bounds a bundle, once: what ``manifest new``, ``run`` and ``verify``
(and ``exact``) accept, and how many processes they start.

Standard library only. The manifest schema (``schemas/manifest.schema.json``) bounds what a
manifest may *declare* (``max_batch`` at most :data:`MAX_BATCH`, ``max_vocab``,
``max_bundle_bytes``); this module bounds what any tool will *do* for a manifest, whatever it
declares: :func:`check_work` runs when a manifest is parsed (``manifest new`` before it
freezes one, ``run`` before any kernel, ``verify`` before any artifact but the manifest is
read). ``tests/unit/test_limits.py`` pins the numbers against the committed evidence and
the schema.

Why these numbers (README "Verifying a bundle", VERIFYING.md):

- :data:`MAX_BATCH` 64: vLLM's split top-p path is taken only for batch <= 64 (manifest
  versions 1 and 2 judge that path only).
- :data:`MAX_BATCH_V3` 1024: version 3 also judges the monolithic and mixed paths a server
  takes at larger batches; a case still holds at most :data:`MAX_CASE_VALUES` values (so
  batch 1024 runs at vocabularies up to 16384, batch 128 up to 131072).
- :data:`MAX_VOCAB` 262144: the largest vocabulary of any predeclared matrix (the H200
  matrix). One row is judged in one worker; its pure-Python oracle holds a few copies of the
  row as Python floats, about 120 MiB per worker at this vocabulary (four times that at the
  schema's 1048576, which is what let 8 workers reach 2.8 GB).
- :data:`MAX_CASE_VALUES` = 64 x 262144: one case's array (logits, or one side's output);
  ``verify`` holds one case at a time (logits and both outputs: 192 MiB raw at most).
- :data:`MAX_WORK_VALUES` = 2**26 (67108864 float32 values, summed over cases of
  batch x vocab): 2.45 times the largest committed bundle (the H200 bundles, 27373056,
  verified in 28.8 s on 2 cores, 14.2 s with numpy), so the worst bundle any signer can
  make verifies in a few minutes on 2 cores, not hours.
- :data:`MAX_ROWS` 16384: 40 times the H200 bundle's 405 rows; the receipt carries every
  row, and its envelope is capped at 16 MiB anyway.
- :data:`MAX_PLAIN_BYTES` 8 MiB: a plain (uncompressed) bundle file other than the
  manifest (per-row results, kernel-path evidence, the report).
- :data:`DEFAULT_MAX_WORKERS` 4: worker processes by default (each near 120 MiB at
  :data:`MAX_VOCAB`, beside the parent's one case), so the whole process tree stays under
  1 GiB; an explicit ``--workers N`` is clamped to the CPUs this process may use
  (:func:`workers`), so ``--workers 300`` never starts 300 processes.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from .errors import LimitError, UsageError

MAX_BATCH = 64
MAX_BATCH_V3 = 1024
MAX_VOCAB = 262144
MAX_CASE_VALUES = MAX_BATCH * MAX_VOCAB
MAX_WORK_VALUES = 1 << 26
MAX_ROWS = 16384
MAX_PLAIN_BYTES = 8 << 20
DEFAULT_MAX_WORKERS = 4


def check_case(case_id: str, batch: int, vocab: int, *, max_batch: int = MAX_BATCH) -> None:
    """Refuse (LimitError) one case over the batch, vocabulary or per-case ceiling
    (``max_batch``: :data:`MAX_BATCH`, or :data:`MAX_BATCH_V3` for version 3 manifests)."""
    if batch > max_batch:
        raise LimitError(f"case {case_id}: batch {batch} is over the ceiling {max_batch}")
    if vocab > MAX_VOCAB:
        raise LimitError(f"case {case_id}: vocab {vocab} is over the ceiling {MAX_VOCAB}")
    if batch * vocab > MAX_CASE_VALUES:
        raise LimitError(f"case {case_id}: {batch} x {vocab} values, over the ceiling of "
                         f"{MAX_CASE_VALUES} per case")


def check_work(cases: Iterable[tuple[str, int, int]], *, max_batch: int = MAX_BATCH) -> None:
    """Refuse (LimitError) a set of (id, batch, vocab) cases that asks too much of a
    verifier: any case over :func:`check_case`'s ceilings, more than :data:`MAX_ROWS` rows,
    or more than :data:`MAX_WORK_VALUES` values (sum of batch x vocab) in all."""
    rows = work = 0
    for case_id, batch, vocab in cases:
        check_case(case_id, batch, vocab, max_batch=max_batch)
        rows += batch
        work += batch * vocab
    if rows > MAX_ROWS:
        raise LimitError(f"{rows} rows in all, over the ceiling of {MAX_ROWS} a verifier "
                         "will judge")
    if work > MAX_WORK_VALUES:
        raise LimitError(f"{work} values in all (sum of batch x vocab), over the ceiling of "
                         f"{MAX_WORK_VALUES} a verifier will judge")


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity where the OS tells it)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def default_workers() -> int:
    """Worker processes when none are asked for: the usable CPUs, at most
    :data:`DEFAULT_MAX_WORKERS`."""
    return min(usable_cpus(), DEFAULT_MAX_WORKERS)


def workers(requested: int | None) -> int:
    """The worker count to use: :func:`default_workers` for None or 0, else ``requested``
    clamped to :func:`usable_cpus`; a negative count is a UsageError."""
    if not requested:
        return default_workers()
    if requested < 0:
        raise UsageError(f"a worker count must be at least 1, not {requested}")
    return min(requested, usable_cpus())


WORKERS_HELP = (f"(default: the usable CPUs, at most {DEFAULT_MAX_WORKERS}; a larger N is "
                "clamped to the usable CPUs)")
