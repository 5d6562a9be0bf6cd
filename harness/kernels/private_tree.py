"""The private copy a kernel child imports: the pinned files only, read safely, hashed after.

Capture side (standard library only). The source tree a side was verified from (a
``--sources`` export, the cache, a Nix store path) may change after it was checked, and it
may hold what the pin does not list (``__pycache__`` folders, ``.pyc`` files, links).
None of that reaches a kernel child: before any child starts, :func:`make_private_tree`

1. creates a fresh folder (``mkdtemp``: mode 0700, owned by this user) holding ``tree/``
   (the copy) and ``pycache/`` (an empty bytecode prefix for ``PYTHONPYCACHEPREFIX``);
2. reads each pinned file of the side, and only those, as a regular file: every folder of
   its path is opened with ``O_DIRECTORY | O_NOFOLLOW`` relative to the one above it (from
   the tree's own folder down), the file with ``O_NOFOLLOW | O_NONBLOCK``, then ``fstat``
   must say regular. A link of any kind at any level (file or folder), a FIFO, a device or
   a socket is refused; no ``__pycache__`` folder and no ``.pyc`` file is ever copied (a pin
   naming one is refused);
3. hashes every file of the copy after copying, reading it back from the copy, and refuses
   any difference from the pin's per-file sha256 (``evidence_drift``): what the child
   imports is exactly what was pinned, whatever happens to the source tree afterwards.

The child then hashes the copy again after its import and records those hashes
(``kernel_sha256``, ``tree_sha256``) in its evidence: the bytes imported. Hard links are
not refused: the bytes are copied once and the copy is what is hashed and imported.

Every copied file carries one fixed modification time (:data:`FIXED_MTIME`, 1980-01-01,
the zip epoch). A family whose kernel is built at run time by a tool that keys its cache on
paths and times (FlashInfer's JIT: ninja, with the copy's absolute paths in its build file)
asks for a *stable* copy (``stable=True``): the folder is not ``mkdtemp``'s random name but
``topp-gate-stable-<sha256 of the pinned file list, 16 hex>`` under the parent, made fresh
(a leftover folder of that name is removed first, never reused), held under an exclusive
``flock`` on ``<name>.lock`` for as long as the copy exists. Two copies of the same pinned
files then have the same paths and times, so the build tool finds its earlier build up to
date instead of rebuilding it; a second run of the same files on the machine waits for the
first to finish with its copy. What is imported is still copied and hashed anew each time.

The parent of a stable copy is, unless the caller names one, this user's own folder
:func:`stable_parent` (``$TOPP_GATE_CACHE``, else ``$XDG_CACHE_HOME/topp-gate``, else
``~/.cache/topp-gate``, then ``stable-trees``): created mode 0700, and refused when it is a
link, not a folder, owned by another user, or open to group or others (a predictable
``/tmp`` name let any local user create the lock or the folder first and so block every
FlashInfer run). Beside the copy, ``<name>.build`` (``PrivateTree.build``, 0700, this user's,
kept from run to run) is the run-time build's own folder: FlashInfer's JIT writes its ninja
build and shared object there, and the kernel child loads no library from anywhere else.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ..core.digest import sha256_file, sha256_hex
from ..core.errors import EvidenceDriftError, SourcesError
from ..core.safeio import read_capped

MAX_PINNED_FILE_BYTES = 64 << 20
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_LINK_ERRNOS = (errno.ELOOP, errno.EMLINK, errno.ENOTDIR)
FIXED_MTIME = 315532800  # 1980-01-01T00:00:00Z: every copied file's atime and mtime


@dataclass(frozen=True)
class PrivateTree:
    """A side's private copy: ``tree`` (imported), ``pycache`` (the fresh, empty bytecode
    prefix), ``files`` (path -> sha256 of the copy, read back after copying)."""

    root: Path
    tree: Path
    pycache: Path
    files: Mapping[str, str] = field(repr=False)
    lock_fd: int | None = field(default=None, repr=False)  # held by a stable copy
    build: Path | None = None  # a stable copy's build folder (kept from run to run)

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        if self.lock_fd is not None:
            os.close(self.lock_fd)  # releases the flock


def stable_name(files: Mapping[str, str]) -> str:
    """The folder name of a stable copy of ``files`` (path -> sha256)."""
    listing = json.dumps(sorted(files.items()), separators=(",", ":")).encode("utf-8")
    return f"topp-gate-stable-{sha256_hex(listing)[:16]}"


def _cache_base() -> Path:
    """``$TOPP_GATE_CACHE``, else ``$XDG_CACHE_HOME/topp-gate``, else ``~/.cache/topp-gate``
    (the cache ``harness.pins.sources`` uses)."""
    env = os.environ.get("TOPP_GATE_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "topp-gate"


def private_folder(path: Path, what: str) -> Path:
    """``path`` as a folder of this user with no group or other bits: made 0700 when
    missing, refused (one line) when it is a link, another kind of file, another user's,
    or open to group or others. Returns it resolved."""
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(path)
    except OSError as err:
        raise SourcesError(f"{what} {path}: {err.strerror or err}") from None
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise SourcesError(f"{what} {path} is a link or not a folder; refused")
    if info.st_uid != os.getuid():
        raise SourcesError(f"{what} {path} belongs to another user (uid {info.st_uid}); "
                           "refused")
    if info.st_mode & 0o077:
        raise SourcesError(f"{what} {path} is open to group or others (mode "
                           f"{stat.S_IMODE(info.st_mode):o}, 0700 required); refused")
    return path.resolve()


def stable_parent() -> Path:
    """This user's folder of stable copies (see the module docstring), made 0700 when
    missing and refused when not private."""
    base = _cache_base()
    try:
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as err:
        raise SourcesError(f"stable copy cache {base}: {err.strerror or err}") from None
    return private_folder(base / "stable-trees", "stable copy folder")


def _claim_stable(files: Mapping[str, str], parent: Path | None) -> tuple[Path, int]:
    """Lock ``<name>.lock`` (waiting for another holder), then make ``<name>`` fresh."""
    base = Path(parent).resolve() if parent is not None else stable_parent()
    root = base / stable_name(files)
    lock = root.with_name(root.name + ".lock")
    try:
        lock_fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
                          | os.O_CLOEXEC, 0o600)
    except OSError as err:
        raise SourcesError(f"stable copy lock {lock}: {err.strerror or err} (a link or "
                           "another kind of file there is refused)") from None
    try:
        info = os.fstat(lock_fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            raise SourcesError(f"stable copy lock {lock} is not a regular file of this user;"
                               " refused")
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        if root.is_symlink() or root.exists():
            if root.is_symlink() or not root.is_dir() or root.lstat().st_uid != os.getuid():
                raise SourcesError(f"stable copy folder {root} is not a folder of this user;"
                                   " refused")
            shutil.rmtree(root)  # a leftover of a killed run: never reused
        root.mkdir(mode=0o700)
        return root, lock_fd
    except BaseException:
        os.close(lock_fd)
        raise


def _refuse(side: str, rel: str, why: str) -> SourcesError:
    return SourcesError(f"{side} tree file {rel}: {why}; refused (a pinned file must be a "
                        "regular file, reached through no link)")


def _open_dir(parent: int, name: str, side: str, rel: str) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except OSError as err:
        if err.errno in _LINK_ERRNOS:
            raise _refuse(side, rel, f"folder {name!r} is a link or not a folder") from None
        raise SourcesError(f"{side} tree file {rel}: cannot open folder {name!r}: "
                           f"{err.strerror or err}") from None


def read_pinned(root_fd: int, rel: str, side: str) -> bytes:
    """The bytes of ``rel`` under the folder ``root_fd``, reached through no link."""
    parts = rel.split("/")
    if any(part in ("", ".", "..", "__pycache__") for part in parts) or rel.endswith(".pyc"):
        raise _refuse(side, rel, "not a source path (bytecode, or not relative)")
    fds: list[int] = []
    try:
        parent = root_fd
        for name in parts[:-1]:
            parent = _open_dir(parent, name, side, rel)
            fds.append(parent)
        try:
            fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=parent)
        except OSError as err:
            if err.errno in _LINK_ERRNOS:
                raise _refuse(side, rel, "it is a link") from None
            raise SourcesError(f"{side} tree file {rel}: {err.strerror or err}") from None
        fds.append(fd)
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _refuse(side, rel, "not a regular file (a FIFO, device or socket)")
        if info.st_size > MAX_PINNED_FILE_BYTES:
            raise SourcesError(f"{side} tree file {rel}: over {MAX_PINNED_FILE_BYTES} bytes")
        data = read_capped(fd, MAX_PINNED_FILE_BYTES)
        if len(data) > MAX_PINNED_FILE_BYTES:
            raise SourcesError(f"{side} tree file {rel}: over {MAX_PINNED_FILE_BYTES} bytes")
        return data
    finally:
        for opened in reversed(fds):
            os.close(opened)


def make_private_tree(side_name: str, files: Mapping[str, str], source: Path, *,
                      parent: Path | None = None, stable: bool = False) -> PrivateTree:
    """Copy the pinned ``files`` (path -> sha256) of ``source`` into a fresh 0700 folder
    and check the copy's hashes (see the module docstring). The caller removes it."""
    lock_fd = None
    build = None
    if stable:
        root, lock_fd = _claim_stable(files, parent)
    else:
        root = Path(tempfile.mkdtemp(prefix=f"topp-gate-{side_name}-", dir=parent)).resolve()
    try:
        if stable:
            build = private_folder(root.with_name(root.name + ".build"), "stable build folder")
        tree, pycache = root / "tree", root / "pycache"
        tree.mkdir(mode=0o700)
        pycache.mkdir(mode=0o700)
        try:
            root_fd = os.open(source, _DIR_FLAGS)
        except OSError as err:
            if err.errno in _LINK_ERRNOS:
                raise SourcesError(f"{side_name} tree {source} is a link or not a folder; "
                                   "refused") from None
            raise SourcesError(f"{side_name} tree {source}: {err.strerror or err}") from None
        try:
            for rel in sorted(files):
                data = read_pinned(root_fd, rel, side_name)
                target = tree / rel
                target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                             | os.O_CLOEXEC, 0o600)
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                os.utime(target, (FIXED_MTIME, FIXED_MTIME), follow_symlinks=False)
        finally:
            os.close(root_fd)
        copied = {rel: sha256_file(tree / rel) for rel in sorted(files)}  # hashed after
        for rel, digest in copied.items():
            if digest != files[rel]:
                raise EvidenceDriftError(f"{side_name} tree file {rel} (private copy)",
                                         files[rel], digest)
        return PrivateTree(root=root, tree=tree, pycache=pycache, files=copied,
                           lock_fd=lock_fd, build=build)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        if lock_fd is not None:
            os.close(lock_fd)
        raise


@contextmanager
def private_tree(side_name: str, files: Mapping[str, str], source: Path, *,
                 parent: Path | None = None, stable: bool = False) -> Iterator[PrivateTree]:
    """:func:`make_private_tree`, removed when the block ends."""
    copy = make_private_tree(side_name, files, source, parent=parent, stable=stable)
    try:
        yield copy
    finally:
        copy.remove()
