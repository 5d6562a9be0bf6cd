"""Bundle codecs, the atomic writer and safe reads."""

from __future__ import annotations

import builtins
import math
import os
import stat
import struct
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.capture import bundle_writer
from harness.core import bundle
from harness.core.digest import sha256_hex
from harness.core.errors import BindingMismatchError, LimitError, MalformedEvidenceError, UsageError

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "assets"))
import synthetic  # noqa: E402

f32 = st.floats(width=32, allow_nan=True, allow_infinity=True)


def _pack(values):
    return struct.pack(f"<{len(values)}f", *values)


@st.composite
def output_and_base(draw):
    base = draw(st.lists(f32, min_size=0, max_size=200))
    out = []
    for v in base:
        choice = draw(st.sampled_from(["same", "neginf", "other"]))
        out.append(v if choice == "same" else -math.inf if choice == "neginf" else draw(f32))
    return _pack(out), _pack(base)


@given(output_and_base())
@settings(max_examples=200, deadline=None)
def test_mask_codec_is_lossless(pair):
    out, base = pair
    assert bundle.mask_decode(bundle_writer.mask_encode(out, base), base) == out


@given(output_and_base())
@settings(max_examples=100, deadline=None)
def test_mask_codec_pure_path_equals_numpy_path(pair):
    out, base = pair
    fast = bundle_writer.mask_encode(out, base)
    real_import = builtins.__import__

    def no_numpy(name, *args, **kwargs):
        if name == "numpy":
            raise ImportError("numpy hidden for this test")
        return real_import(name, *args, **kwargs)

    builtins.__import__ = no_numpy
    try:
        pure = bundle_writer.mask_encode(out, base)
    finally:
        builtins.__import__ = real_import
    assert pure == fast


def test_mask_codec_keeps_nan_payloads_and_signed_zero_bits():
    base = struct.pack("<4I", 0x7FC00001, 0x00000000, 0x3F800000, 0xFF800000)
    out = struct.pack("<4I", 0x7FC00002, 0x80000000, 0x3F800000, 0xFF800000)
    assert bundle.mask_decode(bundle_writer.mask_encode(out, base), base) == out


@pytest.mark.parametrize("coded", [
    b"", b"XXXX" + b"\0" * 8, bundle.MASK_MAGIC + struct.pack("<Q", 3) + b"\0\0",
    bundle.MASK_MAGIC + struct.pack("<Q", 2) + b"\x00\x03",  # unknown code
    bundle.MASK_MAGIC + struct.pack("<Q", 2) + b"\x02\x02" + b"\0" * 4,  # too few values
    bundle.MASK_MAGIC + struct.pack("<Q", 2) + b"\x00\x00" + b"\0" * 4,  # spare values
])
def test_mask_decode_refuses_inconsistent_data(coded):
    with pytest.raises(MalformedEvidenceError):
        bundle.mask_decode(coded, b"\0" * 8)


def test_xz_decompression_is_capped_and_complete():
    data = b"\0" * 100_000
    packed = bundle_writer.xz_compress(data)
    assert bundle.xz_decompress(packed, len(data)) == data
    with pytest.raises(MalformedEvidenceError, match="expands past"):
        bundle.xz_decompress(packed, len(data) - 1)
    with pytest.raises(MalformedEvidenceError, match="truncated"):
        bundle.xz_decompress(packed[:-4], len(data))
    with pytest.raises(MalformedEvidenceError, match="trailing"):
        bundle.xz_decompress(packed + b"x", len(data))
    with pytest.raises(MalformedEvidenceError, match="corrupt"):
        bundle.xz_decompress(b"not xz at all", 10)


@pytest.mark.parametrize("rel", ["", "/abs", "../up", "a/../b", "a//b", ".hidden", "a/./b",
                                 "a\\b", "a/b/", "x" * 300])
def test_unsafe_paths_are_refused(rel):
    with pytest.raises(MalformedEvidenceError):
        bundle.check_path(rel)


def test_writer_refuses_existing_destination(tmp_path):
    dest = tmp_path / "b"
    dest.mkdir()
    with pytest.raises(UsageError, match="already exists"):
        synthetic.write(dest)
    assert list(dest.iterdir()) == []


def test_writer_leaves_nothing_behind_on_failure(tmp_path, monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("disk died")

    monkeypatch.setattr(bundle_writer, "sign", boom)
    with pytest.raises(RuntimeError):
        synthetic.write(tmp_path / "b")
    assert list(tmp_path.iterdir()) == []


def test_writer_enforces_the_size_cap(tmp_path):
    from harness.capture.signing import load_private_key

    with pytest.raises(LimitError, match="over its cap"):
        bundle_writer.write_bundle(tmp_path / "b", synthetic.content(), load_private_key(
            synthetic.SIGNING_KEY), max_bytes=1000)
    assert list(tmp_path.iterdir()) == []


def test_written_bundle_layout_and_digests(tmp_path):
    written = synthetic.write(tmp_path / "b")
    root = written.path
    files = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}
    assert {"manifest.json", "cases.json", "results/rows.json", "receipt.json",
            "receipt.dsse.json", "report.md", "outputs/stock/evidence.json",
            "outputs/patched/forced-v64.out.f32.mask.xz"} <= files
    assert {"inputs/forced-v64.logits.f32.xz", "inputs/forced-v64.logits.f32.zz"} & files
    assert not any(".partial-" in f for f in os.listdir(tmp_path))
    assert stat.S_IMODE(root.stat().st_mode) == stat.S_IMODE((root / "inputs").stat().st_mode)
    content = synthetic.content()
    for subject in written.statement["subject"]:
        ann = subject["annotations"]
        stored = (root / ann["stored"]).read_bytes()
        assert sha256_hex(stored) == ann["stored_sha256"]
        assert len(stored) == ann["stored_size"]
        name = subject["name"]
        if name.startswith("outputs/") and name.endswith(".out.f32"):
            side, case = name.split("/")[1], name.split("/")[2][: -len(".out.f32")]
            raw = content.outputs[side][case]
            assert sha256_hex(raw) == subject["digest"]["sha256"]  # digest over raw bytes
    assert written.keyid == "9aee0a6518caf58e952a7e10af43dd29795e4e42ba536283eb89080650b99752"


def test_private_key_never_enters_a_bundle(tmp_path):
    written = synthetic.write(tmp_path / "b")
    secret = synthetic.SIGNING_KEY.read_bytes()
    from harness.capture.signing import load_private_key, private_pem

    raw = load_private_key(synthetic.SIGNING_KEY).private_bytes_raw()
    for path in written.path.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert secret not in data and private_pem(load_private_key(
                synthetic.SIGNING_KEY)) not in data and raw not in data


def test_bundle_dir_refuses_links_and_escapes(tmp_path):
    root = tmp_path / "b"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "f").write_bytes(b"data")
    (tmp_path / "outside").write_bytes(b"secret")
    reader = bundle.BundleDir(root)
    assert reader.listing() == {"sub/f"}
    assert reader.read("sub/f", exact_size=4) == b"data"
    with pytest.raises(BindingMismatchError):
        reader.read("sub/f", exact_size=3)
    with pytest.raises(MalformedEvidenceError):
        reader.read("sub/f", max_size=3)
    (root / "link").symlink_to(tmp_path / "outside")
    with pytest.raises(MalformedEvidenceError, match="symbolic link"):
        reader.listing()
    with pytest.raises(MalformedEvidenceError):
        reader.read("link")
    (root / "link").unlink()
    (root / "dirlink").symlink_to(tmp_path)
    with pytest.raises(MalformedEvidenceError):
        reader.read("dirlink/outside")
    with pytest.raises(MalformedEvidenceError, match="missing"):
        reader.read("sub/none")
    with pytest.raises(MalformedEvidenceError):
        reader.read("../outside")
    os.mkfifo(root / "sub" / "fifo")
    (root / "dirlink").unlink()
    with pytest.raises(MalformedEvidenceError, match="non-regular"):
        reader.listing()


def test_bundle_root_must_be_a_real_directory(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    with pytest.raises(MalformedEvidenceError):
        bundle.BundleDir(tmp_path / "alias")
    with pytest.raises(MalformedEvidenceError):
        bundle.BundleDir(tmp_path / "nothing")


@given(output_and_base())
@settings(max_examples=100, deadline=None)
def test_mask_decode_pure_equals_numpy(pair):
    out, base = pair
    coded = bundle_writer.mask_encode(out, base)
    assert bundle.mask_decode(coded, base, fast=False) == bundle.mask_decode(coded, base,
                                                                             fast=True) == out


@pytest.mark.parametrize("fast", [False, True])
def test_mask_decode_refuses_bad_codes_on_both_paths(fast):
    head = bundle.MASK_MAGIC + struct.pack("<Q", 2)
    for coded in (head + b"\x00\x03", head + b"\x02\x02" + b"\0" * 4,
                  head + b"\x00\x00" + b"\0" * 4, head + b"\x02\x00" + b"\0" * 3):
        with pytest.raises(MalformedEvidenceError):
            bundle.mask_decode(coded, b"\0" * 8, fast=fast)


def test_zlib_decompression_is_capped_and_complete():
    import zlib

    data = bytes(range(256)) * 400
    packed = zlib.compress(data)
    assert bundle.zlib_decompress(packed, len(data)) == data
    with pytest.raises(MalformedEvidenceError, match="expands past"):
        bundle.zlib_decompress(packed, len(data) - 1)
    with pytest.raises(MalformedEvidenceError, match="truncated"):
        bundle.zlib_decompress(packed[:-4], len(data))
    with pytest.raises(MalformedEvidenceError, match="trailing"):
        bundle.zlib_decompress(packed + b"x", len(data))
    with pytest.raises(MalformedEvidenceError, match="corrupt"):
        bundle.zlib_decompress(b"not zlib", 10)


def test_writer_picks_xz_only_where_it_pays(tmp_path):
    import random

    noisy = random.Random(0).randbytes(64 * 1024)
    repeated = noisy * 40  # repeats 64 KiB apart: beyond zlib's 32 KiB window
    stored = {}
    for name, data in (("noisy", noisy), ("repeated", repeated)):
        subject = bundle_writer._store(tmp_path, f"inputs/{name}.logits.f32", data, bundle.CODEC_XZ,
                                None)
        stored[name] = subject["annotations"]["codec"]
    assert stored == {"noisy": "zlib", "repeated": "xz"}
