"""Pinned vLLM sources: pins, wheel fetch into a sha256-keyed cache, extraction, export.

Everything here fails closed. A wheel is hashed before anything opens it as a zip; an
extracted tree holds exactly the pinned files, each re-hashed before every use; any
difference is :class:`~harness.core.errors.EvidenceDriftError` and nothing runs.

Layout of the cache (``--cache``, else ``$TOPP_GATE_CACHE``, else
``$XDG_CACHE_HOME/topp-gate``, else ``~/.cache/topp-gate``)::

    wheels/<wheel sha256>/<wheel file name>
    trees/<tree digest>/<pinned files>        (the same layout as an export directory)
    quarantine/<sha256 found>-<file name>     (a download whose hash did not match)

The tree digest is the sha256 of the text ``"<sha256>  <path>\\n"`` for every pinned file,
sorted by path: exactly what ``sha256sum`` prints for the sorted file list, so
``(cd TREE && find . -type f | cut -c3- | LC_ALL=C sort | xargs sha256sum) | sha256sum``
reproduces it without Python.
"""

from __future__ import annotations

import importlib.resources
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .. import families
from ..core.digest import is_sha256, sha256_file, sha256_hex
from ..core.errors import EvidenceDriftError, SourcesError, UsageError
from ..core.names import SIDES
from ..core.safeio import read_regular_file
from ..families.vllm_triton import FAMILY as VLLM_TRITON
from .tree_digest import tree_digest as tree_digest  # re-exported

# vLLM's Triton kernel file (the default family's; a side's own is ``Side.kernel_path``)
KERNEL_PATH = VLLM_TRITON.kernel_path


# --- hashing --------------------------------------------------------------------------------

MAX_PATCH_BYTES = 16 << 20  # a unified diff of one kernel file


# --- pins -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Side:
    """One side's pinned sources: the wheel, and the exact files extracted from it."""

    name: str
    version: str
    wheel: str
    wheel_sha256: str
    kernel_path: str
    kernel_sha256: str
    files: Mapping[str, str] = field(repr=False)
    placeholders: tuple[str, ...] = ()
    # set only for a user's candidate (stock plus a patch file): the diff's sha256, and the
    # one pinned file it changed (the kernel file, or any other file of ``files``)
    patch_file_sha256: str | None = None
    patch_path: str | None = None
    # set only for a side read from a pin file (harness.pins.pinfile)
    origin: Mapping[str, Any] | None = None
    pin_sha256: str | None = None
    family: str = families.DEFAULT  # the kernel family (harness.families)

    @property
    def digest(self) -> str:
        return tree_digest(self.files)

    def describe(self) -> dict[str, Any]:
        """The side as recorded in evidence (no file list: the digest binds it)."""
        out: dict[str, Any] = {
            "side": self.name,
            "version": self.version,
        }
        if self.wheel:  # a side pinned from a source checkout has no wheel
            out.update(wheel=self.wheel, wheel_sha256=self.wheel_sha256)
        out.update({
            "kernel_path": self.kernel_path,
            "kernel_sha256": self.kernel_sha256,
            "tree_sha256": self.digest,
            "files": len(self.files),
            "placeholders": list(self.placeholders),
        })
        if self.patch_file_sha256 is not None:
            out["patch_file_sha256"] = self.patch_file_sha256
        if self.patch_path is not None:
            out["patch_path"] = self.patch_path
            out["patched_file_sha256"] = self.files[self.patch_path]
        if self.origin is not None:
            out["origin"] = dict(self.origin)
        if self.pin_sha256 is not None:
            out["pin_sha256"] = self.pin_sha256
        if self.family != families.DEFAULT:  # absent means vllm-triton, as in pin files
            out["family"] = self.family
        return out


@dataclass(frozen=True)
class Pins:
    kernel_path: str
    patch_sha256: str
    sides: Mapping[str, Side]
    raw: Mapping[str, Any] = field(repr=False)

    def side(self, name: str) -> Side:
        try:
            return self.sides[name]
        except KeyError:
            raise UsageError(f"unknown side {name!r}; pinned sides: {', '.join(self.sides)}")


def _check_sha(value: object, what: str) -> str:
    if not isinstance(value, str) or not is_sha256(value):
        raise SourcesError(f"pins: {what} is not a lowercase sha256 hex digest")
    return value


def parse_pins(raw: Mapping[str, Any]) -> Pins:
    """Check and convert the JSON pins (see docs/sources-and-kernels.md for the layout)."""
    try:
        kernel_path = raw["kernel_path"]
        if kernel_path != families.get(families.of_side(raw)).kernel_path:
            raise SourcesError(f"pins: kernel_path {kernel_path!r} is not the family's")
        sides: dict[str, Side] = {}
        for name in SIDES:
            entry = raw["sides"][name]
            files = dict(entry.get("files", {}))
            for path, digest in files.items():
                _check_sha(digest, f"{name} file {path}")
            if files and files.get(kernel_path) != entry["kernel_sha256"]:
                raise SourcesError(f"pins: {name} file list disagrees with kernel_sha256")
            side = Side(
                name=name,
                version=entry["version"],
                wheel=entry["wheel"],
                wheel_sha256=_check_sha(entry["wheel_sha256"], f"{name} wheel_sha256"),
                kernel_path=kernel_path,
                kernel_sha256=_check_sha(entry["kernel_sha256"], f"{name} kernel_sha256"),
                files=files,
                placeholders=tuple(entry.get("placeholders", ())),
            )
            if files and entry.get("tree_sha256") != side.digest:
                raise SourcesError(f"pins: {name} tree_sha256 disagrees with its file list")
            sides[name] = side
        patch = raw.get("patch_sha256", "")
        return Pins(kernel_path=kernel_path, patch_sha256=patch, sides=sides, raw=raw)
    except (KeyError, TypeError, AttributeError) as err:
        raise SourcesError(f"pins: malformed ({err!r})") from None


def load_pins() -> Pins:
    """The pins shipped with the package (``harness/data/pins.json``)."""
    text = importlib.resources.files("harness").joinpath("data/pins.json").read_text("utf-8")
    pins = parse_pins(json.loads(text))
    for side in pins.sides.values():
        if not side.files:
            raise SourcesError(f"pins: {side.name} has no file list; run scripts/pin_sources.py")
    return pins


# --- the kernel diff and a strict unified-diff applier ---------------------------------------


def kernel_diff(stock: bytes, patched: bytes, path: str) -> bytes:
    """The one unified diff whose sha256 is pinned as ``patch_sha256``.

    ``difflib.unified_diff`` over UTF-8 lines (line endings kept), labels ``a/<path>`` and
    ``b/<path>``, no dates, 3 lines of context, encoded as UTF-8. Both files must end with a
    newline (vLLM's do); otherwise the diff would not be a valid patch.
    """
    import difflib

    a, b = stock.decode("utf-8"), patched.decode("utf-8")
    if (a and not a.endswith("\n")) or (b and not b.endswith("\n")):
        raise SourcesError(f"{path}: kernel_diff needs files that end with a newline")
    lines = difflib.unified_diff(
        a.splitlines(keepends=True), b.splitlines(keepends=True),
        fromfile=f"a/{path}", tofile=f"b/{path}", n=3,
    )
    return "".join(lines).encode("utf-8")


_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def apply_patch(original: bytes, diff: bytes, path: str) -> bytes:
    """Apply a one-file unified diff to ``original`` exactly: no fuzz, no offsets.

    Every hunk's context and removed lines must match at the line numbers the hunk states,
    hunks must be in order, and the diff must name ``path`` (optionally under ``a/`` and
    ``b/``). Anything else is refused with :class:`UsageError`.
    """
    lines = diff.splitlines(keepends=True)
    src = original.splitlines(keepends=True)
    out: list[bytes] = []
    pos = 0  # next unconsumed line of src (0-based)
    i = 0
    names: list[bytes] = []
    hunks = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith((b"--- ", b"+++ ")):
            names.append(line[4:].split(b"\t")[0].strip())
            i += 1
            continue
        match = _HUNK.match(line)
        if not match:
            if hunks:
                raise UsageError(f"patch: unexpected line {i + 1} after a hunk: {line[:60]!r}")
            i += 1  # header text before the first file header (git diff, mail)
            continue
        if len(names) != 2:
            raise UsageError("patch: a hunk before its '--- a/FILE' and '+++ b/FILE' lines")
        hunks += 1
        i, pos = _apply_hunk(lines, i, match, src, pos, out, hunks)
    _check_patch_names(hunks, names, path)
    out.extend(src[pos:])
    return b"".join(out)


def _apply_hunk(lines: list[bytes], i: int, match: re.Match[bytes], src: list[bytes],
                pos: int, out: list[bytes], number: int) -> tuple[int, int]:
    """Apply hunk ``number`` (its header at ``lines[i]``) at ``src[pos:]``, appending to
    ``out``; returns the next diff line and the next unconsumed source line."""
    old_start, old_len = int(match[1]), int(match[2] or b"1")
    new_len = int(match[4] or b"1")
    start = old_start - 1 if old_len else old_start
    if start < pos:
        raise UsageError(f"patch: hunk {number} overlaps or is out of order")
    out.extend(src[pos:start])
    pos = start
    seen_old = seen_new = 0
    i += 1
    while i < len(lines) and (seen_old < old_len or seen_new < new_len):
        body = lines[i]
        tag, text = body[:1], body[1:]
        if i + 1 < len(lines) and lines[i + 1].startswith(b"\\"):
            text = text.rstrip(b"\r\n")  # "\ No newline at end of file"
        if tag in (b" ", b"-"):
            if pos >= len(src) or src[pos] != text:
                raise UsageError(
                    f"patch: hunk {number} does not apply exactly at line {pos + 1}"
                )
            pos += 1
            seen_old += 1
            if tag == b" ":
                out.append(text)
                seen_new += 1
        elif tag == b"+":
            out.append(text)
            seen_new += 1
        else:
            raise UsageError(f"patch: hunk {number} has a bad line {i + 1}: {body[:60]!r}")
        i += 1
        while i < len(lines) and lines[i].startswith(b"\\"):
            i += 1
    if seen_old != old_len or seen_new != new_len:
        raise UsageError(f"patch: hunk {number} is truncated")
    return i, pos


def _check_patch_names(hunks: int, names: list[bytes], path: str) -> None:
    """A patch holds hunks for exactly one file, and that file is ``path``."""
    if not hunks:
        raise UsageError("patch: no hunks found (expected a unified diff)")
    if len(names) != 2:
        raise UsageError("patch: expected exactly one file ('--- a/FILE' and '+++ b/FILE')")
    for name in names:
        text_name = name.decode("utf-8", "replace")
        if text_name not in (path, f"a/{path}", f"b/{path}"):
            raise UsageError(f"patch: it changes {text_name!r}, not {path!r}")


# git's extended header lines a strict one-file content diff never needs: a mode change, a
# new, deleted, renamed or copied file, a binary patch (a link is mode 120000)
_GIT_EXTENDED = (b"old mode ", b"new mode ", b"new file mode ", b"deleted file mode ",
                 b"rename from ", b"rename to ", b"copy from ", b"copy to ",
                 b"similarity index ", b"dissimilarity index ", b"GIT binary patch",
                 b"Binary files ")


def _strip_prefix(name: str) -> str:
    return name[2:] if name.startswith(("a/", "b/")) else name


def patch_target(diff: bytes, files: Mapping[str, str], *, kernel_path: str,
                 what: str = "the side") -> str:
    """The one pinned file a unified diff changes, checked before anything is applied.

    The diff must change exactly one file, named the same in its ``---`` and ``+++`` lines
    (optionally under ``a/`` and ``b/``), by a relative path without ``..``, that is a file
    of ``files`` (the side's pinned set: the pin file's ``files``). A link (git's mode
    120000), a mode change, a new, deleted, renamed or binary file is refused. Every refusal
    is one :class:`UsageError` line naming what is allowed."""
    allowed = (f"a diff may change exactly one file of {what}'s pinned set ({len(files)} "
               f"files, the pin file's 'files'; its kernel file is {kernel_path})")
    names: list[str] = []
    lines = diff.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        match = _HUNK.match(line)
        if match is not None:  # skip the hunk's body: its lines are content, never headers
            old_left, new_left = int(match[2] or b"1"), int(match[4] or b"1")
            while i < len(lines) and (old_left > 0 or new_left > 0):
                tag = lines[i][:1]
                old_left -= tag in (b" ", b"-", b"")
                new_left -= tag in (b" ", b"+", b"")
                i += 1
            continue
        if line.startswith((b"--- ", b"+++ ")):
            names.append(line[4:].split(b"\t")[0].strip().decode("utf-8", "replace"))
        elif line.startswith((b"index ", b"old mode ", b"new mode ", b"new file mode ",
                              b"deleted file mode ")) and line.split()[-1:] == [b"120000"]:
            raise UsageError(f"patch: it changes a link (mode 120000); {allowed}")
        elif line.startswith(_GIT_EXTENDED):
            shown = line.decode("utf-8", "replace").strip()[:60]
            raise UsageError(f"patch: {shown!r} (not a change of one file's lines); {allowed}")
    if not names:
        raise UsageError("patch: no '--- a/FILE' and '+++ b/FILE' lines (expected a unified "
                         "diff)")
    if len(names) != 2:
        changed = sorted({_strip_prefix(n) for n in names if n != "/dev/null"})
        raise UsageError(f"patch: it changes {len(names) // 2 or 1} files "
                         f"({', '.join(repr(n) for n in changed[:3])}); {allowed}")
    old, new = names
    if "/dev/null" in names:
        raise UsageError(f"patch: it creates or deletes a file; {allowed}")
    if _strip_prefix(old) != _strip_prefix(new):
        raise UsageError(f"patch: its '---' and '+++' lines name two files ({old!r}, "
                         f"{new!r}); {allowed}")
    path = _strip_prefix(new)
    parts = path.split("/")
    if path.startswith("/") or ".." in parts or "" in parts or "." in parts or "\\" in path:
        raise UsageError(f"patch: it changes {path!r}, not a plain relative path; {allowed}")
    if path not in files:
        raise UsageError(f"patch: it changes {path!r}, which is not in the pinned set; "
                         f"{allowed}")
    return path


def candidate(stock: Side, patched_file: bytes, patch_bytes: bytes, *,
              name: str = "patched", path: str | None = None) -> Side:
    """A user's candidate: stock's files with the one file ``path`` (default: the kernel
    file) replaced by the patched bytes; ``kernel_sha256`` follows the kernel file."""
    path = stock.kernel_path if path is None else path
    if path not in stock.files:
        raise UsageError(f"patch: {path!r} is not in the {stock.name} side's pinned set")
    files = dict(stock.files)
    files[path] = sha256_hex(patched_file)
    return replace(
        stock, name=name, kernel_sha256=files[stock.kernel_path], files=files,
        patch_file_sha256=sha256_hex(patch_bytes), patch_path=path,
    )


def apply_side_patch(side: Side, tree: Path, patch_bytes: bytes) -> tuple[str, bytes]:
    """The file of ``side``'s verified ``tree`` the diff changes (:func:`patch_target`) and
    its bytes after applying the diff exactly (:func:`apply_patch`)."""
    path = patch_target(patch_bytes, side.files, kernel_path=side.kernel_path,
                        what=f"the {side.name} side")
    original = read_regular_file(tree / path, f"{side.name} file {path}", 1 << 30,
                                 follow_link=False)
    if sha256_hex(original) != side.files[path]:  # re-read after verification
        raise EvidenceDriftError(f"{side.name} file {path}", side.files[path],
                                 sha256_hex(original))
    return path, apply_patch(original, patch_bytes, path)


def patched_side(side: Side, tree: Path, patch_bytes: bytes, *, cache: Path) -> tuple[Side, Path]:
    """``side`` with a unified diff applied exactly to one of its pinned files (the kernel
    file or any other): the side and its tree."""
    path, patched = apply_side_patch(side, tree, patch_bytes)
    result = candidate(side, patched, patch_bytes, name=side.name, path=path)
    return result, build_candidate_tree(result, tree, patched, cache / "trees", path=path)


# --- cache and fetch --------------------------------------------------------------------------


def cache_root(override: Path | str | None = None) -> Path:
    if override:
        return Path(override).expanduser()
    env = os.environ.get("TOPP_GATE_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "topp-gate"


def _quarantine(path: Path, actual: str, cache: Path) -> None:
    target = cache / "quarantine" / f"{actual}-{path.name}"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, target)
    except OSError:
        path.unlink(missing_ok=True)


def verified_wheel(side: Side, cache: Path) -> Path | None:
    """The cached wheel if present, after checking its sha256 (drift is quarantined)."""
    path = cache / "wheels" / side.wheel_sha256 / side.wheel
    if not path.is_file():
        return None
    actual = sha256_file(path)
    if actual != side.wheel_sha256:
        _quarantine(path, actual, cache)
        raise EvidenceDriftError(f"cached wheel {side.wheel}", side.wheel_sha256, actual)
    return path


def fetch_wheel(side: Side, cache: Path, *, find_links: str | None = None,
                quiet: bool = False) -> Path:
    """Download the pinned wheel with pip (no dependencies) unless already cached; verify it.

    pip is given the exact version and ``--require-hashes`` with the pinned sha256; the file
    is hashed again here before anything opens it.
    """
    cached = verified_wheel(side, cache)
    if cached is not None:
        return cached
    dest = cache / "wheels" / side.wheel_sha256
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="download-", dir=cache) as tmp:
        req = Path(tmp) / "requirements.txt"
        distribution = side.wheel.split("-", 1)[0] or "vllm"  # its wheel's name, e.g. vllm
        req.write_text(f"{distribution}=={side.version} --hash=sha256:{side.wheel_sha256}\n")
        cmd = [
            sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
            "--require-hashes", "--platform", _wheel_platform(side.wheel),
            "--dest", tmp, "-r", str(req), "--disable-pip-version-check",
        ]
        if find_links:
            cmd += ["--find-links", find_links]
        if quiet:
            cmd += ["--quiet"]
        # pip prints its own progress bar on stderr when that is a terminal
        proc = subprocess.run(cmd, stdout=sys.stderr, check=False)
        got = Path(tmp) / side.wheel
        if proc.returncode != 0 or not got.is_file():
            raise SourcesError(
                f"pip could not download {side.wheel} (exit {proc.returncode}); "
                "check the network or pass --find-links DIR holding the wheel"
            )
        actual = sha256_file(got)
        if actual != side.wheel_sha256:
            _quarantine(got, actual, cache)
            raise EvidenceDriftError(f"downloaded wheel {side.wheel}", side.wheel_sha256, actual)
        final = dest / side.wheel
        os.replace(got, final)
    return final


def _wheel_platform(wheel: str) -> str:
    """The platform tag of a wheel file name, so pip picks that exact wheel on any host."""
    parts = wheel[: -len(".whl")].split("-")
    if len(parts) < 5:
        raise SourcesError(f"pins: {wheel!r} is not a wheel file name")
    return parts[-1].split(".")[0]


# --- trees ------------------------------------------------------------------------------------


def _tree_entries(side: Side, tree: Path) -> list[str]:
    """Every file under ``tree`` by relative path; a link (to a file or a folder), a FIFO,
    a device or a socket anywhere in it is refused (the walk never follows one)."""
    found: list[str] = []
    pending = [tree]
    while pending:
        folder = pending.pop()
        for entry in sorted(os.scandir(folder), key=lambda e: e.name):
            rel = Path(entry.path).relative_to(tree).as_posix()
            mode = entry.stat(follow_symlinks=False).st_mode
            if stat.S_ISDIR(mode):
                pending.append(Path(entry.path))
            elif stat.S_ISREG(mode):
                found.append(rel)
            else:
                what = "a link" if stat.S_ISLNK(mode) else "not a regular file"
                raise EvidenceDriftError(f"{side.name} tree {tree}: {rel} is {what}",
                                         side.files.get(rel, side.digest), what)
    return sorted(found)


def verify_tree(side: Side, tree: Path) -> Path:
    """Check that ``tree`` holds exactly ``side.files`` with their hashes, and no link or
    special file anywhere (a ``__pycache__`` folder link included); return it."""
    if tree.is_symlink() or not tree.is_dir():
        raise SourcesError(f"{side.name} tree {tree} does not exist or is a link")
    found = _tree_entries(side, tree)
    extra = sorted(set(found) - set(side.files))
    missing = sorted(set(side.files) - set(found))
    if extra or missing:
        what = f"extra file {extra[0]}" if extra else f"missing file {missing[0]}"
        raise EvidenceDriftError(f"{side.name} tree {tree}: {what}", side.digest,
                                 "a different tree")
    for rel in found:
        path = tree / rel
        if path.is_symlink() or not path.is_file():
            raise EvidenceDriftError(f"{side.name} tree file {rel}", side.files[rel], "not a file")
        actual = sha256_file(path)
        if actual != side.files[rel]:
            raise EvidenceDriftError(f"{side.name} tree file {rel}", side.files[rel], actual)
    return tree


def _publish(tmp: Path, final: Path, side: Side) -> Path:
    verify_tree(side, tmp)
    try:
        os.replace(tmp, final)
    except OSError:  # someone else published the same digest first
        shutil.rmtree(tmp, ignore_errors=True)
    return verify_tree(side, final)


def extract_tree(side: Side, wheel: Path, trees: Path) -> Path:
    """Extract only the pinned files of ``wheel`` (already verified) into ``trees/<digest>``."""
    final = trees / side.digest
    if final.exists():
        return verify_tree(side, final)
    trees.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{side.name}-", dir=trees))
    try:
        with zipfile.ZipFile(wheel) as archive:
            names = set(archive.namelist())
            for rel in sorted(side.files):
                if rel not in names:
                    raise EvidenceDriftError(f"{side.wheel}: {rel}", side.files[rel], "absent")
                target = tmp / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.read(rel))
    except zipfile.BadZipFile as err:
        shutil.rmtree(tmp, ignore_errors=True)
        raise SourcesError(f"{wheel}: not a readable wheel ({err})") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return _publish(tmp, final, side)


def write_tree(side: Side, read: Callable[[str], bytes], trees: Path) -> Path:
    """Write ``side.files`` read by ``read(path)`` into ``trees/<digest>``, verified."""
    final = trees / side.digest
    if final.exists():
        return verify_tree(side, final)
    trees.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{side.name}-", dir=trees))
    try:
        for rel in sorted(side.files):
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(read(rel))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return _publish(tmp, final, side)


def build_candidate_tree(side: Side, stock_tree: Path, patched_kernel: bytes,
                         trees: Path, *, path: str | None = None) -> Path:
    """Materialize a candidate's tree: a copy of the verified stock tree with the patched
    file (``path``, default the kernel file) replaced; published only once it holds exactly
    ``side.files`` (the patched file's new sha256 included)."""
    final = trees / side.digest
    if final.exists():
        return verify_tree(side, final)
    trees.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".candidate-", dir=trees))
    try:
        shutil.rmtree(tmp)
        shutil.copytree(stock_tree, tmp)
        target = tmp / (side.kernel_path if path is None else path)
        target.unlink()  # a fresh file: never written through a hard link into the stock tree
        target.write_bytes(patched_kernel)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return _publish(tmp, final, side)


def resolve_tree(side: Side, *, cache: Path, sources: Path | None = None) -> Path:
    """A verified tree for ``side``, from ``sources`` (an export) or the cache; never downloads.

    With the cache, a missing tree is extracted from the cached wheel (verified first).
    """
    if sources is not None:
        return verify_tree(side, sources / side.digest)
    tree = cache / "trees" / side.digest
    if tree.exists():
        return verify_tree(side, tree)
    wheel = verified_wheel(side, cache)
    if wheel is None:
        raise SourcesError(
            f"{side.name} sources (vLLM {side.version}) are not fetched; run "
            "'topp-gate sources fetch' or pass --sources DIR"
        )
    return extract_tree(side, wheel, cache / "trees")


def user_candidate(pins: Pins, patch_file: Path, *, cache: Path,
                   sources: Path | None = None) -> tuple[Side, Path]:
    """Stock plus a user's patch file (a diff of one file of stock's pinned set): the
    candidate side and its verified tree."""
    stock = pins.side("stock")
    stock_tree = resolve_tree(stock, cache=cache, sources=sources)
    patch_bytes = read_regular_file(patch_file, "patch", MAX_PATCH_BYTES)
    path, patched = apply_side_patch(stock, stock_tree, patch_bytes)
    side = candidate(stock, patched, patch_bytes, path=path)
    return side, build_candidate_tree(side, stock_tree, patched, cache / "trees", path=path)


def export_trees(sides: Iterable[Side], trees: Mapping[str, Path], dest: Path) -> list[Path]:
    """Copy verified trees to ``dest/<digest>`` (the layout ``--sources DIR`` reads)."""
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for side in sides:
        final = dest / side.digest
        if final.exists():
            written.append(verify_tree(side, final))
            continue
        tmp = Path(tempfile.mkdtemp(prefix=f".{side.name}-", dir=dest))
        shutil.rmtree(tmp)
        shutil.copytree(verify_tree(side, trees[side.name]), tmp)
        written.append(_publish(tmp, final, side))
    return written
