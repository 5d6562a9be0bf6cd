"""Captured inputs must be the manifest's: every value the manifest fixes without a generator.

The captured bytes are what the kernels ran on and what the oracle judges, but a signed
bundle could carry other bytes than its manifest describes (forced value 50 where the
manifest says 1e30, p 0.25 where it says 0.9, plain random rows where it says ties), and
the report would print the manifest's values. Without torch the verifier cannot rerun the
manifest's random generator (``verify --regenerate`` does, with torch), but it can check,
bit for bit, everything the manifest states explicitly:

- p: every forced, boundary and traffic row's float32 p is the manifest's decimal p after
  float32 conversion (1.0 for a traffic row without top-p); an ordinary row's p is in
  [0.1, 1.0), the range its generator draws from;
- k (version 3): every row's int32 top-k is exactly the manifest's (the vocabulary for a row
  without top-k);
- forced rows: the forced token holds the manifest's value, and all rows of a forced case
  share one background (rows equal outside their two forced positions);
- boundary constructions: ``set`` tokens of a ``randn`` row hold their stated values (with
  their ulp steps); a ``ties`` row is exactly its groups and rest (in order when contiguous,
  as a multiset when permuted); an ``adjacent`` row holds each of its ``count`` float32
  steps below ``below``.

Every difference is a :class:`~harness.core.errors.BindingMismatchError`. Standard library
only (trusted core); one case at a time.
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import BindingMismatchError
from .f32 import FLOAT32_BYTES, decode, runtime_p, to_float32
from .manifest import CaseLayout, decimal_float32, float32_step, forced_grid, row_ks, row_ps
from .names import BOUNDARY, FORCED, TRAFFIC

# torch.rand(...) * 0.9 + 0.1 in float32 (harness.capture.cases): the smallest value is 0.1
# rounded to float32, and the largest stays below 1.
_ORDINARY_P_LOW = struct.unpack("<f", struct.pack("<f", 0.1))[0]


def _bits(value: float) -> bytes:
    return struct.pack("<f", value)


def _mismatch(case: str, where: str, want: Any, found: Any) -> BindingMismatchError:
    return BindingMismatchError(f"captured input of case {case} ({where}) vs the manifest",
                                str(want), str(found), said_by="the manifest")


def check_case_inputs(spec: Mapping[str, Any], layout: CaseLayout, logits: bytes,
                      p: bytes, k: bytes | None = None) -> None:
    """Refuse captured bytes of one case that contradict what its manifest entry fixes."""
    ps = decode(p)
    _check_p(spec, layout, ps)
    want_k = row_ks(spec, has_k=layout.has_k)
    if want_k is not None:
        if k is None or len(k) != 4 * layout.batch \
                or list(struct.unpack(f"<{layout.batch}i", k)) != want_k:
            raise _mismatch(layout.id, "per-row top-k", want_k[:8], "other values")
    if spec["kind"] == FORCED:
        _check_forced(spec, layout, logits)
    elif spec["kind"] == BOUNDARY:
        row_bytes = layout.vocab * FLOAT32_BYTES
        for index, row in enumerate(spec["rows"]):
            data = logits[index * row_bytes:(index + 1) * row_bytes]
            _check_construction(layout.id, index, row["construction"], data)


def _check_p(spec: Mapping[str, Any], layout: CaseLayout, ps: Sequence[float]) -> None:
    written = row_ps(spec)
    if written is None:  # ordinary: the generator's p
        for index, value in enumerate(ps):
            if not _ORDINARY_P_LOW <= value < 1.0:
                raise _mismatch(layout.id, f"row {index} p", "a p in [0.1, 1)", value)
        return
    for index, (text, value) in enumerate(zip(written, ps, strict=True)):
        want = to_float32(float(text)) if spec["kind"] == TRAFFIC else runtime_p(text)
        if _bits(want) != _bits(value):
            raise _mismatch(layout.id, f"row {index} p", f"{text} -> {want!r}", repr(value))


def _check_forced(spec: Mapping[str, Any], layout: CaseLayout, logits: bytes) -> None:
    width = FLOAT32_BYTES
    row_bytes = layout.vocab * width
    grid = forced_grid(spec)
    first_id = grid[0][2]
    first = logits[:row_bytes]
    for index, (value, _, token) in enumerate(grid):
        row = logits[index * row_bytes:(index + 1) * row_bytes]
        want = _bits(decimal_float32(value, what="forced value"))
        found = row[token * width:(token + 1) * width]
        if found != want:
            raise _mismatch(layout.id, f"row {index} forced token {token}", value,
                            repr(struct.unpack("<f", found)[0]))
        # one background: equal to the first row outside the two forced positions
        cuts = sorted({token, first_id})
        bounds = [0, *(c * width for cut in cuts for c in (cut, cut + 1)), row_bytes]
        for start, end in zip(bounds[::2], bounds[1::2], strict=True):
            if row[start:end] != first[start:end]:
                raise _mismatch(layout.id, f"row {index} background", "the first row's",
                                "other values")


def _check_construction(case: str, index: int, spec: Mapping[str, Any], row: bytes) -> None:
    where = f"row {index} {spec['type']} construction"
    width = FLOAT32_BYTES
    if spec["type"] == "randn":
        for item in spec.get("set", []):
            token = int(item["id"])
            want = float32_step(decimal_float32(item["value"], what="value"),
                                int(item.get("ulps", 0)))
            if row[token * width:(token + 1) * width] != _bits(want):
                raise _mismatch(case, f"{where}, token {token}", repr(want), "another value")
    elif spec["type"] == "ties":
        _check_ties(case, where, spec, row)
    elif spec["type"] == "adjacent":
        present = set(decode_words(row))
        top = decimal_float32(spec["below"], what="below")
        for k in range(int(spec["count"])):
            step = float32_step(top, -(k + 1))
            if _bits(step) not in present:
                raise _mismatch(case, f"{where}, step {k + 1}", repr(step), "absent")


def decode_words(row: bytes) -> list[bytes]:
    """The row's float32 values as their 4-byte encodings (exact, -0.0 distinct from 0.0)."""
    return [row[i:i + FLOAT32_BYTES] for i in range(0, len(row), FLOAT32_BYTES)]


def _check_ties(case: str, where: str, spec: Mapping[str, Any], row: bytes) -> None:
    vocab = len(row) // FLOAT32_BYTES
    values = [_bits(decimal_float32(g["logit"], what="logit")) for g in spec["groups"]]
    counts = [int(g["count"]) for g in spec["groups"]]
    rest = _bits(decimal_float32(spec["rest"], what="rest")) if "rest" in spec else _bits(0.0)
    expected = [v for v, n in zip(values, counts, strict=True) for _ in range(n)]
    expected += [rest] * (vocab - len(expected))
    words = decode_words(row)
    if spec["placement"] == "permuted":
        if Counter(words) != Counter(expected):
            raise _mismatch(case, where, "the groups' values and counts", "other values")
    elif words != expected:
        raise _mismatch(case, where, "the groups in order", "other values")

