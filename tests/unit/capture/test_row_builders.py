"""harness.capture.row_builders: determinism, pinned bytes, and each builder's property.

Pinned digests (PINNED below) were computed once, on 2026-12-01, with torch 2.13.0+cpu, by
``hashlib.sha256(build_row(SPEC, 64, 7).numpy().astype("<f4").tobytes()).hexdigest()`` and
the same for ``build_batch({"round": "bf16"}, 32, 3, 11)``. They pin the draw order of the
module docstring: a change there changes captured inputs, so it must change a manifest
version, never silently. (CPU torch's generator is specified to give the same numbers on
every machine; a fresh interpreter is checked below.)
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
import subprocess
import sys
from fractions import Fraction

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.capture import row_builders as rb
from harness.core.errors import ManifestError
from harness.core.f32 import to_float32
from harness.core.oracle import Certified, top_k_top_p

SPEC = {"scale": "2.0", "dominant": {"count": 3, "delta": "8"}, "round": "bf16",
        "mask_fraction": "0.25", "force": {"count": 1}, "temperature": "0.7"}
PINNED = {
    "row": "128a9a96ca387719000086727e367c9cbf161cf666216dd1c47d4ef5090e802e",
    "batch": "7d9bcc9c55b9e2ebfb8c5a9d1fa78d67debec83c770eb28f13a2cb2a3b822566",
}


def digest(tensor: torch.Tensor) -> str:
    return hashlib.sha256(tensor.numpy().astype("<f4").tobytes()).hexdigest()


def test_same_bytes_twice_and_the_pinned_digests():
    assert digest(rb.build_row(SPEC, 64, 7)) == digest(rb.build_row(SPEC, 64, 7))
    assert digest(rb.build_row(SPEC, 64, 7)) == PINNED["row"]
    assert digest(rb.build_batch({"round": "bf16"}, 32, 3, 11)) == PINNED["batch"]


def test_a_fresh_interpreter_builds_the_same_bytes():
    code = ("import hashlib, json, sys; from harness.capture.row_builders import build_row; "
            "spec = json.loads(sys.argv[1]); "
            "print(hashlib.sha256(build_row(spec, 64, 7).numpy().astype('<f4').tobytes())"
            ".hexdigest())")
    out = subprocess.run([sys.executable, "-c", code, json.dumps(SPEC)], check=True,
                         capture_output=True, text=True).stdout.strip()
    assert out == PINNED["row"]


def test_the_base_row_is_cases_randn_draw():
    g = torch.Generator().manual_seed(5)
    assert torch.equal(rb.build_row({}, 100, 5), torch.randn(100, generator=g))


def test_adding_a_step_never_moves_another_steps_draws():
    masked = rb.build_row({"mask_fraction": "0.5"}, 1000, 3)
    both = rb.build_row({"mask_fraction": "0.5", "dominant": {"count": 4, "delta": "1"}},
                        1000, 3)
    assert torch.equal(torch.isinf(masked), torch.isinf(both))


def test_rows_of_a_batch_differ_and_each_is_build_row():
    batch = rb.build_batch({"round": "bf16"}, 200, 4, 9)
    assert batch.shape == (4, 200) and batch.dtype == torch.float32
    for i in range(4):
        expected = rb.build_row({"round": "bf16"}, 200, rb.sub_seed(9, f"row{i}"))
        assert torch.equal(batch[i], expected)
    assert not torch.equal(batch[0], batch[1])


# --- properties of each builder -----------------------------------------------------------------


def _bf16_by_bits(value: float) -> float:
    """Round-to-nearest-even to bfloat16 by bit arithmetic (independent of torch)."""
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def test_bf16_rows_are_bf16_values_with_many_exact_ties():
    base = rb.build_row({}, 32000, 1)
    row = rb.build_row({"round": "bf16"}, 32000, 1)
    assert [_bf16_by_bits(v) for v in base.tolist()] == row.tolist()
    assert len(set(row.tolist())) < 32000 // 10  # 8 significand bits: ties everywhere


def test_fp16_rows_are_fp16_values_and_overflow_is_refused():
    row = rb.build_row({"round": "fp16"}, 5000, 2)
    assert torch.equal(row.to(torch.float16).to(torch.float32), row)
    assert [struct.unpack("<e", struct.pack("<e", v))[0] for v in row.tolist()] == row.tolist()
    assert len(set(row.tolist())) < 5000
    with pytest.raises(ManifestError, match="overflows"):
        rb.build_row({"scale": "1e5", "round": "fp16"}, 100, 2)


FRACTIONS = ["0", "0.001", "0.1", "0.25", "0.3", "0.33", "0.5", "0.9", "0.999", "0.9999"]


@given(st.integers(1, 3000), st.sampled_from(FRACTIONS), st.integers(0, 2**32))
@settings(max_examples=60, deadline=None)
def test_exactly_the_fraction_of_tokens_is_masked(vocab, text, seed):
    expected = math.floor(Fraction(text) * vocab)
    if expected >= vocab:  # would mask the whole row: refused
        with pytest.raises(ManifestError):
            rb.build_row({"mask_fraction": text}, vocab, seed)
        return
    row = rb.build_row({"mask_fraction": text}, vocab, seed)
    assert int(torch.isneginf(row).sum()) == expected
    assert not torch.isnan(row).any() and not torch.isposinf(row).any()


def test_mask_fraction_is_exact_decimal_arithmetic():
    # 0.3 * 10 is 3 exactly as decimals (binary64 0.3 * 10 would be 3.0000000000000004)
    row = rb.build_row({"mask_fraction": "0.3"}, 10, 0)
    assert int(torch.isneginf(row).sum()) == 3
    for bad in ("1", "1.0", "-0.1", "nan", "x", True):
        with pytest.raises(ManifestError):
            rb.build_row({"mask_fraction": bad}, 10, 0)


def test_forced_tokens_are_float32_1e9_and_overwrite_masks():
    row = rb.build_row({"mask_fraction": "0.9", "force": {"ids": [0, 5]}}, 10, 4)
    assert row[0].item() == 1e9 and row[5].item() == 1e9  # 1e9 is exactly a float32
    assert to_float32(1e9) == 1e9
    row = rb.build_row({"force": {"count": 3, "value": "1e30"}}, 1000, 4)
    assert int((row == to_float32(1e30)).sum()) == 3
    with pytest.raises(ManifestError):
        rb.build_row({"force": {"ids": [10]}}, 10, 0)
    with pytest.raises(ManifestError):
        rb.build_row({"force": {"count": 1, "ids": [1]}}, 10, 0)


def test_dominant_tokens_stand_delta_above_their_base():
    base = rb.build_row({}, 1000, 8)
    row = rb.build_row({"dominant": {"count": 5, "delta": "12.5"}}, 1000, 8)
    moved = (row != base).nonzero().flatten().tolist()
    assert len(moved) == 5
    for t in moved:
        assert row[t].item() == to_float32(base[t].item() + 12.5)
    assert sorted(row.tolist())[-5] > sorted(base.tolist())[-1]  # the top 5 are the moved


def test_temperature_is_correctly_rounded_float32_division():
    base = rb.build_row({"round": "bf16", "force": {"count": 1}}, 3000, 6)
    t = to_float32(0.7)
    row = rb.build_row({"round": "bf16", "force": {"count": 1}, "temperature": "0.7"}, 3000, 6)
    # binary64 quotient rounded to float32 is the correctly rounded float32 quotient
    # (53 >= 2 * 24 + 2: double rounding is innocuous for division)
    assert row.tolist() == [to_float32(v / t) for v in base.tolist()]
    masked = rb.build_row({"mask_fraction": "0.5", "temperature": "0.25"}, 100, 6)
    assert int(torch.isneginf(masked).sum()) == 50
    for bad in ("0", "-1", "inf"):
        with pytest.raises(ManifestError):
            rb.build_row({"temperature": bad}, 10, 0)


def test_unknown_keys_and_bad_arguments_are_refused():
    for spec, vocab, seed in (({"colour": 1}, 10, 0), ({}, 0, 0), ({}, 10, -1),
                              ({"round": "fp8"}, 10, 0), ({"dominant": {"count": 1}}, 10, 0),
                              ({"dominant": {"count": 11, "delta": "1"}}, 10, 0)):
        with pytest.raises(ManifestError):
            rb.build_row(spec, vocab, seed)
    with pytest.raises(ManifestError):
        rb.build_batch({}, 10, 0, 0)


def test_the_oracle_judges_every_builders_rows():
    for spec in ({"round": "bf16"}, {"mask_fraction": "0.5"}, SPEC,
                 {"force": {"count": 1}, "temperature": "0.1"},
                 {"dominant": {"count": 3, "delta": "20"}, "round": "fp16"}):
        row = rb.build_row(spec, 2000, 3).tolist()
        for p, k in ((to_float32(0.9), None), (to_float32(0.9), 50), (None, 1000)):
            out = top_k_top_p(row, p32=p, k=k)
            assert isinstance(out, Certified)
            assert all(row[t] != -math.inf for t in out.kept)


def test_base_rand_draws_uniform_rows_from_the_row_seed() -> None:
    """``base: rand``: FlashInfer's own tests' rows (uniform in [0, 1)), from the same
    generator a randn row uses; every later step applies as before."""
    row = rb.build_row({"base": "rand"}, 64, 7)
    assert torch.equal(row, torch.rand(64, generator=torch.Generator().manual_seed(7)))
    assert bool(((row >= 0) & (row < 1)).all())
    assert not torch.equal(row, rb.build_row({}, 64, 7))
    bf16 = rb.build_row({"base": "rand", "round": "bf16"}, 64, 7)
    assert torch.equal(bf16, row.to(torch.bfloat16).to(torch.float32))


def test_an_unknown_base_is_refused() -> None:
    with pytest.raises(ManifestError, match="use 'randn' or 'rand'"):
        rb.build_row({"base": "gumbel"}, 64, 7)
