"""benchmarks/cuda_vs_interpreter.py: the per-row comparison and the sub-case row slicing."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("cuda_vs_interpreter",
                                               ROOT / "benchmarks" / "cuda_vs_interpreter.py")
assert _spec and _spec.loader
cvi = importlib.util.module_from_spec(_spec)
sys.modules["cuda_vs_interpreter"] = cvi
_spec.loader.exec_module(cvi)

from harness.core.f32 import encode  # noqa: E402

NEG = -math.inf
LOGITS = [3.0, 1.0, 0.5, -2.0, 0.25]


def test_identical_rows() -> None:
    out = encode([3.0, 1.0, NEG, NEG, NEG])
    r = cvi.compare_row(out, out, encode(LOGITS), 2)
    assert r["byte_identical"] and r["kept_sets_equal"]
    assert (r["kept_cuda"], r["kept_interpreter"], r["oracle_count"]) == (2, 2, 2)
    assert r["symdiff"] == 0 and r["differing_words"] == 0 and r["first_differing_id"] is None


def test_different_kept_sets_name_the_ids() -> None:
    cuda = encode([3.0, 1.0, 0.5, NEG, NEG])
    interp = encode([3.0, 1.0, NEG, NEG, 0.25])
    r = cvi.compare_row(cuda, interp, encode(LOGITS), None)
    assert not r["byte_identical"] and not r["kept_sets_equal"]
    assert (r["kept_cuda"], r["kept_interpreter"]) == (3, 3)
    assert r["only_cuda"] == [2] and r["only_interpreter"] == [4] and r["symdiff"] == 2
    assert r["differing_words"] == 2 and r["first_differing_id"] == 2


def test_same_kept_set_other_bits() -> None:
    """A kept value that is not the input's bits: same kept set, not byte-identical."""
    cuda = encode([3.0, 1.0, NEG, NEG, NEG])
    interp = encode([3.0, 1.0000001192092896, NEG, NEG, NEG])  # next float32 after 1.0
    r = cvi.compare_row(cuda, interp, encode(LOGITS), None)
    assert r["kept_sets_equal"] and not r["byte_identical"]
    assert r["kept_values_differ"] == 1
    assert (r["cuda_kept_not_input_bits"], r["interpreter_kept_not_input_bits"]) == (0, 1)


def test_nan_is_not_kept_and_signed_zero_differs() -> None:
    cuda = encode([math.nan, 0.0, NEG, NEG, NEG])
    interp = encode([NEG, -0.0, NEG, NEG, NEG])
    r = cvi.compare_row(cuda, interp, encode([0.0] * 5), None)
    assert r["kept_cuda"] == 1 and r["kept_sets_equal"]
    assert r["differing_words"] == 2 and r["kept_values_differ"] == 1


def test_rows_of_other_lengths_refused() -> None:
    with pytest.raises(ValueError):
        cvi.compare_row(encode([1.0]), encode([1.0, 2.0]), encode([1.0]), None)


def test_slice_rows_keeps_exact_bytes() -> None:
    data = encode([float(i) for i in range(12)])  # 4 rows of 3
    picked = cvi._slice_rows(data, (3, 0), 12)
    assert picked == data[36:48] + data[0:12]


def test_summary_counts() -> None:
    rows = [{"byte_identical": True, "kept_sets_equal": True, "kept_cuda": 1,
             "kept_interpreter": 1},
            {"byte_identical": False, "kept_sets_equal": False, "kept_cuda": 2,
             "kept_interpreter": 2}]
    assert cvi.summarize(rows) == {"rows": 2, "byte_identical": 1, "kept_sets_equal": 1,
                                   "kept_count_equal": 2}


def test_plan_is_declared_and_sub_case_ids_are_case_ids() -> None:
    import re

    ids = [p.id for p in cvi.PLAN]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"[a-z0-9][a-z0-9._-]*", i) for i in ids)
    assert cvi.Planned("forced-v32000", (0, 13), 8, "").id == "forced-v32000.rows-0-13"
