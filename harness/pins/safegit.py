"""Read a git checkout the user named without running anything its ``.git`` asks for.

A tree passed to ``sources pin`` (or the checkout that holds the harness) is untrusted: its
``.git/config`` can name commands (``core.fsmonitor``, clean/smudge ``filter`` drivers,
``core.pager``, hooks) that ``git status`` or ``git describe --dirty`` would run, and its
index can hide edits (``assume-unchanged``, ``skip-worktree``). So:

* git runs with a fixed environment (no system or global config, no optional locks, no
  pager, no prompt, no replace objects, discovery stopped at the named folder, none of the
  caller's ``GIT_*`` variables) and ``-c`` overrides of every command-valued setting the
  commands used here could read; only plumbing that reads objects, refs and the index runs
  (``rev-parse``, ``describe`` without ``--dirty``, ``ls-files``, ``ls-tree``), never
  ``status`` (which refreshes the index through filters and the fsmonitor);
* the clean flag is computed here: the index must equal ``HEAD``'s tree (same paths, modes
  and object ids, stage 0, no assume-unchanged or skip-worktree flag), every tracked file's
  bytes must hash to its blob id (git's object hash of the raw bytes, no filters), and no
  untracked file may be present (``.gitignore`` rules apply).

A folder inside another repository is not a checkout of its own: the repository found must
have the named folder as its top level.
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
from pathlib import Path

GIT_TIMEOUT_S = 60

# -c overrides: nothing from the tree's config may run or page.
_SAFE_CONFIG = (
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.pager=cat",
    "core.untrackedCache=false",
    "core.askPass=",
    "credential.helper=",
    "diff.external=",
    "pager.describe=false",
    "pager.ls-files=false",
    "pager.ls-tree=false",
    "pager.rev-parse=false",
)


def _environment(root: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", os.defpath),
        "LC_ALL": "C",
        "HOME": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_PAGER": "cat",
        "PAGER": "cat",
        # discovery looks at ROOT itself and stops there: never a repository above it
        "GIT_CEILING_DIRECTORIES": str(root.parent),
    }


def git_bytes(root: Path, *args: str) -> bytes | None:
    """``git ARGS`` in ROOT with the safe environment: stdout, or None on any failure."""
    argv = ["git", "--no-pager"]
    for setting in _SAFE_CONFIG:
        argv += ["-c", setting]
    try:
        proc = subprocess.run([*argv, "-C", str(root), *args], capture_output=True,
                              env=_environment(root), stdin=subprocess.DEVNULL,
                              timeout=GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def git(root: Path, *args: str) -> str | None:
    out = git_bytes(root, *args)
    return out.decode("utf-8", "replace").strip() if out is not None else None


def is_own_checkout(root: Path) -> bool:
    """ROOT holds ``.git`` and is the top level of the repository git finds there."""
    root = Path(root)
    if not os.path.lexists(root / ".git"):
        return False
    top = git(root, "rev-parse", "--show-toplevel")
    if not top:
        return False
    try:
        return Path(top).resolve() == root.resolve()
    except OSError:
        return False


def head_commit(root: Path) -> str | None:
    """HEAD's commit id when ROOT is a checkout of its own, else None."""
    if not is_own_checkout(root):
        return None
    commit = git(root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    return commit or None


def _split_z(data: bytes) -> list[bytes]:
    return [item for item in data.split(b"\0") if item]


def _blob_id(path: Path, algorithm: str) -> tuple[str, str] | None:
    """(mode, object id) of the worktree entry at PATH as git would store it, unfiltered."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISLNK(info.st_mode):
        data, mode = os.fsencode(os.readlink(path)), "120000"
    elif stat.S_ISREG(info.st_mode):
        data = path.read_bytes()
        mode = "100755" if info.st_mode & stat.S_IXUSR else "100644"
    else:
        return None
    digest = hashlib.new(algorithm, b"blob %d\0" % len(data) + data)
    return mode, digest.hexdigest()


def is_clean(root: Path, commit: str) -> bool:
    """The worktree and index of ROOT are exactly COMMIT's tree, nothing untracked.
    Computed from git's plumbing and this process's own hashing (see the module doc)."""
    root = Path(root)
    object_format = git(root, "rev-parse", "--show-object-format") or "sha1"
    if object_format not in ("sha1", "sha256"):
        return False
    tree_out = git_bytes(root, "ls-tree", "-r", "-z", "--full-tree", commit)
    index_out = git_bytes(root, "ls-files", "-z", "-s", "-v")
    untracked = git_bytes(root, "ls-files", "-z", "--others", "--exclude-standard")
    if tree_out is None or index_out is None or untracked is None:
        return False
    if _split_z(untracked):
        return False
    tree: dict[bytes, tuple[str, str]] = {}
    for item in _split_z(tree_out):
        meta, _, name = item.partition(b"\t")
        mode, kind, oid = meta.decode().split()
        if kind != "blob":  # a submodule's content cannot be checked from here
            return False
        tree[name] = (mode, oid)
    index: dict[bytes, tuple[str, str]] = {}
    for item in _split_z(index_out):
        meta, _, name = item.partition(b"\t")
        tag, mode, oid, stage = meta.decode().split()
        # "H" is a plain cached entry; lower case marks assume-unchanged, "S" skip-worktree
        if tag != "H" or stage != "0":
            return False
        index[name] = (mode, oid)
    if index != tree:
        return False
    for name, (mode, oid) in tree.items():
        found = _blob_id(root / os.fsdecode(name), object_format)
        if found != (mode, oid):
            return False
    return True
