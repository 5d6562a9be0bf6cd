"""Pins by a path relative to the repository (issue 27 item 4): ``manifest new`` never writes
a pin path that climbs out of the repository, wherever the manifest is written and whatever
folder it runs from, and the loader finds the pin by that path and its sha256 while every
committed manifest resolves its pins exactly as before."""

from __future__ import annotations

import glob
import shutil
from pathlib import Path

import pytest

from harness.capture.manifest_new import SideSpec, new_manifest, pin_name
from harness.core.digest import sha256_file
from harness.core.errors import UsageError
from harness.core.manifest import load_manifest, pin_candidates
from harness.pins.pinfile import load_pin_file

ROOT = Path(__file__).resolve().parents[3]
PINS = ROOT / "evidence/pins"
OLD, NEW = "vllm-0.26.0.json", "vllm-0.33.0.json"


def _sides(folder: Path) -> dict[str, SideSpec]:
    return {"stock": SideSpec(folder / OLD, "single"), "patched": SideSpec(folder / NEW, "split")}


def _pins(manifest) -> list[str]:
    return [manifest.sources["sides"][s]["pin"] for s in ("stock", "patched")]


def test_a_manifest_written_outside_the_repository_names_repository_pins(tmp_path,
                                                                         monkeypatch):
    monkeypatch.chdir(tmp_path)  # nor run from inside it
    out = tmp_path / "a" / "b" / "manifests" / "mine.json"
    new_manifest(_sides(PINS), "forced-interpreter", out, cache=tmp_path / "empty")
    manifest = load_manifest(out)
    assert _pins(manifest) == [f"evidence/pins/{OLD}", f"evidence/pins/{NEW}"]
    for side, name in (("stock", OLD), ("patched", NEW)):
        assert manifest.pin_path(side).resolve() == (PINS / name).resolve()


def test_a_manifest_inside_the_repository_names_the_same_path(tmp_path):
    repo = tmp_path / "repo"  # a second repository: its pins and its manifests
    (repo / ".git").mkdir(parents=True)
    (repo / "evidence" / "pins").mkdir(parents=True)
    for name in (OLD, NEW):
        shutil.copyfile(PINS / name, repo / "evidence" / "pins" / name)
    out = repo / "evidence" / "manifests" / "deep" / "mine.json"
    new_manifest(_sides(repo / "evidence" / "pins"), "forced-interpreter", out,
                 cache=tmp_path / "empty")
    manifest = load_manifest(out)
    assert _pins(manifest) == [f"evidence/pins/{OLD}", f"evidence/pins/{NEW}"]
    assert manifest.pin_path("stock") == repo / "evidence" / "pins" / OLD  # its own repo's


def test_pins_outside_any_repository_are_named_from_the_nearest_common_folder(tmp_path,
                                                                            monkeypatch):
    monkeypatch.chdir(tmp_path)
    mine = tmp_path / "work" / "pins"
    mine.mkdir(parents=True)
    for name in (OLD, NEW):
        shutil.copyfile(PINS / name, mine / name)
    out = tmp_path / "work" / "gate" / "v" / "mine.json"
    assert pin_name(mine / OLD, out.parent) == f"pins/{OLD}"
    new_manifest(_sides(mine), "forced-interpreter", out, cache=tmp_path / "empty")
    manifest = load_manifest(out)
    assert _pins(manifest) == [f"pins/{OLD}", f"pins/{NEW}"]
    assert manifest.pin_path("stock") == mine / OLD


def test_a_manifest_that_could_not_find_its_pin_again_is_not_written(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "elsewhere").mkdir()
    for name in (OLD, NEW):  # other bytes than the checkout's pins: found nowhere else
        (repo / "elsewhere" / name).write_bytes((PINS / name).read_bytes() + b"\n")
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "outside" / "mine.json"
    with pytest.raises(UsageError, match="would not find it again"):
        new_manifest(_sides(repo / "elsewhere"), "forced-interpreter", out,
                     cache=tmp_path / "empty")
    assert not out.exists() and not out.with_name("mine.json.sha256").exists()


def test_a_file_at_the_named_path_with_other_bytes_is_never_taken(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "m" / "mine.json"
    new_manifest(_sides(PINS), "forced-interpreter", out, cache=tmp_path / "empty")
    decoy = tmp_path / "evidence" / "pins" / OLD  # above the manifest, before the checkout
    decoy.parent.mkdir(parents=True)
    decoy.write_bytes(b"{}\n")
    assert decoy in pin_candidates(out.parent, f"evidence/pins/{OLD}")
    assert load_manifest(out).pin_path("stock").resolve() == (PINS / OLD).resolve()


def test_every_committed_manifest_resolves_its_pins_as_before():
    """Manifests written before repository-relative pins name them against their folder and
    resolve exactly there; those written since (pr-cuda-v4) name ``evidence/pins/...``."""
    count = 0
    for path in sorted(glob.glob(str(ROOT / "evidence/manifests/**/*.json"), recursive=True)):
        manifest = load_manifest(Path(path))
        if manifest.pinned_by != "pin-file":
            continue
        for side in ("stock", "patched"):
            written = Path(path).parent / manifest.sides[side].pin
            if written.is_file():
                assert manifest.pin_path(side) == written  # the first candidate, unchanged
            else:
                assert manifest.sides[side].pin.startswith("evidence/pins/")
                assert manifest.pin_path(side) == ROOT / manifest.sides[side].pin
            entry = manifest.sources["sides"][side]
            load_pin_file(manifest.pin_path(side), expected_sha256=entry["pin_sha256"])
            count += 1
    assert count >= 90


def test_committed_mutant_manifests_that_climb_out_find_the_repository_pin():
    """Per-mutant manifests of the December 1 runs name their pin by a relative path that
    climbs out of the repository into the folder the run was made in (frozen as they are):
    the loader finds the repository's pin by its sha256."""
    paths = sorted(glob.glob(str(ROOT / "evidence/mutation/*/manifests/*.json")))
    assert paths
    for path in paths:
        manifest = load_manifest(Path(path))
        assert manifest.sides["stock"].pin.startswith("../")
        for side in ("stock", "patched"):
            found = manifest.pin_path(side)
            assert sha256_file(found) == manifest.sources["sides"][side]["pin_sha256"]


def test_mutate_per_mutant_manifests_name_repository_pins(tmp_path, monkeypatch):
    from harness.mutation.mutate import Options, _mutant_manifest
    from harness.pins.sources import cache_root

    frozen = load_manifest(ROOT / "evidence/manifests/pr/pr-cuda.json")
    patched_tree = frozen.sources["sides"]["patched"]["tree_sha256"]
    if not (cache_root(None) / "trees" / patched_tree).is_dir():
        pytest.skip("vLLM 0.33.0's tree is not in the cache")
    diff = ROOT / "evidence/mutation/pr-cuda-h200-20261201/mutants/cmp-above-ge.diff"
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "far" / "away" / "run"
    (run / "manifests").mkdir(parents=True)
    options = Options(manifest=ROOT / "evidence/manifests/pr/pr-cuda.json", out=run,
                      key=tmp_path / "unused.key")
    written = load_manifest(_mutant_manifest(frozen, diff, run / "manifests" / "m.json",
                                             options))
    assert _pins(written) == ["evidence/pins/vllm-0.33.0.json"] * 2
    assert all(".." not in pin.split("/") for pin in _pins(written))
    assert written.pin_path("patched").resolve() == (PINS / NEW).resolve()
