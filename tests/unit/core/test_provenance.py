"""Provenance: the trusted-core digest, recomputable from any checkout, and the commits that
VERIFYING.md names for bundles committed before the core had its own folder."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.capture.provenance import source_revision
from harness.cli import main
from harness.core import provenance
from harness.core.errors import UsageError

ROOT = Path(__file__).resolve().parents[3]
TABLE = re.compile(r"<!-- legacy-harness:begin -->(.*?)<!-- legacy-harness:end -->", re.S)
ROW = re.compile(r"\| `([^`]+)` \| `([0-9a-f]{64})` \| `([0-9a-f]{40})` \| `([0-9a-f]{40})` \|")


def _no_git_history() -> str | None:
    """Why this checkout's own git history is unavailable, or None. The Nix `cpu-tests`
    check runs the suite on a copy of the source without `.git` (docs/nix.md)."""
    if shutil.which("git") is None:
        return "git is not installed"
    if not (ROOT / ".git").exists():
        return "the source has no git history (a copy without .git, as in Nix's cpu-tests)"
    return None


needs_git_history = pytest.mark.skipif(_no_git_history() is not None,
                                       reason=str(_no_git_history()))


def _git(*args: str) -> bytes:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True,
                          check=True).stdout


def _legacy_rows() -> list[tuple[str, str, str, str]]:
    match = TABLE.search((ROOT / "VERIFYING.md").read_text())
    assert match, "VERIFYING.md lost its legacy-harness table"
    rows = ROW.findall(match.group(1))
    assert rows, "the legacy-harness table has no rows"
    return rows


def test_installed_core_digest_equals_the_checkout_digest():
    assert provenance.installed_digest() == provenance.checkout_digest(ROOT)


def test_core_digest_covers_the_core_and_only_the_core(tmp_path):
    copy = tmp_path / "checkout"
    shutil.copytree(ROOT / "harness", copy / "harness",
                    ignore=shutil.ignore_patterns("__pycache__"))
    before = provenance.checkout_digest(copy)
    (copy / "harness" / "capture" / "report.py").write_text("# edited\n", "utf-8")
    assert provenance.checkout_digest(copy) == before  # capture side: not trusted code
    legacy = provenance.checkout_digest(copy, provenance.HARNESS_TREE)
    assert legacy != provenance.checkout_digest(ROOT, provenance.HARNESS_TREE)
    schema = copy / "harness" / "core" / "schemas" / "receipt.schema.json"
    schema.write_bytes(schema.read_bytes() + b" ")
    assert provenance.checkout_digest(copy)["sha256"] != before["sha256"]


def test_checkout_digest_refuses_links_and_non_checkouts(tmp_path):
    with pytest.raises(UsageError, match="no harness/core/"):
        provenance.checkout_digest(tmp_path)
    copy = tmp_path / "c"
    shutil.copytree(ROOT / "harness" / "core", copy / "harness" / "core",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "harness" / "core" / "evil.py").symlink_to("/etc/passwd")
    with pytest.raises(UsageError, match="not a regular file"):
        provenance.checkout_digest(copy)


def test_harness_digest_command(capsys):
    assert main(["harness-digest", str(ROOT), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == provenance.installed_digest()
    assert main(["harness-digest", "--algorithm", "nope"]) == 2


@needs_git_history
def test_source_revision_names_this_checkouts_commit(monkeypatch):
    monkeypatch.delenv("TOPP_GATE_SOURCE_COMMIT", raising=False)
    found = source_revision(ROOT)
    assert found["how"] == "git"
    assert found["commit"] == _git("rev-parse", "HEAD").decode().strip()
    assert found["clean"] == (_git("status", "--porcelain").strip() == b"")


def test_source_revision_without_git_uses_the_environment_claim(tmp_path, monkeypatch):
    monkeypatch.delenv("TOPP_GATE_SOURCE_COMMIT", raising=False)
    assert source_revision(tmp_path) == {"commit": None, "clean": None, "how": "unknown"}
    monkeypatch.setenv("TOPP_GATE_SOURCE_COMMIT", "a" * 40)
    monkeypatch.setenv("TOPP_GATE_SOURCE_CLEAN", "1")
    assert source_revision(tmp_path) == {"commit": "a" * 40, "clean": True,
                                         "how": "environment"}


@needs_git_history
def test_an_explicit_claim_wins_over_a_stale_git_in_a_copied_tree(monkeypatch):
    # the GPU machine's copy of a working tree held the .git of an older commit, and every
    # receipt named it: the caller's claim, labelled as a claim, is what a receipt records
    monkeypatch.setenv("TOPP_GATE_SOURCE_COMMIT", "b" * 40)
    monkeypatch.setenv("TOPP_GATE_SOURCE_CLEAN", "true")
    assert source_revision(ROOT) == {"commit": "b" * 40, "clean": True, "how": "environment"}


@needs_git_history
@pytest.mark.parametrize("row", _legacy_rows(), ids=lambda r: Path(r[0]).name)
def test_committed_bundle_digest_is_the_listed_commits_harness(row):
    """Recompute the harness-tree/v1 digest of harness/ at the listed commits from git."""
    bundle, digest, first, last = row
    if _git("rev-parse", "--is-shallow-repository").strip() == b"true":
        pytest.skip("a shallow clone holds no history to recompute from")
    recorded = json.loads((ROOT / bundle / "receipt.json").read_text())["predicate"]["harness"]
    assert recorded["algorithm"] == provenance.HARNESS_TREE
    assert recorded["sha256"] == digest
    assert _legacy_digest(first) == {"sha256": digest, "files": recorded["files"]}
    assert _legacy_digest(last) == {"sha256": digest, "files": recorded["files"]}
    assert _legacy_digest(f"{first}^")["sha256"] != digest  # "first" really is the first


def _legacy_digest(commit: str) -> dict[str, object]:
    files = []
    for entry in _git("ls-tree", "-r", commit, "--", "harness/").decode().splitlines():
        meta, path = entry.split("\t", 1)
        rel = path[len("harness/"):]
        parts = rel.split("/")
        if any(p.startswith(".") or p == "__pycache__" for p in parts):
            continue
        if not (rel.endswith((".py", ".json")) or parts[-1] == "py.typed"):
            continue
        files.append((rel, _git("cat-file", "blob", meta.split()[2])))
    return provenance.digest_lines(files)
