"""The package's source is never empty (issue 38, item 2).

nix/topp-gate.nix once filtered `builtins.path` by cutting `toString src` (the flake's
outPath, a /nix/store string) off each path. Under `nix --store DIR` the filter is handed
the real on-disk path (DIR/nix/store/...), nothing matched and the source was empty. It now
comes from lib.fileset (`toSource` over paths relative to the file). Here the flake is
copied into a fresh git repository (its tracked flake files, the package's files), the
package's `src` is evaluated against nix/stub (whose lib.fileset filters as nixpkgs' does)
on a fresh, empty --store, and the store copy is listed. The same run with the old
nix/topp-gate.nix shows the empty source, so the check does see the defect.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NIX_ENV = {**os.environ, "NIX_CONFIG": "experimental-features = nix-command flakes",
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}
OLD = "0c0b6ed"  # nix/topp-gate.nix and nix/overlays.nix before lib.fileset (issue 38)

pytestmark = pytest.mark.skipif(
    any(shutil.which(t) is None for t in ("nix", "git")) or not (ROOT / ".git").exists(),
    reason="needs nix (apt-get install -y nix-bin), git and a git checkout",
)


def _flake_copy(tmp_path: Path, old: bool) -> Path:
    tree = tmp_path / "flake"
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--", "flake.nix", "flake.lock", "nix",  # noqa: S607
         "pyproject.toml", "README.md", "harness", "evidence/manifests"],
        capture_output=True, text=True, check=True,
    ).stdout.split("\0")
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ROOT / name, tree / name)
    if old:
        for name in ("nix/topp-gate.nix", "nix/overlays.nix"):
            shown = subprocess.run(["git", "-C", str(ROOT), "show", f"{OLD}:{name}"],  # noqa: S603,S607
                                   capture_output=True, text=True, check=False)
            if shown.returncode != 0:
                pytest.skip(f"commit {OLD} is not in this clone's history")
            (tree / name).write_text(shown.stdout)
    for argv in (["init", "-q"], ["add", "-A"]):
        subprocess.run(["git", "-C", str(tree), *argv], check=True, env=NIX_ENV)  # noqa: S603,S607
    return tree


def _source_on_a_fresh_store(tmp_path: Path, old: bool) -> tuple[Path, list[str]]:
    tree = _flake_copy(tmp_path, old)
    store = tmp_path / "store"
    offline = ["unshare", "-n"] if subprocess.run(["unshare", "-n", "true"],  # noqa: S607
                                                  capture_output=True).returncode == 0 else []
    done = subprocess.run(
        [*offline, "nix", "--store", str(store), "eval", "--raw", "--no-write-lock-file",
         "--override-input", "nixpkgs", "path:./nix/stub",
         ".#packages.x86_64-linux.topp-gate.src"],
        cwd=tree, env=NIX_ENV, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    logical = done.stdout.strip()
    assert logical.startswith("/nix/store/")
    real = Path(str(store) + logical)
    assert real.is_dir(), f"{real} was not written"
    found = sorted(str(p.relative_to(real)) for p in real.rglob("*"))
    print(f"\n{'old' if old else 'new'} package source {logical}: {len(found)} entries")
    return real, found


def test_the_package_source_holds_pyproject_and_harness_on_a_fresh_store(tmp_path: Path) -> None:
    real, found = _source_on_a_fresh_store(tmp_path, old=False)
    assert (real / "pyproject.toml").is_file()
    assert (real / "pyproject.toml").read_bytes() == (ROOT / "pyproject.toml").read_bytes()
    assert (real / "harness" / "cli.py").is_file()
    assert (real / "harness" / "__init__.py").is_file()
    assert (real / "README.md").is_file()
    # only what the wheel is built from
    assert {name.split("/")[0] for name in found} == {"harness", "pyproject.toml", "README.md"}


def test_the_old_prefix_filter_gave_an_empty_source_there(tmp_path: Path) -> None:
    _, found = _source_on_a_fresh_store(tmp_path, old=True)
    assert found == []
