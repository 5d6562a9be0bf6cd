"""Kept values must be the input's, bit for bit.

A masking kernel (top-k, top-p) returns its input row with masked positions set to -inf;
every position it keeps must carry exactly the input's float32 bits. A kernel that keeps
the right tokens but rewrites their values (all +inf, all 0, a forced 1e30 turned into 7.0)
is defective even when its kept set is perfect. :func:`changed_values` counts, for one row,
the positions whose output is not -inf and whose bits differ from the input's (a NaN output
counts, an input -inf kept as -inf does not).

Kept-value integrity is a binding, not a rule: :func:`first_changed_row` is what ``verify``
requires of every side's output whose status is "ok" (every row a masked copy of its input
row), whatever rule set judges the bundle, and what ``run`` checks before it signs (a side
that rewrote a value is recorded as ``unreadable_output``, never signed as ok). The rule sets
after ``seed/v1`` still count changed values per row; under the binding that count is 0.

Pure (``array``) and numpy paths; tests prove them equal. Standard library only otherwise.
"""

from __future__ import annotations

import sys
from array import array

from .errors import ShapeError

NEG_INF_BITS = 0xFF800000  # float32 -inf, little-endian uint32 view


def _words(data: bytes) -> array[int]:
    words = array("I")
    if words.itemsize != 4:  # pragma: no cover - every supported platform has 4-byte I
        raise ShapeError("this platform has no 4-byte unsigned array type")
    words.frombytes(data)
    if sys.byteorder != "little":  # pragma: no cover - the captured bytes are little-endian
        words.byteswap()
    return words


def changed_values(inputs: bytes, outputs: bytes, *, fast: bool = False) -> int:
    """How many positions of one row were kept (output not -inf) with other bits than the
    input's. ``inputs`` and ``outputs`` are one row of little-endian float32 each."""
    if len(inputs) != len(outputs) or len(inputs) % 4:
        raise ShapeError(f"{len(outputs)} output bytes for {len(inputs)} input bytes")
    if fast:
        import numpy as np

        out = np.frombuffer(outputs, dtype="<u4")
        inp = np.frombuffer(inputs, dtype="<u4")
        return int(np.count_nonzero((out != inp) & (out != NEG_INF_BITS)))
    out_words = _words(outputs)
    in_words = _words(inputs)
    return sum(1 for o, i in zip(out_words, in_words, strict=True)
               if o != i and o != NEG_INF_BITS)


def first_changed_row(inputs: bytes, outputs: bytes, vocab: int, *,
                      fast: bool = False) -> tuple[int, int] | None:
    """The first row (and its :func:`changed_values` count) of a case whose output is not a
    masked copy of its input row, or None when every row is one. ``inputs`` and ``outputs``
    are whole cases: rows of ``vocab`` little-endian float32 each."""
    width = 4 * vocab
    if vocab < 1 or len(inputs) != len(outputs) or len(inputs) % width:
        raise ShapeError(f"{len(outputs)} output bytes for {len(inputs)} input bytes in "
                         f"rows of {vocab}")
    if fast:
        import numpy as np

        out = np.frombuffer(outputs, dtype="<u4").reshape(-1, vocab)
        inp = np.frombuffer(inputs, dtype="<u4").reshape(-1, vocab)
        counts = np.count_nonzero((out != inp) & (out != NEG_INF_BITS), axis=1)
        rows = np.flatnonzero(counts)
        return (int(rows[0]), int(counts[rows[0]])) if rows.size else None
    for row, start in enumerate(range(0, len(inputs), width)):
        got, had = outputs[start:start + width], inputs[start:start + width]
        if got != had:
            changed = changed_values(had, got)
            if changed:
                return row, changed
    return None
