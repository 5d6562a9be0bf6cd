"""Pinned sources: digests, the kernel diff and strict patch applier, cache, trees, drift."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from harness.core.digest import sha256_file
from harness.core.errors import EvidenceDriftError, SourcesError, UsageError
from harness.core.names import SIDES
from harness.pins import sources

REPO = Path(__file__).resolve().parents[3]
PATH = "pkg/kernel.py"
OLD = b"".join(f"line {i}\n".encode() for i in range(1, 21))
NEW = OLD.replace(b"line 5\n", b"line five\n").replace(b"line 17\n", b"line 17\nadded\n")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- digests and pins ----------------------------------------------------------------------


def test_tree_digest_is_sha256sum_of_sorted_listing():
    files = {"b/x.py": "1" * 64, "a.py": "2" * 64}
    listing = f"{'2' * 64}  a.py\n{'1' * 64}  b/x.py\n".encode()
    assert sources.tree_digest(files) == _sha(listing)


def test_committed_pins_load_and_are_self_consistent():
    pins = sources.load_pins()
    assert set(pins.sides) == {"stock", "patched"}
    for side in pins.sides.values():
        assert side.files[pins.kernel_path] == side.kernel_sha256
        assert side.digest == pins.raw["sides"][side.name]["tree_sha256"]
        assert f"vllm-{side.version}.dist-info/METADATA" in side.files
        assert not any(path.endswith(".so") for path in side.files)
    assert len(pins.patch_sha256) == 64


def test_pins_with_a_wrong_tree_digest_are_refused():
    raw = sources.load_pins().raw
    broken = {**raw, "sides": {**raw["sides"], "stock": {**raw["sides"]["stock"],
                                                         "tree_sha256": "0" * 64}}}
    with pytest.raises(SourcesError):
        sources.parse_pins(broken)


def test_cache_root_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("TOPP_GATE_CACHE", raising=False)
    assert sources.cache_root() == tmp_path / "xdg" / "topp-gate"
    monkeypatch.setenv("TOPP_GATE_CACHE", str(tmp_path / "env"))
    assert sources.cache_root() == tmp_path / "env"
    assert sources.cache_root(tmp_path / "flag") == tmp_path / "flag"


# --- kernel diff and the strict applier --------------------------------------------------------


def test_kernel_diff_round_trips_through_apply_patch():
    diff = sources.kernel_diff(OLD, NEW, PATH)
    assert diff.startswith(f"--- a/{PATH}\n+++ b/{PATH}\n".encode())
    assert sources.apply_patch(OLD, diff, PATH) == NEW


@pytest.mark.skipif(shutil.which("patch") is None, reason="GNU patch not installed")
def test_apply_patch_agrees_with_gnu_patch(tmp_path):
    diff = sources.kernel_diff(OLD, NEW, PATH)
    target = tmp_path / "kernel.py"
    target.write_bytes(OLD)
    subprocess.run(["patch", "--quiet", "--fuzz=0", str(target)], input=diff, check=True)
    assert target.read_bytes() == sources.apply_patch(OLD, diff, PATH)


def test_apply_patch_refuses_an_offset():
    diff = sources.kernel_diff(OLD, NEW, PATH)
    shifted = b"line 0\n" + OLD  # the hunks would apply one line lower
    with pytest.raises(UsageError, match="does not apply exactly"):
        sources.apply_patch(shifted, diff, PATH)


def test_apply_patch_refuses_fuzz():
    diff = sources.kernel_diff(OLD, NEW, PATH)
    with pytest.raises(UsageError, match="does not apply exactly"):
        sources.apply_patch(OLD.replace(b"line 3\n", b"line three\n"), diff, PATH)


def test_apply_patch_refuses_another_file_and_empty_diffs():
    diff = sources.kernel_diff(OLD, NEW, "other/file.py")
    with pytest.raises(UsageError, match="it changes 'a/other/file.py', not"):
        sources.apply_patch(OLD, diff, PATH)
    with pytest.raises(UsageError, match="no hunks"):
        sources.apply_patch(OLD, b"just text\n", PATH)


def test_apply_patch_handles_a_missing_final_newline():
    old, new = b"a\nb\n", b"a\nc"
    diff = (f"--- a/{PATH}\n+++ b/{PATH}\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"
            "\\ No newline at end of file\n").encode()
    assert sources.apply_patch(old, diff, PATH) == new


# --- trees and wheels ------------------------------------------------------------------------


def _side(tmp_path: Path, files: dict[str, bytes]) -> tuple[sources.Side, Path]:
    wheel = tmp_path / "demo-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        archive.writestr("demo/_C.abi3.so", b"\x7fELF not extracted")
    side = sources.Side(
        name="stock", version="1.0", wheel=wheel.name, wheel_sha256=sha256_file(wheel),
        kernel_path=PATH, kernel_sha256=_sha(files[PATH]),
        files={name: _sha(data) for name, data in files.items()},
    )
    return side, wheel


def test_extract_only_pinned_files_and_refuse_a_changed_byte(tmp_path):
    side, wheel = _side(tmp_path, {PATH: OLD, "pkg/__init__.py": b""})
    tree = sources.extract_tree(side, wheel, tmp_path / "trees")
    assert tree.name == side.digest
    assert sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file()) == \
        sorted(side.files)
    (tree / PATH).write_bytes(OLD.replace(b"line 1\n", b"line 1 \n"))
    with pytest.raises(EvidenceDriftError):
        sources.resolve_tree(side, cache=tmp_path, sources=tmp_path / "trees")


def test_an_extra_file_in_a_tree_is_drift(tmp_path):
    side, wheel = _side(tmp_path, {PATH: OLD})
    tree = sources.extract_tree(side, wheel, tmp_path / "trees")
    (tree / "pkg" / "__pycache__").mkdir()
    (tree / "pkg" / "__pycache__" / "kernel.cpython-311.pyc").write_bytes(b"stale")
    with pytest.raises(EvidenceDriftError, match="extra file"):
        sources.verify_tree(side, tree)


def test_a_cached_wheel_with_one_changed_byte_is_quarantined(tmp_path):
    side, wheel = _side(tmp_path, {PATH: OLD})
    cached = tmp_path / "cache" / "wheels" / side.wheel_sha256 / side.wheel
    cached.parent.mkdir(parents=True)
    data = bytearray(wheel.read_bytes())
    data[len(data) // 2] ^= 0x01
    cached.write_bytes(bytes(data))
    with pytest.raises(EvidenceDriftError, match="cached wheel"):
        sources.verified_wheel(side, tmp_path / "cache")
    assert not cached.exists()
    assert list((tmp_path / "cache" / "quarantine").iterdir())


def test_export_copies_verified_trees_by_digest(tmp_path):
    side, wheel = _side(tmp_path, {PATH: OLD})
    tree = sources.extract_tree(side, wheel, tmp_path / "trees")
    (written,) = sources.export_trees([side], {"stock": tree}, tmp_path / "export")
    assert written == tmp_path / "export" / side.digest
    assert sources.resolve_tree(side, cache=tmp_path, sources=tmp_path / "export") == written


def test_candidate_tree_is_stock_with_the_patched_kernel(tmp_path):
    side, wheel = _side(tmp_path, {PATH: OLD, "pkg/__init__.py": b""})
    tree = sources.extract_tree(side, wheel, tmp_path / "trees")
    patch = tmp_path / "fix.diff"
    patch.write_bytes(sources.kernel_diff(OLD, NEW, PATH))
    candidate = sources.candidate(side, NEW, patch.read_bytes())
    built = sources.build_candidate_tree(candidate, tree, NEW, tmp_path / "trees")
    assert (built / PATH).read_bytes() == NEW
    assert candidate.patch_file_sha256 == _sha(patch.read_bytes())
    assert candidate.files["pkg/__init__.py"] == side.files["pkg/__init__.py"]


def test_a_wheel_that_is_not_a_zip_is_refused(tmp_path):
    side, _ = _side(tmp_path, {PATH: OLD})
    bogus = tmp_path / "bogus.whl"
    bogus.write_bytes(b"not a zip")
    with pytest.raises(SourcesError):
        sources.extract_tree(replace(side, wheel="bogus.whl"), bogus, tmp_path / "trees")


# --- the real pinned wheels -------------------------------------------------------------------


@pytest.fixture(scope="module")
def wheels() -> dict[str, Path]:
    pins = sources.load_pins()
    cache = sources.cache_root()
    return {name: sources.fetch_wheel(pins.side(name), cache, quiet=True)
            for name in SIDES}


@pytest.mark.sources
def test_pinned_file_lists_regenerate_identically(wheels):
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "pin_sources.py"), "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.sources
def test_real_kernel_diff_matches_the_pinned_patch_hash(wheels):
    pins = sources.load_pins()
    kernels = {}
    for name, wheel in wheels.items():
        with zipfile.ZipFile(wheel) as archive:
            kernels[name] = archive.read(pins.kernel_path)
    diff = sources.kernel_diff(kernels["stock"], kernels["patched"], pins.kernel_path)
    assert _sha(diff) == pins.patch_sha256
    assert sources.apply_patch(kernels["stock"], diff, pins.kernel_path) == kernels["patched"]


@pytest.mark.sources
def test_a_real_wheel_with_one_changed_byte_is_refused(wheels, tmp_path):
    side = sources.load_pins().side("stock")
    cached = tmp_path / "wheels" / side.wheel_sha256 / side.wheel
    cached.parent.mkdir(parents=True)
    shutil.copyfile(wheels["stock"], cached)
    with cached.open("r+b") as handle:
        handle.seek(1000)
        byte = handle.read(1)
        handle.seek(1000)
        handle.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(EvidenceDriftError):
        sources.resolve_tree(side, cache=tmp_path)
    assert not (tmp_path / "trees").exists()  # nothing was extracted


@pytest.mark.sources
def test_a_real_extracted_file_with_one_changed_byte_is_refused(wheels, tmp_path):
    pins = sources.load_pins()
    side = pins.side("patched")
    tree = sources.extract_tree(side, wheels["patched"], tmp_path / "trees")
    kernel = tree / pins.kernel_path
    data = bytearray(kernel.read_bytes())
    data[-2] ^= 0x20
    kernel.write_bytes(bytes(data))
    with pytest.raises(EvidenceDriftError, match="topk_topp_triton.py"):
        sources.resolve_tree(side, cache=tmp_path)


@pytest.mark.sources
def test_user_patch_equal_to_the_upstream_fix_yields_the_patched_kernel(wheels, tmp_path):
    pins = sources.load_pins()
    cache = sources.cache_root()
    stock_tree = sources.resolve_tree(pins.side("stock"), cache=cache)
    patched_tree = sources.resolve_tree(pins.side("patched"), cache=cache)
    diff = sources.kernel_diff((stock_tree / pins.kernel_path).read_bytes(),
                               (patched_tree / pins.kernel_path).read_bytes(), pins.kernel_path)
    patch = tmp_path / "fix.diff"
    patch.write_bytes(diff)
    side, tree = sources.user_candidate(pins, patch, cache=tmp_path, sources=stock_tree.parent)
    assert side.kernel_sha256 == pins.side("patched").kernel_sha256
    assert side.patch_file_sha256 == pins.patch_sha256
    assert sources.verify_tree(side, tree) == tree


@pytest.mark.sources
def test_cli_export_and_show_then_drift_is_exit_2(wheels, tmp_path, capsys):
    from harness.cli import main

    export = tmp_path / "export"
    assert main(["sources", "export", str(export)]) == 0
    assert main(["sources", "show", "--sources", str(export), "--json"]) == 0
    assert '"tree_status": "verified"' in capsys.readouterr().out
    side = sources.load_pins().side("stock")
    envs = export / side.digest / "vllm" / "envs.py"
    envs.write_bytes(envs.read_bytes() + b"\n")
    assert main(["sources", "show", "--sources", str(export)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [err[0]] and err[0].startswith("topp-gate: evidence_drift: stock tree file")
