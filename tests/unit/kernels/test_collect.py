"""What the parent takes from a child's folder after it exited (harness/kernels/runner.py
``collect``): exactly the expected files, copied and never through a link."""

from __future__ import annotations

import os
from pathlib import Path

from harness.kernels.runner import collect

EXPECTED = {"c.out.f32": 8, "evidence.json": 1024}


def _folders(tmp_path: Path) -> tuple[Path, Path]:
    drop, out = tmp_path / ".out.child", tmp_path / "out"
    drop.mkdir(parents=True)
    out.mkdir()
    return drop, out


def test_the_expected_files_are_copied_and_the_childs_folder_removed(tmp_path):
    drop, out = _folders(tmp_path)
    (drop / "c.out.f32").write_bytes(b"\0" * 8)
    (drop / "evidence.json").write_text("{}")
    assert collect(drop, out, EXPECTED) == ""
    assert sorted(p.name for p in out.iterdir()) == ["c.out.f32", "evidence.json"]
    assert not drop.exists()


def test_other_names_links_fifos_and_wrong_sizes_are_refused_by_name(tmp_path):
    drop, out = _folders(tmp_path)
    secret = tmp_path / "secret"
    secret.write_bytes(b"\0" * 8)
    (drop / "c.out.f32").symlink_to(secret)
    os.mkfifo(drop / "evidence.json")
    (drop / "loot\x1b[31m.txt").write_text("x")
    reason = collect(drop, out, EXPECTED)
    assert "c.out.f32" in reason and "evidence.json" in reason and "loot" in reason
    assert "\x1b" not in reason
    assert list(out.iterdir()) == []
    drop, out = _folders(tmp_path / "big")
    (drop / "c.out.f32").write_bytes(b"\0" * 9)
    assert "c.out.f32" in collect(drop, out, EXPECTED) and list(out.iterdir()) == []


def test_a_folder_replaced_by_a_link_is_refused_and_nothing_is_read_through_it(tmp_path):
    """Without a sandbox the child could swap its folder for a link to the other side's."""
    other = tmp_path / "stock"
    other.mkdir()
    (other / "c.out.f32").write_bytes(b"\0" * 8)
    drop, out = _folders(tmp_path)
    drop.rmdir()
    drop.symlink_to(other)
    assert "not a folder" in collect(drop, out, EXPECTED)
    assert list(out.iterdir()) == [] and (other / "c.out.f32").exists()
