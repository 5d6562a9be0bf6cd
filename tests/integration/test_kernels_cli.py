"""``topp-gate kernels``: both pinned sides on one batch of a user's own bytes."""

from __future__ import annotations

import json
import math
import struct

import pytest

from harness.cli import main
from harness.core.f32 import decode


def _write(path, values):
    path.write_bytes(struct.pack(f"<{len(values)}f", *values))
    return str(path)


@pytest.mark.slow
@pytest.mark.sources
def test_forced_row_reproduces_the_defect_on_stock_only(tmp_path, capsys):
    vocab = 2048
    row = [math.sin(i) for i in range(vocab)]
    row[7] = 1e30
    logits = _write(tmp_path / "x.f32", row)
    out = tmp_path / "out"
    code = main(["kernels", "--logits", logits, "--vocab", str(vocab), "--p", "0.9",
                 "--backend", "interpreter", "--num-sm", "4", "--out", str(out)])
    assert code == 0, capsys.readouterr()
    stock = decode((out / "stock" / "batch.out.f32").read_bytes())
    patched = decode((out / "patched" / "batch.out.f32").read_bytes())
    assert all(v == -math.inf for v in stock)  # the defect: the whole row masked
    assert [i for i, v in enumerate(patched) if v != -math.inf] == [7]
    for side in ("stock", "patched"):
        evidence = json.loads((out / side / "evidence.json").read_text())
        assert evidence["interpreter"] is True
        assert evidence["cases"][0]["split"]["proven"] is True


@pytest.mark.parametrize("args,needle", [
    (["--vocab", "3"], "bad_shape"),
    (["--vocab", "1", "--p", "1.5"], "invalid_p"),
])
def test_bad_input_is_refused_before_anything_runs(tmp_path, capsys, args, needle):
    logits = _write(tmp_path / "x.f32", [0.0, 1.0])
    base = ["kernels", "--logits", logits, "--p", "0.9", "--backend", "interpreter",
            "--out", str(tmp_path / "out")]
    assert main(base + args) == 2
    assert needle in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_batch_over_64_is_refused(tmp_path, capsys):
    logits = _write(tmp_path / "x.f32", [0.0] * 65)
    assert main(["kernels", "--logits", logits, "--vocab", "1", "--p", "0.5", "--backend",
                 "interpreter", "--out", str(tmp_path / "out")]) == 2
    assert "split path" in capsys.readouterr().err
