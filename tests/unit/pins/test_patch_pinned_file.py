"""Issue 39: a change under test may be a diff of any one file of the side's pinned set, not
only its kernel file (a FlashInfer PR changes the CUDA headers its JIT compiles).

Real code on FlashInfer 0.7.2.post1's real pinned tree from the cache (marked ``sources``:
``sources pin flashinfer-python==0.7.2.post1`` puts it there): ``manifest new`` freezes a
header diff with the file it changed, that file's new sha256 and the candidate tree's digest;
the candidate tree holds exactly the pinned files with the header's new hash; the stable
private copy the JIT builds in is another folder than the base's; the receipt binds the
changed file; and every refusal (two files, a file outside the set, ``..``, an absolute
path, a link: git's mode 120000; the pinned tree itself never holds one) is one line naming
what is allowed.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from harness.cli import main
from harness.core.digest import sha256_file, sha256_hex
from harness.core.errors import EvidenceDriftError, UsageError
from harness.core.manifest import load_manifest, parse_manifest
from harness.kernels.private_tree import make_private_tree, stable_name
from harness.pins import sources
from harness.pins.pinfile import load_pin_file
from harness.pins.pinned_sides import check_frozen_patch, prepare_pinned_sides

REPO = Path(__file__).resolve().parents[3]
PIN = REPO / "evidence/pins/flashinfer-0.7.2.post1.json"
IMPLS = REPO / "evidence/manifests/impls/h200-pr-cuda-flashinfer-0.7.2.post1-top-p-renorm.json"
HEADER = "flashinfer/data/include/flashinfer/sampling.cuh"
OLD = b"    if (aggregate_gt_pivot_1 >= p) {\n"
NEW = b"    if (aggregate_gt_pivot_1 > p) {\n"

pytestmark = [pytest.mark.sources]


@pytest.fixture(scope="module")
def stock():
    side = load_pin_file(PIN).side("stock")
    tree = sources.cache_root() / "trees" / side.digest
    if not tree.is_dir():
        pytest.skip("FlashInfer 0.7.2.post1's tree is not in the cache (sources pin it)")
    return side, sources.verify_tree(side, tree)


def _diff(tree: Path, path: str = HEADER, old: bytes = OLD, new: bytes = NEW) -> bytes:
    pinned = (tree / path).read_bytes()
    assert pinned.count(old) == 1
    return sources.kernel_diff(pinned, pinned.replace(old, new), path)


def _matrix(tmp_path: Path) -> Path:
    frozen = json.loads(IMPLS.read_text("utf-8"))
    matrix = {"schema": "topp-gate/matrix/v1", "description": "two FlashInfer cases",
              "backend": frozen["backend"], "limits": frozen["limits"],
              "rules": frozen["rules"], "cases": frozen["cases"][:2]}
    path = tmp_path / "matrix.json"
    path.write_text(json.dumps(matrix), encoding="utf-8")
    return path


def _manifest_new(tmp_path: Path, diff: Path, name: str = "hdr") -> tuple[int, Path]:
    out = tmp_path / "m" / f"{name}.json"
    code = main(["manifest", "new", "--stock", str(PIN), "--patched", str(PIN),
                 "--patch", str(diff), "--on", "patched", "--matrix", str(_matrix(tmp_path)),
                 "--stock-path", "top-p-renorm", "--patched-path", "top-p-renorm",
                 "--out", str(out)])
    return code, out


def test_a_header_diff_is_frozen_and_its_candidate_tree_holds_the_new_hash(stock, tmp_path):
    side, tree = stock
    diff = _diff(tree)
    (tmp_path / "h.diff").write_bytes(diff)
    code, out = _manifest_new(tmp_path, tmp_path / "h.diff")
    assert code == 0
    manifest = load_manifest(out)
    patch = manifest.side_patch("patched")
    patched_header = (tree / HEADER).read_bytes().replace(OLD, NEW)
    assert patch == {"sha256": sha256_hex(diff), "kernel_sha256": side.kernel_sha256,
                     "path": HEADER, "file_sha256": sha256_hex(patched_header),
                     "tree_sha256": patch["tree_sha256"]}
    # the receipt binds the changed file, its hash and the candidate tree (verify checks them)
    pins = manifest.sides["patched"].receipt_pins
    assert pins["patch_path"] == HEADER and pins["patched_file_sha256"] == patch["file_sha256"]
    assert pins["tree_sha256"] == patch["tree_sha256"] != side.digest
    assert "patch_path" not in manifest.sides["stock"].receipt_pins

    # run --patch / pr --patch / mutate build the patched side the same way
    sides = prepare_pinned_sides(manifest, cache=sources.cache_root(), sources=None,
                                 patch=tmp_path / "h.diff", say=lambda _m: None)
    changed, ctree = sides["patched"]
    assert changed.patch_path == HEADER and changed.digest == patch["tree_sha256"]
    assert changed.kernel_sha256 == side.kernel_sha256  # flashinfer/sampling.py unchanged
    assert dict(changed.files) == {**side.files, HEADER: patch["file_sha256"]}
    assert sources.verify_tree(changed, ctree) == ctree
    assert sha256_file(ctree / HEADER) == patch["file_sha256"]
    assert sha256_file(tree / HEADER) == side.files[HEADER]  # the stock tree untouched
    described = changed.describe()
    assert described["patch_path"] == HEADER
    assert described["patched_file_sha256"] == patch["file_sha256"]
    assert described["tree_sha256"] == patch["tree_sha256"]
    assert sides["stock"][0].digest == side.digest

    # the JIT keys its build on the copy's paths: the patched tree's stable copy (and its
    # .build folder) is another folder than the base's, so nvcc builds the patched header
    assert stable_name(changed.files) != stable_name(side.files)
    parent = tmp_path / "stable"
    parent.mkdir(mode=0o700)
    copy = make_private_tree("patched", changed.files, ctree, parent=parent, stable=True)
    try:
        assert copy.root.name == stable_name(changed.files) and copy.build is not None
        assert sha256_file(copy.tree / HEADER) == patch["file_sha256"]
    finally:
        copy.remove()

    # a frozen patch of another file, hash or tree than the one applied is drift
    for key, value in (("path", "flashinfer/sampling.py"), ("file_sha256", "0" * 64),
                       ("tree_sha256", "1" * 64)):
        with pytest.raises(EvidenceDriftError):
            check_frozen_patch("patched", changed, {**patch, key: value})


def test_a_kernel_file_diff_keeps_working_and_an_old_patch_record_binds_no_path(stock,
                                                                                tmp_path):
    side, tree = stock
    kernel = (tree / side.kernel_path).read_bytes()
    old = kernel.splitlines(keepends=True)[-1]
    diff = _diff(tree, side.kernel_path, old, old.rstrip(b"\n") + b"  # changed\n")
    changed, ctree = sources.patched_side(side, tree, diff, cache=sources.cache_root())
    assert changed.patch_path == side.kernel_path
    assert changed.kernel_sha256 == changed.files[side.kernel_path] != side.kernel_sha256
    check_frozen_patch("patched", changed, {"sha256": sha256_hex(diff),
                                            "kernel_sha256": changed.kernel_sha256})
    with pytest.raises(EvidenceDriftError):  # a record without path froze the kernel file
        header_diff = _diff(tree)
        hdr, _ = sources.patched_side(side, tree, header_diff, cache=sources.cache_root())
        check_frozen_patch("patched", hdr, {"sha256": sha256_hex(header_diff),
                                            "kernel_sha256": hdr.kernel_sha256})
    # a committed-style record (sha256 and kernel_sha256 only) parses and binds no path
    raw = json.loads(IMPLS.read_text("utf-8"))
    raw["sources"]["sides"]["patched"]["pin"] = "evidence/pins/flashinfer-0.7.2.post1.json"
    raw["sources"]["sides"]["patched"]["patch"] = {"sha256": "2" * 64,
                                                   "kernel_sha256": "3" * 64}
    manifest = parse_manifest(json.dumps(raw).encode())
    recorded = manifest.sides["patched"].receipt_pins
    assert recorded["kernel_sha256"] == "3" * 64 and recorded["patch_file_sha256"] == "2" * 64
    assert not {"patch_path", "patched_file_sha256", "tree_sha256"} & set(recorded)
    # a path without its file hash (or one that climbs) is a schema violation
    for bad in ({"path": HEADER}, {"path": "../x.cuh", "file_sha256": "4" * 64},
                {"path": "/abs/x.cuh", "file_sha256": "4" * 64}):
        raw["sources"]["sides"]["patched"]["patch"] = {"sha256": "2" * 64,
                                                       "kernel_sha256": "3" * 64, **bad}
        with pytest.raises(Exception, match="schema violation"):
            parse_manifest(json.dumps(raw).encode())


def _two_files(tree: Path) -> bytes:
    return _diff(tree) + _diff(tree, "flashinfer/data/include/flashinfer/topk.cuh",
                               b"remaining_k_cache = k;", b"remaining_k_cache = k + 1;")


@pytest.mark.parametrize("case", ["two files", "outside", "dotdot", "absolute", "link",
                                  "renamed", "created"])
def test_a_diff_outside_one_pinned_file_is_refused_in_one_line(stock, tmp_path, capsys,
                                                                case):
    side, tree = stock
    header = _diff(tree)
    text = {
        "two files": _two_files(tree),
        "outside": header.replace(HEADER.encode(), b"flashinfer/data/include/flashinfer/x.cuh"),
        "dotdot": header.replace(HEADER.encode(),
                                 b"flashinfer/data/../data/include/flashinfer/sampling.cuh"),
        "absolute": header.replace(b"a/" + HEADER.encode(), b"/" + HEADER.encode())
                          .replace(b"b/" + HEADER.encode(), b"/" + HEADER.encode()),
        "link": b"diff --git a/x b/x\nindex 1234567..89abcde 120000\n" + header,
        "renamed": b"diff --git a/x b/y\nrename from x\nrename to y\n" + header,
        "created": header.replace(b"--- a/" + HEADER.encode(), b"--- /dev/null"),
    }[case]
    expected = {"two files": "changes 2 files", "outside": "not in the pinned set",
                "dotdot": "not a plain relative path", "absolute": "not a plain relative path",
                "link": "a link", "renamed": "rename from", "created": "creates or deletes"}
    with pytest.raises(UsageError, match=expected[case]) as info:
        sources.patch_target(text, side.files, kernel_path=side.kernel_path)
    assert "exactly one file of the side's pinned set" in str(info.value)
    assert "\n" not in str(info.value)
    (tmp_path / "bad.diff").write_bytes(text)
    code, out = _manifest_new(tmp_path, tmp_path / "bad.diff")
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "exactly one file" in err, err
    assert not out.exists()


def test_a_candidate_of_another_file_replaces_only_that_file(stock):
    side, _ = stock
    with pytest.raises(UsageError, match="not in the stock side's pinned set"):
        sources.candidate(replace(side, name="stock"), b"x", b"d", path="no/such/file.cuh")


def test_hunk_lines_that_look_like_headers_are_content(stock):
    """A removed line '-- x' shows as '--- x' inside a hunk, an index line's hash may hold
    120000: neither is a file name or a link."""
    side, _ = stock
    diff = (f"diff --git a/{HEADER} b/{HEADER}\nindex 1200001..abc1200 100644\n"
            f"--- a/{HEADER}\n+++ b/{HEADER}\n@@ -1,2 +1,2 @@\n--- a comment\n"
            f"+++ a comment\n context\n").encode()
    assert sources.patch_target(diff, side.files, kernel_path=side.kernel_path) == HEADER


def test_every_committed_manifest_still_loads_under_the_widened_schema():
    """The new patch fields are optional: each committed manifest keeps loading (schema,
    limits, frozen hash) with the receipt pins it had (no patch_path where none is frozen)."""
    found = sorted((REPO / "evidence/manifests").rglob("*.json"))
    if not found:
        pytest.skip("evidence/manifests is checked out sparsely just now")
    for path in found:
        manifest = load_manifest(path)
        for name in ("stock", "patched"):
            patch = manifest.side_patch(name) if manifest.sides[name].pin else None
            pins = manifest.sides[name].receipt_pins
            assert ("patch_path" in pins) == bool(patch and "path" in patch), path
