"""git on a user's tree runs nothing from its .git and sees index tricks (issue 17 "A hostile
.git", issue 18 "a folder inside another git repository"): ``sources pin``'s origin and
version of a source tree, and the harness checkout's own provenance."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from harness.capture.provenance import source_revision
from harness.pins import safegit
from harness.pins.pinning import tree_origin, tree_version

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

KERNEL = "vllm/v1/sample/ops/topk_topp_triton.py"


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), "-c", "user.email=t@t", "-c", "user.name=t",
                           *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "vllm-checkout"
    (root / "vllm/v1/sample/ops").mkdir(parents=True)
    (root / KERNEL).write_text("def apply_top_k_top_p_triton(logits, k, p):\n    return logits\n")
    (root / "vllm/__init__.py").write_text("")
    _git(root.parent, "init", "-q", str(root))
    _git(root, "add", ".")
    _git(root, "commit", "-qm", "stock")
    _git(root, "tag", "v9.9.9")
    return root


def test_a_clean_checkout_is_clean_and_names_its_commit(tree: Path) -> None:
    origin = tree_origin(tree)
    assert origin["commit"] == _git(tree, "rev-parse", "HEAD")
    assert origin["clean"] is True
    assert tree_version(tree) == "9.9.9"


def test_fsmonitor_filters_and_pager_of_the_tree_never_run(tree: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    hook = tmp_path / "hook.sh"
    hook.write_text(f"#!/bin/sh\necho ran >> {marker}\ncat\n")
    hook.chmod(0o755)
    _git(tree, "config", "core.fsmonitor", str(hook))
    _git(tree, "config", "filter.evil.clean", str(hook))
    _git(tree, "config", "filter.evil.smudge", str(hook))
    _git(tree, "config", "core.pager", str(hook))
    (tree / ".git/info/attributes").write_text("* filter=evil\n")
    (tree / KERNEL).touch()  # stat data changes: an index refresh would run the filter
    origin = tree_origin(tree)
    tree_version(tree)
    source_revision(tree)
    assert not marker.exists(), "git ran a command the tree's config names"
    assert origin["commit"] and origin["clean"] is True


@pytest.mark.parametrize("flag", ["--assume-unchanged", "--skip-worktree"])
def test_an_edited_kernel_hidden_by_an_index_flag_is_not_clean(tree: Path, flag: str) -> None:
    _git(tree, "update-index", flag, KERNEL)
    (tree / KERNEL).write_text("def apply_top_k_top_p_triton(logits, k, p):\n    return 0\n")
    assert _git(tree, "status", "--porcelain") == ""  # what the old check relied on
    assert tree_origin(tree)["clean"] is False
    assert tree_version(tree) == "9.9.9-dirty"
    assert source_revision(tree)["clean"] is False


def test_an_index_flag_alone_is_not_clean(tree: Path) -> None:
    _git(tree, "update-index", "--assume-unchanged", KERNEL)
    assert tree_origin(tree)["clean"] is False


def test_untracked_and_modified_files_are_not_clean(tree: Path) -> None:
    (tree / "vllm/extra.py").write_text("x = 1\n")
    assert tree_origin(tree)["clean"] is False
    (tree / "vllm/extra.py").unlink()
    (tree / KERNEL).chmod(0o755)  # a mode change is a change
    assert tree_origin(tree)["clean"] is False


def test_a_folder_inside_another_repository_is_not_a_checkout(tree: Path) -> None:
    inner = tree / "vllm"
    origin = tree_origin(inner)
    assert origin == {"kind": origin["kind"], "commit": None, "clean": False}
    assert tree_version(inner) == "unknown"
    assert source_revision(inner)["how"] != "git"
    plain = tree.parent / "plain"
    (plain / "sub").mkdir(parents=True)
    assert safegit.head_commit(plain / "sub") is None


def test_the_callers_git_environment_is_ignored(tree: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    other = tmp_path / "other"
    _git(tmp_path, "init", "-q", str(other))
    (other / "f").write_text("f")
    _git(other, "add", ".")
    _git(other, "commit", "-qm", "other")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    assert tree_origin(tree)["commit"] == subprocess.run(
        ["git", "-C", str(tree), "--git-dir", str(tree / ".git"), "rev-parse", "HEAD"],
        capture_output=True, text=True, check=True).stdout.strip()
