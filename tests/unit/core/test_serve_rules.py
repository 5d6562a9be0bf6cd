"""Rule set serve/v1 on real rows: top-k rows exact, top-k then top-p rows by the seed's
rules against the top-k oracle, forced rows held to the count envelope on every path, the
all-masked argmax defect of seed/v1 fixed, and the mass diagnostics exact."""

from __future__ import annotations

import math
import struct
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core import gate
from harness.core.f32 import unhexf
from harness.core.oracle import top_k_top_p
from harness.core.rulesets import RowInput, rule_set

NEG = -math.inf
SERVE = rule_set("serve/v1")


def _f32(values) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def _output(logits, kept):
    return [v if i in kept else NEG for i, v in enumerate(logits)]


def judge(logits, stock_kept, patched_kept, *, p=None, k=None, forced=None, split=False,
          patched_values=None):
    oracle = top_k_top_p(logits, p32=p, k=k)
    stock = _output(logits, set(stock_kept))
    patched = patched_values or _output(logits, set(patched_kept))
    row = gate.Row("c", 0, "forced" if forced is not None else "ordinary", logits,
                   p if p is not None else 1.0, forced, k)
    data = RowInput(row, oracle, gate.SideOutput("ok", stock), gate.SideOutput("ok", patched),
                    split, None, _f32(logits), {"stock": _f32(stock), "patched": _f32(patched)},
                    False)
    return SERVE.judge(data), oracle


def _canonical(logits):
    return sorted(range(len(logits)), key=lambda i: (-logits[i], i))


ROW = [3.0, 1.0, 1.0, 0.5, 2.0, -1.0, 1.0, 0.0]  # ties at 1.0 (ids 1, 2, 6)


def test_top_k_only_rows_must_be_the_exact_canonical_prefix():
    order = _canonical(ROW)
    good, oracle = judge(ROW, order[:3], order[:3], k=3)
    assert good["stops"] == [] and oracle.count == 3 and good["k"] == 3
    tie_swapped = [*order[:2], 6]  # id 6 instead of id 1 at the tied boundary
    bad, _ = judge(ROW, order[:3], tie_swapped, k=3)
    assert bad["stops"] == ["topk_mismatch"]
    short, _ = judge(ROW, order[:2], order[:3], k=3)
    assert short["stops"] == ["stock_under_keep"]


def test_top_k_then_top_p_rows_follow_the_seeds_rules_against_the_top_k_oracle():
    order = _canonical(ROW)
    result, oracle = judge(ROW, order[:2], order[:2], k=4, p=0.75)
    assert result["stops"] == [] and oracle.count == 2
    missing, _ = judge(ROW, order[:2], [order[1]], k=4, p=0.75)
    assert {"missing_oracle_token", "under_keep", "non_prefix"} <= set(missing["stops"])


def test_a_forced_row_keeping_the_whole_vocabulary_breaks_the_count_envelope():
    logits = [0.25 * (i % 7) for i in range(64)]
    logits[5] = 1e9
    result, oracle = judge(logits, [5], list(range(64)), p=0.875, forced=5)
    assert oracle.count == 1
    assert "count_bound" in result["stops"]
    assert result["diagnostics"]["patched_forced_failures"] == []  # not on the split path


def test_an_all_masked_row_has_no_argmax_even_when_token_0_is_forced():
    logits = [1e9, *([0.0] * 15)]
    result, _ = judge(logits, [], [], p=0.875, forced=0)
    seed = gate._forced_failures(gate.Row("c", 0, "forced", logits, 0.9, 0),
                                 gate._mask([NEG] * 16), [NEG] * 16, False)
    assert "argmax_not_forced" not in seed  # the seed/v1 diagnostic's defect, kept frozen
    assert "argmax_not_forced" in result["diagnostics"]["patched_forced_failures"]
    assert "forced_failure" in result["stops"]


def test_a_kept_value_rewritten_or_a_masked_token_revived_stops():
    logits = [3.0, 2.0, NEG, 1.0]
    out = [3.0, 2.0, 0.0, NEG]  # keeps the masked id 2 with a finite value
    result, _ = judge(logits, [0, 1], [0, 1], k=2, patched_values=out)
    assert "kept_value_changed" in result["stops"]
    assert result["diagnostics"]["patched_values_changed"] == 1


def test_mass_diagnostics_are_the_binary64_softmax_mass_of_each_difference():
    order = _canonical(ROW)
    result, oracle = judge(ROW, order[:4], order[:2] + order[4:6], k=4, p=0.9375)
    kept_outside = set(order[4:6]) - set(oracle.kept)
    dropped = set(oracle.kept) - set(order[:2] + order[4:6])
    total = math.fsum(math.exp(v - 3.0) for v in ROW)
    outside = unhexf(result["diagnostics"]["patched_mass_outside"])
    lost = unhexf(result["diagnostics"]["patched_mass_dropped"])
    assert outside == math.fsum(math.exp(ROW[i] - 3.0) for i in kept_outside) / total
    assert lost == math.fsum(math.exp(ROW[i] - 3.0) for i in dropped) / total
    assert Fraction(outside) > 0 and Fraction(lost) > 0


def _bf16(value: float) -> float:
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("<f", struct.pack("<I", bits))[0]


@given(st.lists(st.floats(-8, 8, width=32).map(_bf16), min_size=2, max_size=120),
       st.one_of(st.none(), st.floats(0.0625, 0.9375, width=32)), st.one_of(st.none(),
                                                                         st.integers(1, 130)),
       st.booleans())
@settings(max_examples=150, deadline=None)
def test_the_oracles_own_kept_set_passes_on_any_bf16_row(logits, p, k, masked):
    if masked:
        logits = [NEG if i % 5 == 4 else v for i, v in enumerate(logits)]
    if p is None and k is None:
        k = 1
    oracle = top_k_top_p(logits, p32=p, k=k)
    result, _ = judge(logits, oracle.kept, oracle.kept, p=p, k=k)
    assert result["stops"] == []
    assert result["diagnostics"]["patched_mass_dropped"] == "0x0.0p+0"
