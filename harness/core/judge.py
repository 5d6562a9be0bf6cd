"""Judge every row of a set of captured cases, from bytes. Shared by ``run`` and ``verify``.

Input: for each case, the captured logits and p bytes, each side's raw output bytes (or the
failure status the kernel runner recorded), and whether the split path was proven.
Output: the gate's per-row results, in case order then row order, and nothing else.

Rows are independent, so they may be judged in worker processes; the result list is
identical to a serial run (tests prove it). No torch, triton or vLLM here.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from .errors import ShapeError, UsageError
from .f32 import FLOAT32_BYTES, decode
from .gate import OK, SIDE_FAILURES, Row, SideOutput
from .names import FORCED, ROW_KINDS
from .oracle import reference, top_k_top_p
from .rulesets import LEGACY_RULES, RowInput, rule_set


@dataclass(frozen=True)
class RowSpec:
    judge: str  # "forced" or "ordinary"
    forced_id: int | None = None
    label: str = ""


@dataclass(frozen=True)
class CaseBytes:
    """One captured case with both sides' outputs (bytes) or their failure status."""

    id: str
    vocab: int
    rows: Sequence[RowSpec]
    logits: bytes
    p: bytes
    stock: bytes | str
    patched: bytes | str
    split_path: bool
    # (stock, patched): whether each side proved the split path; None: split_path for both
    split_sides: tuple[bool, bool] | None = None
    k: bytes | None = None  # per-row int32 top-k (version 3 cases), None before
    # side -> per-row recorded draws (a sampling kernel's evidence ``draws``), or None
    draws: Mapping[str, Sequence[Any]] | None = None

    @property
    def batch(self) -> int:
        return len(self.rows)


# One row's work item: plain data, so it can travel to a worker process.
_Task = tuple[str, int, str, "int | None", bytes, float, "bytes | str", "bytes | str", bool,
              "tuple[bool, bool] | None", bool, str, "int | None", "dict[str, Any] | None"]


def _side_row(side: bytes | str, index: int, row_bytes: int) -> bytes | str:
    if isinstance(side, str):
        return side
    return side[index * row_bytes : (index + 1) * row_bytes]


def _check_case(case: CaseBytes) -> list[float]:
    if case.batch == 0 or case.vocab <= 0:
        raise ShapeError(f"case {case.id}: empty batch or vocabulary")
    for spec in case.rows:
        if spec.judge not in ROW_KINDS:
            raise UsageError(f"case {case.id}: unknown row judge {spec.judge!r}")
        if spec.judge == FORCED and spec.forced_id is None:
            raise UsageError(f"case {case.id}: forced row without forced_id")
    if len(case.logits) != case.batch * case.vocab * FLOAT32_BYTES:
        raise ShapeError(f"case {case.id}: logits bytes do not hold {case.batch} rows of "
                         f"{case.vocab} float32 values")
    ps = decode(case.p)
    if len(ps) != case.batch:
        raise ShapeError(f"case {case.id}: {len(ps)} p values for {case.batch} rows")
    for side in (case.stock, case.patched):
        if isinstance(side, str) and side not in SIDE_FAILURES:
            raise UsageError(f"case {case.id}: unknown side status {side!r}")
    if case.k is not None and len(case.k) != 4 * case.batch:
        raise ShapeError(f"case {case.id}: {len(case.k)} bytes of top-k for {case.batch} rows")
    return ps


def _ks(case: CaseBytes) -> list[int | None]:
    """Each row's top-k, None for no top-k (no k file, or k at least the vocabulary)."""
    if case.k is None:
        return [None] * case.batch
    return [k if k < case.vocab else None
            for k in struct.unpack(f"<{case.batch}i", case.k)]


def _row_draws(case: CaseBytes, index: int) -> dict[str, Any] | None:
    """Each recording side's draws for row ``index`` (a malformed record: an empty one,
    which matches no output)."""
    if not case.draws:
        return None
    out: dict[str, Any] = {}
    for side, per_row in case.draws.items():
        rows = per_row if isinstance(per_row, list | tuple) else []
        out[side] = rows[index] if index < len(rows) else []
    return out


def _side_bytes(side: bytes | str, expected: int) -> bytes | str:
    """A side's whole output, or ``unreadable_output`` when its size is wrong."""
    if isinstance(side, str) or len(side) == expected:
        return side
    return "unreadable_output"


def tasks(cases: Iterable[CaseBytes], *, fast: bool = False,
          rules: str = LEGACY_RULES) -> Iterator[_Task]:
    """Split cases into independent per-row work items, in case order then row order.

    Lazy: a case is taken from ``cases`` only when its first row is needed, and released
    before the next one is taken, so a streaming caller holds one case at a time.
    """
    for case in cases:
        ps = _check_case(case)
        row_bytes = case.vocab * FLOAT32_BYTES
        expected = case.batch * row_bytes
        stock = _side_bytes(case.stock, expected)
        patched = _side_bytes(case.patched, expected)
        ks = _ks(case)
        for i, spec in enumerate(case.rows):
            yield (case.id, i, spec.judge, spec.forced_id,
                   case.logits[i * row_bytes : (i + 1) * row_bytes], ps[i],
                   _side_row(stock, i, row_bytes), _side_row(patched, i, row_bytes),
                   case.split_path, case.split_sides, fast, rules, ks[i], _row_draws(case, i))
        del case, stock, patched  # not held while the next case is produced


def _output(side: bytes | str, fast: bool) -> SideOutput:
    if isinstance(side, str):
        return SideOutput.failed(side)
    return SideOutput(OK, _decode_row(side, fast, wide=False))


def _decode_row(data: bytes, fast: bool, *, wide: bool) -> Any:
    """Python floats, or with ``fast`` a numpy row (float64 when ``wide``; exact either way)."""
    if not fast:
        return decode(data)
    import numpy as np

    if len(data) % FLOAT32_BYTES:
        raise ShapeError(f"{len(data)} bytes is not a whole number of float32 values")
    row = np.frombuffer(data, dtype="<f4")
    return row.astype(np.float64) if wide else row


def judge_task(task: _Task) -> dict[str, Any]:
    """Judge one row: decode bytes, run the oracle, apply the rule set the task names."""
    (case_id, index, kind, forced_id, logits_bytes, p32, stock, patched, split_path,
     split_sides, fast, rules, k, draws) = task
    logits = _decode_row(logits_bytes, fast, wide=True)
    row = Row(case_id, index, kind, logits, p32, forced_id, k)
    judged_by = rule_set(rules)
    if judged_by.top_k:  # the predeclared top-k then top-p convention; p >= 1: no top-p
        outcome = top_k_top_p(logits, p32=p32 if p32 < 1.0 else None, k=k, row=index,
                              fast=fast)
    else:
        outcome = reference(logits, p32, row=index, fast=fast)
    raw = ({"stock": stock if isinstance(stock, bytes) else None,
            "patched": patched if isinstance(patched, bytes) else None}
           if judged_by.needs_raw else {})
    return judged_by.judge(RowInput(row, outcome, _output(stock, fast), _output(patched, fast),
                                    split_path, split_sides, logits_bytes, raw, fast, draws))




class RowMemo(Protocol):
    """A caller's memo of judged rows, held in the caller's process: ``get`` gives what
    :func:`judge_task` returned for an identical task (every field, bytes included) or None;
    ``put`` records a result this process just computed (``harness.mutation.row_memo``)."""

    def get(self, task: _Task) -> dict[str, Any] | None: ...

    def put(self, task: _Task, result: dict[str, Any]) -> None: ...


def judge_cases(cases: Iterable[CaseBytes], *, workers: int = 1, fast: bool = False,
                progress: Callable[[int], None] | None = None,
                rules: str = LEGACY_RULES, memo: RowMemo | None = None) -> list[dict[str, Any]]:
    """Per-row gate results for every row of every case, in order, by rule set ``rules``.

    ``workers > 1`` judges rows in worker processes; the list is identical to a serial run.
    ``progress`` is called with 1 after each row is judged. Rows are taken from ``cases``
    lazily and at most ``2 * workers`` are in flight, so memory holds one case plus a few
    rows, however many cases there are (``verify`` streams cases through this). ``memo``: a
    row whose whole task it has seen is taken from it instead of judged again.
    """
    rule_set(rules)  # an unknown id is refused before any row is judged
    work = tasks(cases, fast=fast, rules=rules)
    results: list[dict[str, Any]] = []
    if workers <= 1:
        for task in work:
            found = memo.get(task) if memo is not None else None
            if found is None:
                found = judge_task(task)
                if memo is not None:
                    memo.put(task, found)
            results.append(found)
            if progress:
                progress(1)
        return results
    with ProcessPoolExecutor(max_workers=workers) as pool:
        pending: deque[tuple[_Task, Future[dict[str, Any]] | dict[str, Any]]] = deque()

        def collect() -> None:
            task, job = pending.popleft()
            if isinstance(job, Future):
                job = job.result()
                if memo is not None:
                    memo.put(task, job)
            results.append(job)
            if progress:
                progress(1)

        for task in work:
            found = memo.get(task) if memo is not None else None
            pending.append((task, found if found is not None else pool.submit(judge_task, task)))
            if len(pending) >= 2 * workers:
                collect()
        while pending:
            collect()
    return results
