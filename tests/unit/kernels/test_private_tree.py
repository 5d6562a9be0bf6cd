"""Private copies (harness.kernels.private_tree): fixed times, and the stable copy a
JIT-building family asks for (same paths and times on every copy of the same files, fresh
each time, never reused, exclusive while it exists, never through a link)."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path

import pytest

from harness import families
from harness.capture.run import private_copies
from harness.core.digest import sha256_hex
from harness.core.errors import EvidenceDriftError, SourcesError
from harness.kernels.private_tree import (
    FIXED_MTIME,
    make_private_tree,
    private_tree,
    stable_name,
)
from harness.pins.sources import Side


def _source(tmp_path: Path, text: bytes = b"print('pinned')\n") -> tuple[Path, dict[str, str]]:
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "mod.py").write_bytes(text)
    (src / "pkg" / "kernel.cu").write_bytes(b"__global__ void k() {}\n")
    files = {rel: sha256_hex((src / rel).read_bytes()) for rel in ("pkg/mod.py", "pkg/kernel.cu")}
    return src, files


def test_every_copied_file_carries_the_fixed_time(tmp_path: Path):
    src, files = _source(tmp_path)
    with private_tree("stock", files, src, parent=tmp_path) as copy:
        for rel in files:
            assert os.stat(copy.tree / rel).st_mtime == FIXED_MTIME
            assert (copy.tree / rel).read_bytes() == (src / rel).read_bytes()


def test_a_stable_copy_has_the_same_path_every_time_and_is_made_fresh(tmp_path: Path):
    src, files = _source(tmp_path)
    with private_tree("stock", files, src, parent=tmp_path, stable=True) as first:
        first_path = first.tree
        assert first.root.name == stable_name(files)
        (first.tree / "pkg" / "leftover.txt").write_bytes(b"written by a child\n")
    assert not first_path.exists()  # removed with the block
    with private_tree("patched", files, src, parent=tmp_path, stable=True) as second:
        assert second.tree == first_path
        assert not (second.tree / "pkg" / "leftover.txt").exists()
        assert os.stat(second.tree / "pkg" / "mod.py").st_mtime == FIXED_MTIME


def test_other_files_get_another_stable_folder(tmp_path: Path):
    _, files = _source(tmp_path)
    other = dict(files, **{"pkg/mod.py": "0" * 64})
    assert stable_name(files) != stable_name(other)


def test_a_leftover_stable_folder_of_a_killed_run_is_replaced_not_reused(tmp_path: Path):
    src, files = _source(tmp_path)
    stale = tmp_path / stable_name(files) / "tree" / "pkg"
    stale.mkdir(parents=True)
    (stale / "mod.py").write_bytes(b"print('shadow')\n")
    with private_tree("stock", files, src, parent=tmp_path, stable=True) as copy:
        assert (copy.tree / "pkg" / "mod.py").read_bytes() == b"print('pinned')\n"


def test_a_link_in_place_of_the_stable_folder_is_refused(tmp_path: Path):
    src, files = _source(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / stable_name(files)).symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(SourcesError, match="not a folder of this user"):
        make_private_tree("stock", files, src, parent=tmp_path, stable=True)
    assert elsewhere.exists()  # nothing behind the link was removed


@pytest.mark.parametrize("planted", ["link", "fifo"])
def test_a_planted_lock_file_is_refused_in_one_line(tmp_path: Path, planted: str):
    src, files = _source(tmp_path)
    lock = tmp_path / (stable_name(files) + ".lock")
    if planted == "link":
        (tmp_path / "target").write_bytes(b"")
        lock.symlink_to(tmp_path / "target")
    else:
        os.mkfifo(lock)
    with pytest.raises(SourcesError, match="stable copy lock"):
        make_private_tree("stock", files, src, parent=tmp_path, stable=True)
    assert not (tmp_path / stable_name(files)).exists()


def test_a_second_stable_copy_of_the_same_files_waits_for_the_first(tmp_path: Path):
    src, files = _source(tmp_path)
    order: list[str] = []
    first = make_private_tree("stock", files, src, parent=tmp_path, stable=True)

    def second() -> None:
        with private_tree("patched", files, src, parent=tmp_path, stable=True):
            order.append("second made")

    thread = threading.Thread(target=second)
    thread.start()
    time.sleep(0.3)
    order.append("first removed")
    first.remove()
    thread.join(10)
    assert order == ["first removed", "second made"]


def test_a_stable_copy_still_refuses_bytes_that_are_not_the_pins(tmp_path: Path):
    src, files = _source(tmp_path)
    (src / "pkg" / "mod.py").write_bytes(b"print('changed after pinning')\n")
    with pytest.raises(EvidenceDriftError):
        make_private_tree("stock", files, src, parent=tmp_path, stable=True)
    # the lock was released: the next copy of the same files is not blocked
    (src / "pkg" / "mod.py").write_bytes(b"print('pinned')\n")
    with private_tree("stock", files, src, parent=tmp_path, stable=True) as copy:
        assert copy.tree.exists()


def _side(name: str, files: dict[str, str], family: str) -> Side:
    return Side(name=name, version="1", wheel="w.whl", wheel_sha256="0" * 64,
                kernel_path="pkg/mod.py", kernel_sha256=files["pkg/mod.py"], files=files,
                family=family)


@pytest.mark.parametrize(("family", "shared"), [("flashinfer", True), ("vllm-triton", False)])
def test_two_sides_share_a_copy_only_for_a_stable_family_with_the_same_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, family: str, shared: bool):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    src, files = _source(tmp_path)
    assert families.get(family).stable_copy is shared
    checked = {"stock": (_side("stock", files, family), src),
               "patched": (_side("patched", files, family), src)}
    with contextlib.ExitStack() as stack:
        copies = private_copies(checked, stack)
        assert (copies["stock"] is copies["patched"]) is shared
        assert copies["stock"].files == files == copies["patched"].files


def test_a_stable_family_with_different_files_gets_two_copies(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    src, files = _source(tmp_path)
    other_src, other = _source(tmp_path / "b", b"print('patched')\n")
    checked = {"stock": (_side("stock", files, "flashinfer"), src),
               "patched": (_side("patched", other, "flashinfer"), other_src)}
    with contextlib.ExitStack() as stack:
        copies = private_copies(checked, stack)
        assert copies["stock"].root != copies["patched"].root
        assert (copies["patched"].tree / "pkg" / "mod.py").read_bytes() == b"print('patched')\n"
