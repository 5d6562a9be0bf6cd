"""The flake's source as `github:` references fetch it is small (issue 38, item 1).

GitHub's tarballs, like `git archive`, leave out what .gitattributes marks export-ignore:
the evidence bulk. A git clone keeps every bundle, and there scripts/verify_committed.sh
still requires each one evidence/verdicts.tsv names; in an exported tree it verifies those
present and says in one line that the rest is not there. The sizes are printed (pytest -s,
or in the summary of a failure) so CI's log shows them.
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 64 * 1024 * 1024

needs_git = pytest.mark.skipif(
    shutil.which("git") is None or not (ROOT / ".git").exists(),
    reason="needs a git checkout with history (the tarball is made from HEAD)",
)

# Stand-in for `topp-gate verify BUNDLE --pubkey KEY --workers 1`: the verdict the table
# records (exit 0 PASS, 1 STOP), so only verify_committed.sh's own logic is tested here.
STAND_IN = """#!/bin/sh
verdict=$(grep "^$2	" evidence/verdicts.tsv | cut -f3)
echo "stand-in verify $2: $verdict"
[ "$verdict" = PASS ] && exit 0
exit 1
"""


def _git(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True,  # noqa: S603,S607
                          check=True, timeout=600)


def _exported(tmp_path: Path) -> Path:
    tree = tmp_path / "exported"
    tree.mkdir()
    archive = tmp_path / "head.tar"
    archive.write_bytes(_git("archive", "--format=tar", "HEAD").stdout)
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="tar")
    return tree


@needs_git
def test_the_tarball_github_serves_is_at_most_64_mb() -> None:
    exported = len(_git("archive", "--format=tar", "HEAD").stdout)
    listing = _git("ls-tree", "-r", "-l", "HEAD").stdout.decode()
    committed = sum(int(line.split()[3]) for line in listing.splitlines()
                    if line.split()[3] != "-")
    print(f"\nflake source: git archive HEAD = {exported} bytes ({exported / 2**20:.1f} MiB); "
          f"every committed file = {committed} bytes ({committed / 2**20:.1f} MiB, what a "
          "clone checks out)")
    assert exported <= LIMIT, (
        f"git archive HEAD is {exported / 2**20:.1f} MiB, over 64 MiB: export-ignore the "
        "bulk in .gitattributes")
    # the clone still has it all: the bulk is committed, only the tarball leaves it out
    assert committed > exported
    # CI's log shows the figure: the offline tier (scripts/test runs it) prints it first
    tier = (ROOT / "scripts" / "nix_offline_checks.sh").read_text()
    assert "git archive --format=tar HEAD | wc -c" in tier and "limit 64 MiB" in tier


@needs_git
def test_the_tarball_keeps_what_the_flake_needs_and_leaves_out_the_bulk(tmp_path: Path) -> None:
    tree = _exported(tmp_path)
    for kept in ("flake.nix", "flake.lock", "pyproject.toml", "harness/cli.py",
                 "evidence/verdicts.tsv", "evidence/keys/topp-gate-evidence.pub",
                 "evidence/manifests/h200-forced-logit-gate.json",
                 "evidence/manifests/smoke-interpreter.json",
                 "evidence/bundles/smoke-interpreter-20261129",
                 "scripts/verify_committed.sh"):
        assert (tree / kept).exists(), kept
    for left_out in ("nix/full-checkout", "evidence/mutation", "evidence/pr",
                     "evidence/sweep/bundles", "evidence/impls/bundles",
                     "evidence/deploy/bundles"):
        assert not (tree / left_out).exists(), left_out
    assert not list((tree / "evidence" / "bundles").glob("h200-*"))
    assert (ROOT / "nix" / "full-checkout").is_file()  # in the clone


def _verify_committed(tree: Path) -> subprocess.CompletedProcess[str]:
    tool = tree / "stand-in-topp-gate"
    tool.write_text(STAND_IN)
    tool.chmod(0o755)
    return subprocess.run(["bash", str(tree / "scripts" / "verify_committed.sh"), str(tool)],  # noqa: S603,S607
                          capture_output=True, text=True, timeout=300, check=False,
                          env={"PATH": "/usr/bin:/bin", "VERIFY_JOBS": "2"})


@needs_git
def test_the_bundle_check_says_in_one_line_when_the_bulk_is_absent(tmp_path: Path) -> None:
    done = _verify_committed(_exported(tmp_path))
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    lines = [line for line in out.splitlines() if "no evidence bulk to verify here" in line]
    assert len(lines) == 1, out
    assert "evidence/bundles/smoke-interpreter-20261129: verified, verdict STOP" in out


@needs_git
def test_in_a_clone_every_bundle_the_table_names_is_still_required(tmp_path: Path) -> None:
    tree = _exported(tmp_path)
    (tree / "nix" / "full-checkout").write_text("a clone\n")
    done = _verify_committed(tree)
    assert done.returncode == 1
    assert "which is missing" in done.stderr
    assert "no evidence bulk" not in done.stdout
