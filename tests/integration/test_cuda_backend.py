"""The cuda backend on a real GPU (skipped cleanly without CUDA): the public
``apply_top_k_top_p_triton`` takes the split path, stock reproduces the forced-logit
defect, patched keeps exactly the forced token, and ordinary rows stay inside the seed's
per-row envelope around the binary64 oracle."""

from __future__ import annotations

import json
import math
import random
import struct

import pytest

from harness.cli import main
from harness.core.f32 import decode, to_float32
from harness.core.gate import within_count_bound
from harness.core.oracle import reference

pytestmark = [pytest.mark.gpu, pytest.mark.sources]


def _run(tmp_path, rows, vocab, p="0.9"):
    values = [v for row in rows for v in row]
    logits = tmp_path / "x.f32"
    logits.write_bytes(struct.pack(f"<{len(values)}f", *values))
    out = tmp_path / "out"
    assert main(["kernels", "--logits", str(logits), "--vocab", str(vocab), "--p", p,
                 "--backend", "cuda", "--out", str(out)]) == 0
    sides = {}
    for side in ("stock", "patched"):
        evidence = json.loads((out / side / "evidence.json").read_text())
        assert evidence["interpreter"] is False and evidence["backend"] == "cuda"
        assert evidence["cases"][0]["split"]["proven"] is True
        data = decode((out / side / "batch.out.f32").read_bytes())
        sides[side] = [data[i * vocab:(i + 1) * vocab] for i in range(len(rows))]
    return sides


@pytest.mark.parametrize("vocab", [32000, 128256])
def test_forced_logit_defect_on_stock_and_fix_on_patched(tmp_path, vocab):
    rnd = random.Random(vocab)
    rows = []
    for forced in (1e10, 1e30):
        row = [to_float32(rnd.gauss(0, 1)) for _ in range(vocab)]
        row[vocab // 2 + 1] = forced
        rows.append(row)
    sides = _run(tmp_path, rows, vocab)
    for row in sides["stock"]:
        assert all(v == -math.inf for v in row)
    for row in sides["patched"]:
        assert [i for i, v in enumerate(row) if v != -math.inf] == [vocab // 2 + 1]


def test_ordinary_rows_inside_the_envelope(tmp_path):
    vocab = 32000
    rnd = random.Random(42)
    rows = [[to_float32(rnd.gauss(0, 1)) for _ in range(vocab)] for _ in range(4)]
    p32 = to_float32(0.9)
    sides = _run(tmp_path, rows, vocab)
    for i, row in enumerate(rows):
        oracle = reference(row, p32)
        for side in ("stock", "patched"):
            kept = sum(1 for v in sides[side][i] if v != -math.inf)
            assert within_count_bound(kept, oracle.count), (side, i, kept, oracle.count)
