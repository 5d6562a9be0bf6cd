"""A memo of judged rows for verifiers of many bundles in one process (issue 28).

Every bundle of a mutation run ran the same captured inputs, and the base side's outputs
are the same in each; most mutants leave most rows' patched outputs as the base's too. The
oracle and rule-set rerun of such a row is the same pure function of the same bytes, so
:class:`RowMemo` lets :func:`harness.core.judge.judge_cases` take it from the first bundle
that judged it instead of computing it again.

What makes that safe:

* the key is the sha256 of the whole task (:func:`task_key`): every field
  :func:`harness.core.judge.judge_task` reads, the row's input bytes and both sides' output
  bytes included, each framed by its kind and length, so two tasks share a key only when
  they are equal field for field;
* the key is computed here, in this process, from bytes this process decoded and
  digest-checked for the bundle being verified; nothing is read from a file or another
  process, and a result is recorded only after this process's own workers computed it;
* a hit returns a copy of the recorded result, which the verifier then compares with the
  bundle's own recorded rows like any recomputed one: a bundle whose outputs were tampered
  with has other bytes, so another key, and is judged afresh; one whose rows or verdict were
  tampered with differs from the (correct) result and is refused as before.

Capture side (standard library only); the trusted core takes the memo as an argument and
never keeps one itself.
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

# one task's field kinds: bytes are hashed as they are, everything else (str, int, float,
# bool, None, tuples and dicts of them) by ``repr``, which is exact for these and tells
# True from 1, 1.0 from 1 and a tuple from a list
_BYTES, _REPR = b"b", b"r"


def task_key(task: tuple[Any, ...]) -> bytes:
    """The sha256 of every field of a judge task, each framed as kind, length, data."""
    digest = hashlib.sha256()
    digest.update(len(task).to_bytes(8, "little"))
    for value in task:
        if isinstance(value, bytes | bytearray | memoryview):
            kind, data = _BYTES, bytes(value)
        else:
            kind, data = _REPR, repr(value).encode("utf-8")
        digest.update(kind + len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.digest()


class RowMemo:
    """Judged rows of this process by :func:`task_key` (see the module docstring).

    ``hits`` and ``misses`` count lookups; ``limit`` bounds the number of rows kept (the
    oldest go first), so a long run holds a bounded memo."""

    def __init__(self, limit: int = 200_000) -> None:
        self.limit = limit
        self.hits = 0
        self.misses = 0
        self._rows: dict[bytes, dict[str, Any]] = {}

    def get(self, task: tuple[Any, ...]) -> dict[str, Any] | None:
        found = self._rows.get(task_key(task))
        if found is None:
            self.misses += 1
            return None
        self.hits += 1
        return copy.deepcopy(found)

    def put(self, task: tuple[Any, ...], result: dict[str, Any]) -> None:
        if len(self._rows) >= self.limit:
            del self._rows[next(iter(self._rows))]
        self._rows[task_key(task)] = copy.deepcopy(result)

    def __len__(self) -> int:
        return len(self._rows)


_PROCESS_MEMO = RowMemo()


def process_memo() -> RowMemo:
    """The memo the multi-bundle verifiers of this process share (mutation summaries: every
    bundle of a run, and the parts of one run, ran the same inputs)."""
    return _PROCESS_MEMO
