"""``topp-gate oracle`` through main(argv), in-process: output contract and exit codes."""

from __future__ import annotations

import json
import struct

import pytest

from harness.cli import main


def write_f32(path, values):
    path.write_bytes(struct.pack(f"<{len(values)}f", *values))
    return str(path)


def test_json_lines_per_row(tmp_path, capsys):
    f = write_f32(tmp_path / "x.f32", [1.0] * 8 + [0.0, 5.0, 0.0, 0.0])
    assert main(["oracle", f, "--p", "0.5", "--vocab", "4", "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines == [{"row": 0, "count": 2, "kept": [0, 1]},
                     {"row": 1, "count": 2, "kept": [0, 1]},
                     {"row": 2, "count": 1, "kept": [1]}]


def test_default_is_one_row_and_human_text(tmp_path, capsys):
    f = write_f32(tmp_path / "x.f32", [0.0, 1.0, 2.0])
    assert main(["oracle", f, "--p", "0.9"]) == 0
    assert capsys.readouterr().out.startswith("row 0: keep ")


@pytest.mark.parametrize("values,args,needle", [
    ([0.0, float("nan")], ["--p", "0.5"], "non_finite_logit"),
    ([0.0, float("inf")], ["--p", "0.5"], "non_finite_logit"),
    ([0.0, 1.0], ["--p", "1.0"], "invalid_p"),
    ([0.0, 1.0], ["--p", "0"], "invalid_p"),
    ([0.0, 1.0, 2.0], ["--p", "0.5", "--vocab", "2"], "bad_shape"),
    ([], ["--p", "0.5"], "bad_shape"),
])
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, values, args, needle):
    f = write_f32(tmp_path / "x.f32", values)
    assert main(["oracle", f, *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err


def test_odd_byte_count_and_missing_file(tmp_path, capsys):
    f = tmp_path / "x.f32"
    f.write_bytes(b"\x00" * 7)
    assert main(["oracle", str(f), "--p", "0.5"]) == 2
    assert main(["oracle", str(tmp_path / "nope"), "--p", "0.5"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2


def test_usage_errors_exit_2(capsys):
    assert main(["oracle"]) == 2
    assert main([]) == 2
    assert main(["no-such-verb"]) == 2


@pytest.mark.parametrize("path", [[], ["--pure"]], ids=["default", "pure"])
def test_ambiguous_rows_exit_3(tmp_path, capsys, monkeypatch, path):
    # Make the scan propose one token too many: certification must then refuse it.
    from harness.core import oracle

    real, real_numpy = oracle._neumaier_scan, oracle._neumaier_scan_numpy
    monkeypatch.setattr(oracle, "_neumaier_scan", lambda w, t: min(len(w), real(w, t) + 1))
    monkeypatch.setattr(oracle, "_neumaier_scan_numpy",
                        lambda w, t: min(w.size, real_numpy(w, t) + 1))
    f = write_f32(tmp_path / "x.f32", [1.0] * 8)
    assert main(["oracle", f, "--p", "0.5", "--vocab", "4", "--json", *path]) == 3
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines == [{"row": 0, "status": "oracle_boundary_ambiguous"},
                     {"row": 1, "status": "oracle_boundary_ambiguous"}]


# --- the numpy path by default, --pure to force the pure path --------------------------------


def _spy_paths(monkeypatch) -> list[bool]:
    """Record which path each row took (the real oracle still runs)."""
    from harness.commands import oracle as command
    from harness.core import oracle

    seen: list[bool] = []

    def spy(logits, **kw):
        seen.append(kw.get("fast", False))
        return oracle.top_k_top_p(logits, **kw)

    monkeypatch.setattr(command, "top_k_top_p", spy)
    return seen


def test_default_takes_the_numpy_path_and_pure_forces_the_pure_one(tmp_path, capsys,
                                                                    monkeypatch):
    pytest.importorskip("numpy")
    import random

    rnd = random.Random(7)
    values = [rnd.gauss(0, 2) for _ in range(3 * 500)]
    f = write_f32(tmp_path / "x.f32", values)
    seen = _spy_paths(monkeypatch)
    outputs = {}
    for path in ([], ["--pure"], ["--fast"]):
        seen.clear()
        assert main(["oracle", f, "--p", "0.9", "--vocab", "500", "--json", *path]) == 0
        outputs[tuple(path)] = capsys.readouterr().out
        assert seen == [path != ["--pure"]] * 3
    assert outputs[()] == outputs[("--pure",)] == outputs[("--fast",)]


def test_pure_and_fast_are_exclusive(tmp_path, capsys):
    f = write_f32(tmp_path / "x.f32", [0.0, 1.0])
    assert main(["oracle", f, "--p", "0.5", "--pure", "--fast"]) == 2


def test_numpy_path_refuses_non_finite_logits_with_the_pure_message(tmp_path, capsys):
    pytest.importorskip("numpy")
    f = write_f32(tmp_path / "x.f32", [0.0, 1.0, float("nan"), 2.0])
    assert main(["oracle", f, "--p", "0.5", "--vocab", "2"]) == 2
    default = capsys.readouterr().err
    assert main(["oracle", f, "--p", "0.5", "--vocab", "2", "--pure"]) == 2
    assert capsys.readouterr().err == default
    assert "row 1 token 0 has non-finite logit nan" in default


# --- --exact ------------------------------------------------------------------------------------


def test_exact_equality_row_and_an_agreeing_row(tmp_path, capsys):
    pytest.importorskip("flint")
    # Ten equal logits at p 0.5: D_5 = (1 - p) * 5 - p * 5 = 0 exactly, so the count is 5.
    f = write_f32(tmp_path / "x.f32", [3.0] * 10 + [0.0, 1.0, 2.0, 3.0, 4.0] * 2)
    assert main(["oracle", f, "--p", "0.5", "--vocab", "10", "--json", "--exact"]) == 0
    first, second = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert first == {"row": 0, "count": 5, "kept": [0, 1, 2, 3, 4], "exact_count": 5,
                     "exact_method": "exact-equality"}
    assert second["exact_count"] == second["count"] and second["exact_method"] == "ball"
    assert main(["oracle", f, "--p", "0.5", "--vocab", "10", "--exact"]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0].endswith("exact-real count 5 (exact-equality): binary64 count equals it")


def test_exact_reports_a_binary64_difference_without_changing_the_exit_code(tmp_path, capsys):
    pytest.importorskip("flint")
    # Two tokens at 1e30 (float32) and the rest near 0, p 0.5: math.exp underflows the rest
    # to 0, so binary64's one-token prefix equals its target (count 1); in exact arithmetic
    # the normalizer exceeds 2 and the target exceeds 1, so the count is 2.
    f = write_f32(tmp_path / "x.f32", [1e30, 0.37, 1e30, -2.0, 0.0])
    assert main(["oracle", f, "--p", "0.5", "--exact"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("row 0: keep 1 of 5 tokens")
    assert line.endswith("exact-real count 2 (ball, 64 bits): binary64 count 1 DIFFERS")


def test_exact_without_the_extra_exits_2_with_one_line(tmp_path, capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "flint", None)  # import flint now raises ImportError
    f = write_f32(tmp_path / "x.f32", [0.0, 1.0])
    assert main(["oracle", f, "--p", "0.5", "--exact"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    from harness.install_hint import install_command

    assert f"needs the exact extra: {install_command('exact')}" in captured.err


# --- --k: top-k, then top-p (the predeclared convention) ---------------------------------------


def test_k_json_lines_carry_k_and_k_alone_is_top_k_only(tmp_path, capsys):
    # row 0 [3, 1, 2, 2]: top-k 2 keeps ids 0 and 2 (the 2.0 tie keeps the lower id);
    # row 1 [0, -inf, 5, 5]: the masked token is never kept
    f = write_f32(tmp_path / "x.f32", [3.0, 1.0, 2.0, 2.0, 0.0, float("-inf"), 5.0, 5.0])
    assert main(["oracle", f, "--k", "2", "--vocab", "4", "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines == [{"row": 0, "count": 2, "kept": [0, 2], "k": 2},
                     {"row": 1, "count": 2, "kept": [2, 3], "k": 2}]
    assert main(["oracle", f, "--k", "3", "--p", "0.75", "--vocab", "4", "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[0] == {"row": 0, "count": 2, "kept": [0, 2], "k": 3}  # 1 + 2/e normalizer
    assert main(["oracle", f, "--k", "3", "--p", "1", "--vocab", "4"]) == 0
    assert "no top-p" in capsys.readouterr().out


@pytest.mark.parametrize("args,needle", [
    (["--k", "0"], "invalid_k"),
    (["--k", "-3", "--p", "0.5"], "invalid_k"),
    (["--k", "2.5"], "invalid_k"),
    (["--k", "2", "--p", "0"], "invalid_p"),
    (["--k", "2", "--p", "nan"], "invalid_p"),
    ([], "usage"),
    # issue 29: p above 1 was accepted silently beside --k (read as "no top-p")
    (["--k", "3", "--p", "1.5"], "invalid_p: p=1.5 is above 1; it must be in (0, 1]"),
    (["--k", "3", "--p", "1.0000002"], "it must be in (0, 1]"),
    (["--p", "1.5"], "invalid_p: p=1.5 is above 1"),
    (["--p", "1"], "invalid_p: p=1 keeps every token: give --k K"),
])
def test_bad_k_or_missing_p_exits_2(tmp_path, capsys, args, needle):
    f = write_f32(tmp_path / "x.f32", [0.0, 1.0])
    assert main(["oracle", f, *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err


def test_all_masked_row_exits_2(tmp_path, capsys):
    f = write_f32(tmp_path / "x.f32", [float("-inf")] * 2)
    assert main(["oracle", f, "--k", "1"]) == 2
    assert "all_masked_row" in capsys.readouterr().err


@pytest.mark.parametrize("path", [[], ["--pure"]], ids=["default", "pure"])
def test_oracle_k_agrees_with_the_independent_implementation_on_fresh_rows(tmp_path, capsys,
                                                                          path):
    """``topp-gate oracle --k`` against tests/unit/core/test_oracle_topk.py's independent
    implementation, on rows drawn from a fresh seed (printed on failure)."""
    import os
    import random
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "core"))
    from test_oracle_topk import MARGIN, bf16, independent

    from harness.core.f32 import to_float32

    seed = int.from_bytes(os.urandom(8), "little")
    rnd = random.Random(seed)
    vocab, batch = 1500, 8
    values = []
    for r in range(batch):
        row = [to_float32(rnd.gauss(0.0, 2.0)) for _ in range(vocab)]
        if r % 2:
            row = [bf16(v) for v in row]
        values.extend(row)
    f = write_f32(tmp_path / "x.f32", values)
    for k, p in ((rnd.randint(1, 3000), "0.9"), (rnd.randint(1, 300), None)):
        args = ["oracle", f, "--k", str(k), "--vocab", str(vocab), "--json", *path]
        assert main(args + (["--p", p] if p else [])) == 0
        lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        for r, line in enumerate(lines):
            row = values[r * vocab : (r + 1) * vocab]
            count, kept, margin = independent(row, to_float32(float(p)) if p else None, k)
            if margin > MARGIN:
                assert line == {"row": r, "count": count, "kept": kept, "k": k}, seed
