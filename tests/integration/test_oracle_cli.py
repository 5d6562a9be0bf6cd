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


def test_ambiguous_rows_exit_3(tmp_path, capsys, monkeypatch):
    # Make the scan propose one token too many: certification must then refuse it.
    from harness.core import oracle

    real = oracle._neumaier_scan
    monkeypatch.setattr(oracle, "_neumaier_scan", lambda w, t: min(len(w), real(w, t) + 1))
    f = write_f32(tmp_path / "x.f32", [1.0] * 8)
    assert main(["oracle", f, "--p", "0.5", "--vocab", "4", "--json"]) == 3
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines == [{"row": 0, "status": "oracle_boundary_ambiguous"},
                     {"row": 1, "status": "oracle_boundary_ambiguous"}]
