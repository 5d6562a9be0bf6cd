"""Progress on long steps (issue 29): a line per finished case of a side's child, and log
lines that carry no ``progress.py:38`` source location."""

from __future__ import annotations

import time
from pathlib import Path

from harness.capture.progress import RunProgress
from harness.capture.run import CaseProgress
from harness.core.manifest import CaseLayout


def _layout(ids: list[str]) -> list[CaseLayout]:
    return [CaseLayout(id=i, kind="ordinary", batch=1, vocab=4, rows=()) for i in ids]


def test_a_line_per_finished_case_as_the_child_writes_it(tmp_path: Path):
    out = tmp_path / "out" / "stock"
    out.mkdir(parents=True)
    lines: list[str] = []
    with CaseProgress(_layout(["a", "b", "c"]), [out], lines.append):
        (out / "a.out.f32").write_bytes(b"")
        deadline = time.monotonic() + 10
        while not lines and time.monotonic() < deadline:
            time.sleep(0.1)
        assert lines == ["case 1/3 a: done"]
        (out / "b.out.f32").write_bytes(b"")
        (out / "c.out.f32").write_bytes(b"")
        deadline = time.monotonic() + 10
        while len(lines) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
    assert lines == ["case 1/3 a: done", "case 2/3 b: done", "case 3/3 c: done"]


def test_log_lines_name_no_source_location(capsys):
    with RunProgress() as progress:
        progress.say("stock: case 1/2 a: done")
    err = capsys.readouterr().err
    assert "stock: case 1/2 a: done" in err
    assert "progress.py" not in err
