"""``topp-gate sources pin SPEC``: turn a vLLM release, wheel or source checkout into a pin file.

Capture side. A SPEC is one of:

* ``vllm==X.Y.Z``: pip downloads exactly that release's wheel (no dependencies, binary
  only); its sha256 is recorded;
* a path to a local ``.whl`` file (a build of your own branch);
* a path to a local vLLM source tree (a git checkout: its commit and whether it is clean
  are recorded; a tree that is not a git checkout records ``commit: null, clean: false``).

The kernel's import closure is found by static analysis (:mod:`harness.pins.closure`), each file
is hashed, and the files are copied into the content-addressed cache
(``trees/<tree digest>``), so a run or ``sources export`` never needs the SPEC again. A
wheel is kept in the cache too (``wheels/<sha256>/``). A SPEC without the kernel file is
refused (exit 2) with one line naming its version.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import families
from ..core.digest import sha256_file, sha256_hex
from ..core.errors import SourcesError, UsageError
from ..core.terminal import printable
from . import safegit
from .pinfile import SOURCE_TREE, WHEEL, parse_pin_file, pin_bytes, pin_document
from .sources import cache_root, write_tree

_RELEASE = re.compile(r"^(?P<dist>[A-Za-z][A-Za-z0-9_.-]*)=="
                      r"(?P<version>\d+(?:\.\d+)*(?:(?:a|b|rc|\.post|\.dev)\d+)*)$")
_VERSION_PY = re.compile(r"""^(?:__version__|version)\s*(?::\s*str\s*)?=\s*["']([^"']+)["']""",
                         re.MULTILINE)
# The manylinux tags vLLM's x86_64 wheels have used (pip picks the release's one).
_PLATFORMS = tuple(f"manylinux_2_{minor}_x86_64" for minor in range(17, 40)) + (
    "manylinux2014_x86_64", "manylinux1_x86_64")


@dataclass(frozen=True)
class FileSet:
    """The files of a wheel or a tree: relative POSIX paths and a reader."""

    names: Collection[str]
    read: Callable[[str], bytes]


@dataclass(frozen=True)
class PinResult:
    path: Path
    version: str
    files: int
    placeholders: tuple[str, ...]
    third_party: tuple[str, ...]
    tree: Path
    family: str = families.DEFAULT


# --- SPEC -> a file set ------------------------------------------------------------------------


def cached_release(version: str, cache: Path, distribution: str = "vllm") -> Path | None:
    """The release's wheel already in the cache (``wheels/<sha256>/<name>``, kept by an
    earlier download) when exactly one wheel of that version for the platforms pip is asked
    for is there and its bytes still hash to its folder's name; None otherwise. So a pinned
    release whose verified wheel is cached pins offline, without calling pip."""
    stem = _wheel_stem(distribution)
    tags = tuple(_PLATFORMS)
    found = []
    for wheel in sorted((cache / "wheels").glob(f"*/{stem}-{version}-*.whl")):
        name = wheel.name[: -len(".whl")]
        platform_tag = name.rsplit("-", 1)[-1]
        if wheel.is_file() and not wheel.is_symlink() and (
                platform_tag == "any" or any(t in platform_tag.split(".") for t in tags)):
            found.append(wheel)
    if len(found) != 1 or sha256_file(found[0]) != found[0].parent.name:
        return None
    return found[0]


def download_release(version: str, cache: Path, distribution: str = "vllm") -> Path:
    """pip-download ``distribution==version`` (one wheel, no dependencies) into the cache;
    a verified wheel already there (:func:`cached_release`) is used without pip."""
    kept = cached_release(version, cache, distribution)
    if kept is not None:
        return kept
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pin-download-", dir=cache) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--dest", tmp, "--disable-pip-version-check", "--quiet"]
        for platform in _PLATFORMS:
            cmd += ["--platform", platform]
        cmd.append(f"{distribution}=={version}")
        proc = subprocess.run(cmd, stdout=sys.stderr, check=False)
        wheels = sorted(Path(tmp).glob(f"{_wheel_stem(distribution)}-*.whl"))
        if proc.returncode != 0 or len(wheels) != 1:
            raise SourcesError(f"pip could not download the {printable(distribution)} "
                               f"{printable(version)} wheel (exit {proc.returncode}); check "
                               "the version and the network")
        return keep_wheel(wheels[0], cache, move=True)


def keep_wheel(wheel: Path, cache: Path, *, move: bool = False) -> Path:
    """Store a wheel at ``wheels/<sha256>/<name>`` in the cache; return that path."""
    digest = sha256_file(wheel)
    final = cache / "wheels" / digest / wheel.name
    if final.is_file() and sha256_file(final) == digest:
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{final.name}.tmp")
    if move:
        shutil.move(str(wheel), tmp)
    else:
        shutil.copyfile(wheel, tmp)
    os.replace(tmp, final)
    return final


def _wheel_stem(distribution: str) -> str:
    """A distribution's name as its wheel files spell it (``flashinfer_python``)."""
    return re.sub(r"[-_.]+", "_", distribution).lower()


def wheel_version(name: str, distribution: str = "vllm") -> str:
    parts = name[: -len(".whl")].split("-")
    if len(parts) < 5 or parts[0].lower() != _wheel_stem(distribution):
        raise UsageError(f"{name!r} is not a {distribution} wheel file name")
    return parts[1]


def tree_files(root: Path) -> FileSet:
    """Every regular file under ``root`` except git's own, by relative POSIX path."""
    names = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for filename in filenames:
            path = Path(dirpath) / filename
            if path.is_file() and not path.is_symlink():
                names.append(path.relative_to(root).as_posix())

    def read(rel: str) -> bytes:
        return (root / rel).read_bytes()

    return FileSet(names, read)


def tree_version(root: Path) -> str:
    """vLLM's version of a checkout: ``vllm/_version.py`` if built, else ``git describe``
    of the checkout's own repository (never one above it; ``-dirty`` from our clean flag)."""
    version_py = root / "vllm" / "_version.py"
    if version_py.is_file():
        match = _VERSION_PY.search(version_py.read_text("utf-8", "replace"))
        if match:
            return match.group(1)
    commit = safegit.head_commit(root)
    described = safegit.git(root, "describe", "--tags", "--always", commit) if commit else None
    if not described:
        return "unknown"
    dirty = "" if safegit.is_clean(root, commit or "") else "-dirty"
    return described.lstrip("v") + dirty


def tree_origin(root: Path) -> dict[str, Any]:
    """The checkout's commit and clean flag (harness/pins/safegit.py: git runs nothing
    from the tree, and the flag sees index tricks). A folder inside another repository is
    not a checkout: ``commit: null, clean: false``."""
    commit = safegit.head_commit(root)
    return {"kind": SOURCE_TREE, "commit": commit,
            "clean": commit is not None and safegit.is_clean(root, commit)}


# --- the pin ------------------------------------------------------------------------------------


def pin_files(fileset: FileSet, version: str, family: families.Family | None = None,
              ) -> tuple[dict[str, str], list[str], list[str]]:
    """(path -> sha256, placeholders, third-party packages) of the family's kernel closure
    (default family: vLLM's Triton kernel) plus the extra files the family's import reads."""
    family = family or families.get()
    if family.kernel_path not in fileset.names:
        raise SourcesError(f"vLLM {printable(version)} does not ship {family.kernel_path}; "
                           "nothing to pin")
    found = family.closure(fileset.names, fileset.read)
    paths = set(found.files) | set(family.extra_files(fileset.names))
    files = {path: sha256_hex(fileset.read(path)) for path in sorted(paths)}
    return files, sorted(found.placeholders), sorted(found.third_party)


def pin(spec: str, out: Path, *, cache: Path | None = None,
        family: str | None = None) -> PinResult:
    """Write the pin file for ``spec`` to ``out`` (never overwrites) and cache its tree;
    ``family`` names the kernel family whose closure is pinned (None: the family of the
    release's distribution, ``vllm-triton`` for vLLM and any path)."""
    release = _RELEASE.match(spec)
    if family is None:
        dist = release["dist"] if release else (
            Path(spec).name.split("-", 1)[0] if spec.endswith(".whl") else None)
        family = (families.for_distribution(dist) if dist else None) or families.DEFAULT
    kind = families.get(family)
    if os.path.lexists(out):
        raise UsageError(f"{out} already exists; a pin file is never overwritten")
    if release and _wheel_stem(release["dist"]) != _wheel_stem(kind.distribution):
        raise UsageError(f"family {kind.id} pins {kind.distribution}, not "
                         f"{printable(release['dist'])}")
    root = cache_root(cache)
    archive: zipfile.ZipFile | None = None
    try:
        if release:
            wheel = download_release(release["version"], root, kind.distribution)
        elif spec.endswith(".whl"):
            if not Path(spec).is_file():
                raise UsageError(f"wheel {spec} does not exist")
            wheel = keep_wheel(Path(spec), root)
        elif Path(spec).is_dir():
            wheel = None
        else:
            raise UsageError(f"SPEC {spec!r} is neither vllm==X.Y.Z, a .whl file nor a "
                             "source tree directory")
        if wheel is not None:
            try:
                archive = zipfile.ZipFile(wheel)
            except (zipfile.BadZipFile, OSError) as err:
                raise SourcesError(f"{wheel}: not a readable wheel ({err})") from None
            fileset = FileSet(set(archive.namelist()), archive.read)
            version = wheel_version(wheel.name, kind.distribution)
            origin: dict[str, Any] = {"kind": WHEEL, "wheel": wheel.name,
                                      "wheel_sha256": sha256_file(wheel)}
        else:
            tree = Path(spec).resolve()
            fileset = tree_files(tree)
            version = tree_version(tree)
            origin = tree_origin(tree)
        files, placeholders, third = pin_files(fileset, version, kind)
        document = pin_document(version=version, kernel_path=kind.kernel_path, origin=origin,
                                files=files, placeholders=placeholders, family=kind.id)
        raw = pin_bytes(document)
        parsed = parse_pin_file(raw, source=str(out))  # what we write must load
        tree_path = write_tree(parsed.side("stock"), fileset.read, root / "trees")
    finally:
        if archive is not None:
            archive.close()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_bytes(raw)
    os.replace(tmp, out)
    return PinResult(path=out, version=version, files=len(files),
                     placeholders=tuple(placeholders), third_party=tuple(third), tree=tree_path,
                     family=kind.id)
