"""Build the captured float32 inputs of a manifest, once and deterministically (CPU torch).

Kernel side (needs torch). Every random draw comes from a fresh CPU
``torch.Generator().manual_seed(seed)``, so CUDA and interpreter runs, and every machine,
consume identical bytes. Exact call order per construction:

ordinary case (upstream tests' style)::

    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch, vocab, generator=g)          # first draw
    p = torch.rand(batch, generator=g) * 0.9 + 0.1           # second draw, float32 ops

forced case: ``background = torch.randn(vocab, generator=Generator().manual_seed(s))``;
row i is a copy of it with ``row[forced_id] = float32(value)``, rows in grid order (value
outermost, then p, then forced id); p is ``float32(p)``.

boundary rows (one construction per row; p is ``float32(p)``):

* ``randn``: ``torch.randn(vocab, generator=Generator().manual_seed(seed))``, then
  ``+ float32(offset)`` as a float32 tensor add, then each ``set`` token becomes
  ``float32(value)`` moved ``ulps`` float32 steps;
* ``ties``: every id at ``float32(rest)``; the groups take ids in order, either
  ``0, 1, 2, ...`` (contiguous) or ``torch.randperm(vocab, generator=Generator().manual_seed(
  seed))`` (permuted), each group at ``float32(logit)``;
* ``adjacent``: ``torch.randn(vocab)`` seeded ``seed``; position ``perm[k]`` of
  ``torch.randperm(vocab)`` seeded ``position_seed`` gets the float32 ``k + 1`` steps below
  ``float32(below)``, for k in 0..count-1.

Nothing here reads the clock or the environment. The same manifest always gives the same
bytes (tests check it with sha256).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..core.call_pattern import index_bytes
from ..core.cases_index import render_cases_index
from ..core.digest import sha256_hex
from ..core.errors import InvalidPError, NonFiniteLogitError, UsageError
from ..core.f32 import runtime_p, to_float32
from ..core.manifest import (
    SCHEMA_V3,
    CaseLayout,
    Manifest,
    case_layout,
    decimal_float32,
    float32_step,
    forced_grid,
    row_ks,
    traffic_sampling,
)
from ..core.names import FORCED, ORDINARY, TRAFFIC
from ..core.oracle import Certified, reference

F32 = torch.float32


@dataclass(frozen=True)
class BuiltCase:
    """One captured case: its layout and its exact input bytes."""

    layout: CaseLayout
    logits: bytes  # batch * vocab little-endian float32, row-major
    p: bytes  # batch little-endian float32 (runtime p)
    k: bytes | None = None  # batch little-endian int32 top-k (version 3 cases)
    call: Mapping[str, bytes] = field(default_factory=dict)  # what a call pattern adds

    def files(self) -> dict[str, bytes]:
        """Every captured input file of the case, by its path in the bundle."""
        found = {self.layout.logits_path: self.logits, self.layout.p_path: self.p}
        if self.layout.k_path is not None and self.k is not None:
            found[self.layout.k_path] = self.k
        found.update(self.call)
        return found


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(int(seed))


def _le_bytes(tensor: torch.Tensor) -> bytes:
    array = tensor.detach().to(F32).contiguous().numpy()
    return array.astype("<f4", copy=False).tobytes()


def _ordinary(case: Mapping[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    g = _generator(case["seed"])
    logits = torch.randn(int(case["batch"]), int(case["vocab"]), generator=g, dtype=F32)
    p = torch.rand(int(case["batch"]), generator=g, dtype=F32) * 0.9 + 0.1
    return logits, p


def _forced(case: Mapping[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    vocab = int(case["vocab"])
    background = torch.randn(vocab, generator=_generator(case["background_seed"]), dtype=F32)
    grid = forced_grid(case)
    logits = background.repeat(len(grid), 1)
    rows = torch.arange(len(grid))
    ids = torch.tensor([token for _, _, token in grid], dtype=torch.long)
    values = torch.tensor(
        [decimal_float32(value, what="forced value") for value, _, _ in grid], dtype=F32
    )
    logits[rows, ids] = values
    p = torch.tensor([runtime_p(p) for _, p, _ in grid], dtype=F32)
    return logits, p


def construct_row(vocab: int, spec: Mapping[str, Any]) -> torch.Tensor:
    """One boundary row from its construction (see the module docstring)."""
    kind = spec["type"]
    if kind == "randn":
        row = torch.randn(vocab, generator=_generator(spec["seed"]), dtype=F32)
        if "offset" in spec:
            row = row + torch.tensor(decimal_float32(spec["offset"], what="offset"), dtype=F32)
        for item in spec.get("set", []):
            base = decimal_float32(item["value"], what="value")
            row[int(item["id"])] = float32_step(base, int(item.get("ulps", 0)))
        return row
    if kind == "ties":
        rest = decimal_float32(spec["rest"], what="rest") if "rest" in spec else 0.0
        row = torch.full((vocab,), rest, dtype=F32)
        if spec["placement"] == "permuted":
            order = torch.randperm(vocab, generator=_generator(spec["seed"]))
        else:
            order = torch.arange(vocab)
        start = 0
        for group in spec["groups"]:
            count = int(group["count"])
            row[order[start : start + count]] = decimal_float32(group["logit"], what="logit")
            start += count
        return row
    if kind == "adjacent":
        row = torch.randn(vocab, generator=_generator(spec["seed"]), dtype=F32)
        count = int(spec["count"])
        positions = torch.randperm(vocab, generator=_generator(spec["position_seed"]))[:count]
        top = decimal_float32(spec["below"], what="below")
        steps = [float32_step(top, -(k + 1)) for k in range(count)]
        row[positions] = torch.tensor(steps, dtype=F32)
        return row
    raise UsageError(f"unknown boundary construction {kind!r}")  # pragma: no cover


def _boundary(case: Mapping[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    vocab = int(case["vocab"])
    logits = torch.stack([construct_row(vocab, row["construction"]) for row in case["rows"]])
    p = torch.tensor([runtime_p(row["p"]) for row in case["rows"]], dtype=F32)
    return logits, p


def _traffic(case: Mapping[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows from the row builders (realistic traffic) and each row's p (1.0: no top-p)."""
    from .row_builders import build_batch

    logits = build_batch(case.get("rows", {}), int(case["vocab"]), int(case["batch"]),
                         int(case["seed"]))
    p = torch.tensor([to_float32(float(p)) for p, _ in traffic_sampling(case)], dtype=F32)
    return logits, p


def case_tensors(case: Mapping[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    """(logits [batch, vocab], p [batch]) float32 CPU tensors of one manifest case, checked:
    finite logits (a traffic row may also mask tokens at -inf), p in (0, 1) (a traffic row
    may have p = 1.0, no top-p)."""
    kind = case["kind"]
    if kind == TRAFFIC:
        logits, p = _traffic(case)
        _check_masked_finite(logits)
        _check_p(p, allow_one=True)
        return logits, p
    if kind == ORDINARY:
        logits, p = _ordinary(case)
    elif kind == FORCED:
        logits, p = _forced(case)
    else:
        logits, p = _boundary(case)
    _check_finite(logits)
    _check_p(p)
    return logits, p


def _check_finite(logits: torch.Tensor) -> None:
    bad = (~torch.isfinite(logits)).nonzero()
    if bad.numel():
        row, token = (int(v) for v in bad[0])
        raise NonFiniteLogitError(row, token, float(logits[row, token]))


def _check_masked_finite(logits: torch.Tensor) -> None:
    """Finite or -inf (a masked token); never NaN or +inf, never a fully masked row."""
    bad = (torch.isnan(logits) | torch.isposinf(logits)).nonzero()
    if bad.numel():
        row, token = (int(v) for v in bad[0])
        raise NonFiniteLogitError(row, token, float(logits[row, token]))
    if bool(torch.isneginf(logits).all(dim=1).any()):
        raise UsageError("a traffic row masks every token")


def _check_p(p: torch.Tensor, *, allow_one: bool = False) -> None:
    for value in p.tolist():
        if not (math.isfinite(value) and 0.0 < value and (value < 1.0 or
                                                           (allow_one and value == 1.0))):
            raise InvalidPError(value, value)


def build_case(case: Mapping[str, Any], *, has_k: bool = False) -> BuiltCase:
    """One case's captured bytes; ``has_k`` (every case of a version 3 manifest) adds the
    per-row int32 top-k file."""
    logits, p = case_tensors(case)
    layout = case_layout(case, has_k=has_k)
    ks = row_ks(case, has_k=has_k)
    k = struct.pack(f"<{len(ks)}i", *ks) if ks is not None else None
    return BuiltCase(layout=layout, logits=_le_bytes(logits), p=_le_bytes(p), k=k,
                     call=call_files(layout))


def call_files(layout: CaseLayout) -> dict[str, bytes]:
    """The captured files of the case's call pattern (:mod:`harness.core.call_pattern`): the
    padding columns of a strided logits buffer, drawn from their own generator, and the
    index array in its declared integer type."""
    files: dict[str, bytes] = {}
    call = layout.call
    if layout.padding_path is not None and call.row_stride is not None:
        padding = torch.randn(layout.batch, call.row_stride - layout.vocab,
                              generator=_generator(int(call.padding_seed or 0)), dtype=F32)
        files[layout.padding_path] = _le_bytes(padding)
    if layout.indices_path is not None:
        files[layout.indices_path] = index_bytes(call)
    return files


def build_cases(manifest: Manifest) -> list[BuiltCase]:
    """Every case of ``manifest`` in order. The manifest was limit-checked when parsed."""
    has_k = manifest.data["schema"] == SCHEMA_V3
    return [build_case(case, has_k=has_k) for case in manifest.cases]


def write_cases(manifest: Manifest, out_dir: str | Path) -> dict[str, str]:
    """Write ``cases.json`` and ``inputs/*.f32`` under ``out_dir``; return {path: sha256}.

    Refuses to overwrite an existing ``cases.json`` or ``inputs/`` folder.
    """
    root = Path(out_dir)
    index_path, inputs = root / "cases.json", root / "inputs"
    if index_path.exists() or inputs.exists():
        raise UsageError(f"{root}: cases.json or inputs/ already exists; refusing to overwrite")
    built = build_cases(manifest)
    inputs.mkdir(parents=True)
    digests: dict[str, str] = {}
    for case in built:
        for rel, data in case.files().items():
            (root / rel).write_bytes(data)
            digests[rel] = sha256_hex(data)
    index = render_cases_index([case.layout for case in built], manifest.sampling)
    index_path.write_bytes(index)
    digests["cases.json"] = sha256_hex(index)
    return digests


def row_values(built: BuiltCase, row: int) -> list[float]:
    """One row of a built case as exact Python floats (for the oracle)."""
    vocab = built.layout.vocab
    start = 4 * vocab * row
    values: list[float] = np.frombuffer(built.logits[start : start + 4 * vocab], "<f4").tolist()
    return values


# --- p that exists only after float32 conversion --------------------------------------------


def count_for_target(weights: Sequence[float], target: float) -> int:
    """Smallest count whose ``math.fsum`` prefix of ``weights`` reaches ``target``.

    ``weights`` are the oracle's canonical-order binary64 weights. fsum is correctly
    rounded, so prefix sums of non-negative weights are monotone and bisection is exact.
    """
    lo, hi = 1, len(weights)
    while lo < hi:
        mid = (lo + hi) // 2
        if math.fsum(weights[:mid]) >= target:
            hi = mid
        else:
            lo = mid + 1
    return lo


def decimal_and_float32_counts(row: Sequence[float], p_text: str) -> tuple[int, int]:
    """(oracle count with float32(p), count the same procedure gives with binary64 p).

    The first is ``harness.core.oracle.reference`` itself; the second reuses its weights and
    normalizer with ``target = float(p_text) * normalizer``.
    """
    outcome = reference(row, runtime_p(p_text))
    if not isinstance(outcome, Certified):
        raise UsageError(f"oracle boundary ambiguous for p={p_text}")
    target64 = float(p_text) * outcome.normalizer
    return outcome.count, count_for_target(outcome.weights, target64)


def find_float32_only_p(row: Sequence[float], near: str, *, max_digits: int = 12,
                        span: int = 4) -> str:
    """Search, with the oracle, for a short decimal p near ``near`` whose float32 rounding
    gives a different oracle count than the decimal itself.

    The centre is the canonical-prefix fraction where the oracle count for ``near`` starts
    (``fsum(weights[:count - 1]) / normalizer``). Candidates are that centre rounded to d
    decimal digits, plus or minus up to ``span`` units of the last digit, for
    d = 1..max_digits, nearest first; the first candidate whose two counts differ wins.
    """
    try:
        Decimal(near)
    except InvalidOperation:
        raise UsageError(f"not a decimal: {near!r}") from None
    reference_outcome = reference(row, runtime_p(near))
    if not isinstance(reference_outcome, Certified):
        raise UsageError(f"oracle boundary ambiguous for p={near}")
    weights, normalizer = reference_outcome.weights, reference_outcome.normalizer
    # Centre the search on the boundary fraction of the prefix just below the oracle count
    # for ``near``: decimals within a float32 half-step of it are where the two can differ.
    centre = Decimal(reference_outcome.prefix_below_count / normalizer)
    for digits in range(1, max_digits + 1):
        unit = Decimal(1).scaleb(-digits)
        start = centre.quantize(unit)
        for offset in sorted(range(-span, span + 1), key=abs):
            candidate = start + offset * unit
            if not 0 < candidate < 1:
                continue
            text = format(candidate, "f")
            try:
                p32 = runtime_p(text)
            except InvalidPError:
                continue
            count32 = count_for_target(weights, p32 * normalizer)
            count64 = count_for_target(weights, float(text) * normalizer)
            if count32 != count64:
                return text
    raise UsageError(f"no float32-only p found near {near} within {max_digits} digits")
