"""Rows that look like real traffic, built deterministically from a spec (CPU torch).

Kernel side (needs torch). Nothing here reads the clock, the environment or a GPU: every
random draw comes from a CPU ``torch.Generator`` seeded explicitly, so the same spec, vocab
and seed give the same bytes on every machine (tests pin a sha256).

What a vLLM server hands its top-k/top-p sampler, and where (vLLM 0.33.0 wheel):

* logits computed in bf16 and cast to float32: ``logits.to(torch.float32)`` in
  ``vllm/v1/sample/sampler.py:158`` (V1), ``torch.empty_like(logits, dtype=torch.float32)
  .copy_(logits)`` in ``vllm/v1/worker/gpu/sample/sampler.py:242`` (the V2 runner): bf16 has
  8 significand bits, so a row carries many exact ties;
* grammar masks and banned words set to -inf: ``vllm/v1/worker/gpu/structured_outputs.py:169``
  (``tl.store(..., -float("inf"), ...)``), ``vllm/v1/sample/ops/bad_words.py:6``;
* forced tokens at 1e9 (the thinking budget forcing its end token):
  ``vllm/v1/worker/gpu/sample/thinking_budget.py:365`` (``tl.store(..., 1.0e9)``) and
  ``vllm/v1/sample/thinking_budget_state.py:579-580`` (``logits.new_full(..., 1e9)`` then
  ``index_put_``): a float32 1e9 (exactly 1953125 * 2**9) written over the logit;
* temperature: ``logits.div_(temp.unsqueeze(dim=1))`` with a float32 temperature tensor in
  ``vllm/v1/sample/sampler.py:300`` (temperature buffer float32,
  ``vllm/v1/worker/gpu_input_batch.py:195-196``); the V2 runner divides in its Triton
  ``_temperature_kernel`` (``vllm/v1/worker/gpu/sample/gumbel.py:43``, ``logits /
  temperature`` in float32; its comment at line 189-190 notes that ``tl.div_rn`` is not
  used, so on a GPU that division need not be correctly rounded). Here the division is
  torch's float32 CPU division, correctly rounded: the V1 operation. Temperature 1.0 (and
  0.0, greedy) are skipped by vLLM (``gumbel.py:33``); a spec simply omits it.
* order in the V2 runner (``vllm/v1/worker/gpu/sample/sampler.py:241-268``): float32 copy,
  logits processors (masks), thinking-budget forcing ("runs last so no stage can overwrite
  the forced end marker"), then temperature, then top-k/top-p.

A spec (a JSON-like mapping; decimals may be strings, as manifests write them) has these
keys, every one optional except that unknown keys are refused:

``base``            ``"randn"`` (the default) or ``"rand"``: the base row is ``torch.randn(
                    vocab, generator=Generator().manual_seed(seed))`` (the same draw as
                    ``harness.capture.cases``' ``randn`` rows), or ``torch.rand`` from the same
                    generator (uniform in [0, 1): the rows FlashInfer's own sampling tests
                    build, as in its regression test of PR #2325).
``scale``           decimal; the base row times float32(scale).
``dominant``        ``{"count": d, "delta": decimal}``: d distinct tokens, the first d of
                    ``torch.randperm(vocab)`` from the ``"dominant"`` generator, get
                    ``+ float32(delta)`` (float32 add) over the randn tail.
``round``           ``"bf16"`` or ``"fp16"``: the model's output dtype; the row is cast to
                    it and back to float32 (round to nearest even). An fp16 overflow is refused.
``mask_fraction``   decimal f in [0, 1): exactly ``floor(f * vocab)`` tokens (exact rational
                    arithmetic on the decimal) become -inf: the first of ``torch.randperm(
                    vocab)`` from the ``"mask"`` generator.
``force``           ``{"count": c}`` (the first c of ``torch.randperm(vocab)`` from the
                    ``"force"`` generator) or ``{"ids": [...]}``, optional ``"value"``
                    (decimal, default ``"1e9"``): those tokens become float32(value),
                    overwriting a mask as vLLM's ``index_put_`` does.
``temperature``     decimal > 0: the row divided by float32(temperature), float32.

Steps run in this fixed order: base, scale, dominant, round, mask, force, temperature (the
model's logits, its output dtype, then vLLM's order). Each step that draws uses its own
generator, seeded with ``sub_seed(seed, step)`` (the first 8 bytes of
``sha256(f"{seed}:{step}")``, little-endian, below 2**63), so adding one step never moves
another step's draws. :func:`build_batch` gives row i the seed ``sub_seed(seed, f"row{i}")``.

Public API: :func:`build_row`, :func:`build_batch`, :data:`SPEC_KEYS`, and the pure
transformations :func:`round_through`, :func:`divide_by_temperature`,
:func:`grammar_mask`, :func:`add_dominant`, :func:`force_tokens`.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

import torch

from ..core.errors import ManifestError
from ..core.f32 import to_float32

F32 = torch.float32
FORCED_LOGIT = "1e9"  # what vLLM writes (thinking_budget.py:365, thinking_budget_state.py:579)
ROUND_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
SPEC_KEYS = ("base", "scale", "dominant", "round", "mask_fraction", "force", "temperature")


def sub_seed(seed: int, step: str) -> int:
    """A seed for one step of one row, independent of every other step's draws."""
    digest = hashlib.sha256(f"{int(seed)}:{step}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(int(seed))


def _decimal(value: Any, what: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ManifestError(f"{what}={value!r} is not a decimal")
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        raise ManifestError(f"{what}={value!r} is not a decimal") from None
    if not number.is_finite():
        raise ManifestError(f"{what}={value!r} is not finite")
    return number


def _float32(value: Any, what: str) -> float:
    result = to_float32(float(_decimal(value, what)))
    if not math.isfinite(result):
        raise ManifestError(f"{what}={value!r} is not finite after float32 conversion")
    return result


def _count(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ManifestError(f"{what}={value!r} must be a non-negative integer")
    return value


# --- pure transformations (each returns a new float32 tensor) ----------------------------------


def round_through(row: torch.Tensor, dtype: str) -> torch.Tensor:
    """Cast to ``"bf16"`` or ``"fp16"`` and back to float32 (round to nearest even), as a
    model computing in that dtype hands its logits to the float32 sampler."""
    if dtype not in ROUND_DTYPES:
        raise ManifestError(f"round={dtype!r}: expected one of {sorted(ROUND_DTYPES)}")
    out = row.to(ROUND_DTYPES[dtype]).to(F32)
    if not torch.isfinite(out[torch.isfinite(row)]).all():
        raise ManifestError(f"round={dtype}: a finite logit overflows {dtype}")
    return out


def divide_by_temperature(row: torch.Tensor, temperature: float) -> torch.Tensor:
    """``row / temperature`` in float32 (correctly rounded), ``temperature`` a float32 value
    > 0: vLLM's ``logits.div_(temp.unsqueeze(dim=1))`` for one row."""
    if not (math.isfinite(temperature) and temperature > 0.0
            and to_float32(temperature) == temperature):
        raise ManifestError(f"temperature={temperature!r} must be a finite float32 above 0")
    return row.to(F32) / torch.tensor(temperature, dtype=F32)


def grammar_mask(row: torch.Tensor, count: int, generator: torch.Generator) -> torch.Tensor:
    """Exactly ``count`` tokens (the first of ``randperm(vocab)``) set to -inf; at least one
    token stays unmasked (an all -inf row is invalid input for the oracle)."""
    vocab = row.shape[-1]
    if not 0 <= count < vocab:
        raise ManifestError(f"mask of {count} tokens: must leave 1 of {vocab} unmasked")
    out = row.clone()
    ids = torch.randperm(vocab, generator=generator)[:count]
    out[ids] = -math.inf
    return out


def add_dominant(row: torch.Tensor, count: int, delta: float,
                 generator: torch.Generator) -> torch.Tensor:
    """``count`` distinct tokens (the first of ``randperm(vocab)``) get ``+ delta`` (float32)."""
    vocab = row.shape[-1]
    if not 0 <= count <= vocab:
        raise ManifestError(f"dominant count {count} is not within a vocab of {vocab}")
    out = row.clone()
    ids = torch.randperm(vocab, generator=generator)[:count]
    out[ids] = out[ids] + torch.tensor(delta, dtype=F32)
    return out


def force_tokens(row: torch.Tensor, ids: Sequence[int],
                 value: float = float(FORCED_LOGIT)) -> torch.Tensor:
    """``row[ids] = float32(value)``, as vLLM's thinking budget forces its end token."""
    vocab = row.shape[-1]
    if any(isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < vocab for i in ids):
        raise ManifestError(f"forced ids {list(ids)!r} must be token ids below {vocab}")
    out = row.clone()
    out[torch.tensor(list(ids), dtype=torch.long)] = torch.tensor(to_float32(value), dtype=F32)
    return out


# --- specs ------------------------------------------------------------------------------------


def _mask_count(fraction: Any, vocab: int) -> int:
    f = Fraction(_decimal(fraction, "mask_fraction"))
    if not 0 <= f < 1:
        raise ManifestError(f"mask_fraction={fraction!r} must be in [0, 1)")
    return math.floor(f * vocab)


def _forced_ids(force: Mapping[str, Any], vocab: int, seed: int) -> list[int]:
    unknown = set(force) - {"count", "ids", "value"}
    if unknown or ("count" in force) == ("ids" in force):
        raise ManifestError("force needs exactly one of count or ids (and optionally value)")
    if "ids" in force:
        ids = force["ids"]
        if not isinstance(ids, list) or len(set(map(repr, ids))) != len(ids):
            raise ManifestError("force ids must be a list of distinct token ids")
        return list(ids)
    count = _count(force["count"], "force count")
    if not 1 <= count <= vocab:
        raise ManifestError(f"force count {count} is not within a vocab of {vocab}")
    perm = torch.randperm(vocab, generator=_generator(sub_seed(seed, "force")))
    return [int(i) for i in perm[:count]]


def build_row(spec: Mapping[str, Any], vocab: int, seed: int) -> torch.Tensor:
    """One float32 row of ``vocab`` logits from ``spec`` (module docstring) and ``seed``."""
    if isinstance(vocab, bool) or not isinstance(vocab, int) or vocab < 1:
        raise ManifestError(f"vocab={vocab!r} must be a positive integer")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ManifestError(f"seed={seed!r} must be a non-negative integer")
    unknown = sorted(set(spec) - set(SPEC_KEYS))
    if unknown:
        raise ManifestError(f"unknown row builder keys {unknown}; known: {list(SPEC_KEYS)}")
    base = spec.get("base", "randn")
    if base not in ("randn", "rand"):
        raise ManifestError(f"row builder base {base!r}: use 'randn' or 'rand'")
    draw = torch.randn if base == "randn" else torch.rand
    row = draw(vocab, generator=_generator(seed), dtype=F32)
    if "scale" in spec:
        row = row * torch.tensor(_float32(spec["scale"], "scale"), dtype=F32)
    if "dominant" in spec:
        dominant = spec["dominant"]
        if not isinstance(dominant, Mapping) or set(dominant) != {"count", "delta"}:
            raise ManifestError("dominant needs exactly count and delta")
        row = add_dominant(row, _count(dominant["count"], "dominant count"),
                           _float32(dominant["delta"], "dominant delta"),
                           _generator(sub_seed(seed, "dominant")))
    if "round" in spec:
        row = round_through(row, spec["round"])
    if "mask_fraction" in spec:
        row = grammar_mask(row, _mask_count(spec["mask_fraction"], vocab),
                           _generator(sub_seed(seed, "mask")))
    if "force" in spec:
        force = spec["force"]
        if not isinstance(force, Mapping):
            raise ManifestError("force must be a mapping")
        value = _float32(force.get("value", FORCED_LOGIT), "force value")
        row = force_tokens(row, _forced_ids(force, vocab, seed), value)
    if "temperature" in spec:
        row = divide_by_temperature(row, _float32(spec["temperature"], "temperature"))
    return row


def build_batch(spec: Mapping[str, Any], vocab: int, batch: int, seed: int) -> torch.Tensor:
    """``batch`` rows of one spec, row i built with ``sub_seed(seed, f"row{i}")``."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ManifestError(f"batch={batch!r} must be a positive integer")
    return torch.stack([build_row(spec, vocab, sub_seed(seed, f"row{i}"))
                        for i in range(batch)])
