"""Which code judged a bundle: digests of the trusted core, recomputable from any checkout.

Two algorithms, one rule: sha256 over the sorted lines
``<relative path> NUL <sha256 hex of the file's bytes> LF``, one line per ``.py`` or
``.json`` file (and ``py.typed``), skipping hidden names and ``__pycache__``.

- ``topp-gate/core-tree/v1`` (receipts from now on): the files of ``harness/core/``, the
  trusted core: oracle, gate, judge, schemas, receipt, DSSE, bundle reader and verifier.
  Editing the capture side (kernels, report, CLI) does not change it, so ``verify --strict``
  means "judged by the same trusted code".
- ``topp-gate/harness-tree/v1`` (receipts written before the core existed): every file of
  the ``harness`` package. Kept so that committed bundles stay checkable; VERIFYING.md names
  the commit each of them records.

``topp-gate harness-digest [DIR]`` prints the digest of a checkout (DIR holds ``harness/``)
or, without DIR, of the installed package.

The digest covers sources, but Python may execute bytecode instead: a ``.pyc`` in a
``__pycache__`` whose header matches its source's size and time is loaded in its place, so a
planted one would run other code under an unchanged digest. Both digests therefore refuse
(:class:`~harness.core.errors.HarnessDriftError`, exit 4) a covered folder holding bytecode
that is not exactly what its source compiles to (:func:`foreign_bytecode`): every ``.pyc``
must sit in a ``__pycache__`` beside its ``.py``, carry this interpreter's magic number
and cache tag, and unmarshal to a code object equal to ``compile()`` of the source (so a
``.pyc`` Python wrote itself passes, whoever wrote it). The installed digest (what
``verify`` compares) also checks the bytecode each loaded module of the scope names
(``__cached__``), wherever ``sys.pycache_prefix`` put it. Code that already ran cannot be
undone by a check in the same process: an auditor who doubts a checkout runs
``topp-gate harness-digest DIR`` from a trusted install, which refuses such a checkout.
The digest algorithm itself (the sources) is unchanged.
"""

from __future__ import annotations

import importlib.util
import marshal
import os
import stat
import sys
from collections.abc import Iterable, Iterator
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from .digest import sha256_hex
from .errors import HarnessDriftError, UsageError
from .safeio import read_regular_file

CORE_TREE = "topp-gate/core-tree/v1"
HARNESS_TREE = "topp-gate/harness-tree/v1"
ALGORITHMS = (CORE_TREE, HARNESS_TREE)
# folder of each algorithm, relative to the folder that holds the ``harness`` package
_SCOPE = {CORE_TREE: ("harness", "core"), HARNESS_TREE: ("harness",)}
_SUFFIXES = (".py", ".json")
_NAMES = ("py.typed",)
MAX_FILES = 4096
MAX_FILE_BYTES = 16 << 20


def _counted(name: str) -> bool:
    return name.endswith(_SUFFIXES) or name in _NAMES


def _skipped(name: str) -> bool:
    return name.startswith(".") or name == "__pycache__"


def digest_lines(files: Iterable[tuple[str, bytes]]) -> dict[str, Any]:
    """The digest of ``(relative path, bytes)`` pairs, with the number of files."""
    lines = sorted(rel.encode("utf-8") + b"\0" + sha256_hex(data).encode() + b"\n"
                   for rel, data in files)
    return {"sha256": sha256_hex(b"".join(lines)), "files": len(lines)}


def _installed(node: Traversable, prefix: str = "") -> Iterator[tuple[str, bytes]]:
    for child in node.iterdir():
        if _skipped(child.name):
            continue
        rel = f"{prefix}{child.name}"
        if child.is_dir():
            yield from _installed(child, rel + "/")
        elif _counted(child.name):
            yield rel, child.read_bytes()


def installed_digest(algorithm: str = CORE_TREE) -> dict[str, Any]:
    """The digest of this installed package under ``algorithm``; refused when the package
    runs (or could run) bytecode that is not its sources' (module docstring)."""
    if algorithm not in _SCOPE:
        raise UsageError(f"unknown harness digest algorithm {algorithm!r}; "
                         f"known: {', '.join(ALGORITHMS)}")
    package = ".".join(_SCOPE[algorithm])
    node = resources.files(package)
    if isinstance(node, Path):
        _refuse_foreign(foreign_bytecode(node), node)
    _refuse_foreign(_loaded_foreign(package), Path("."))
    return {"algorithm": algorithm, **digest_lines(_installed(node))}


# --- bytecode that is not the sources' ----------------------------------------------------

_MAX_PYC_BYTES = 16 << 20


def _pyc_problem(pyc: Path, source: Path) -> str | None:
    """Why ``pyc`` is not exactly what ``source`` compiles to (None when it is)."""
    try:
        data = read_regular_file(pyc, "bytecode", _MAX_PYC_BYTES, follow_link=False)
        code = read_regular_file(source, "source file", MAX_FILE_BYTES, follow_link=False)
    except UsageError as err:
        return err.detail
    if data[:4] != importlib.util.MAGIC_NUMBER or len(data) < 16:
        return "not this interpreter's bytecode"
    if not _import_would_load(data, source, code):
        return None  # stale: the import system recompiles the source and never runs it
    try:
        # what the import system would unmarshal anyway when it loads this module
        loaded = marshal.loads(data[16:])  # noqa: S302
        compiled = compile(code, str(source), "exec", dont_inherit=True,
                           optimize=_optimization(pyc.name))
    except (ValueError, EOFError, TypeError, SyntaxError) as err:
        return f"unreadable ({err.__class__.__name__})"
    return None if loaded == compiled else "not the code its source compiles to"


def _import_would_load(data: bytes, source: Path, code: bytes) -> bool:
    """Whether CPython's import would run this cached code for ``source`` instead of
    recompiling it: a timestamp pyc whose recorded mtime and size are the source's, a
    checked hash pyc whose hash is the source's, or an unchecked hash pyc (never validated)."""
    flags = int.from_bytes(data[4:8], "little")
    if flags & 0b1:  # hash-based
        if not flags & 0b10:
            return True
        return data[8:16] == importlib.util.source_hash(code)
    try:
        info = source.stat()
    except OSError:
        return True  # no source to compare with: judged by the code comparison
    return (int.from_bytes(data[8:12], "little") == int(info.st_mtime) & 0xFFFFFFFF
            and int.from_bytes(data[12:16], "little") == info.st_size & 0xFFFFFFFF)


def _optimization(name: str) -> int:
    parts = name.split(".")
    opt = next((p for p in parts if p.startswith("opt-")), None)
    return int(opt[4:]) if opt and opt[4:].isdigit() else 0


def foreign_bytecode(top: Path) -> list[str]:
    """Relative paths of the bytecode under ``top`` that this verifier did not (or could
    not) have written from the sources beside it: any ``.pyc`` outside a ``__pycache__``,
    in a ``__pycache__`` without its ``.py``, of another cache tag, a link or special file
    in a ``__pycache__``, or code other than ``compile()`` of its source."""
    found: list[str] = []
    tag = sys.implementation.cache_tag
    pending = [(top, "")]
    while pending:
        folder, prefix = pending.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
        except OSError:
            continue
        cache = folder.name == "__pycache__"
        for entry in entries:
            rel = f"{prefix}{entry.name}"
            mode = entry.stat(follow_symlinks=False).st_mode
            if stat.S_ISDIR(mode):
                pending.append((Path(entry.path), rel + "/"))
                continue
            if not cache:
                if entry.name.endswith((".pyc", ".pyo")) or (
                        entry.name == "__pycache__" and not stat.S_ISDIR(mode)):
                    found.append(rel)
                continue
            stem, _, rest = entry.name.partition(".")
            source = folder.parent / f"{stem}.py"
            if (not stat.S_ISREG(mode) or not rest.startswith(f"{tag}.")
                    or not rest.endswith("pyc")
                    or _pyc_problem(Path(entry.path), source) is not None):
                found.append(rel)
    return sorted(found)


def _loaded_foreign(package: str) -> list[str]:
    """Loaded modules of ``package`` whose bytecode file (``__cached__``, wherever the
    pycache prefix put it) exists and is not exactly their source compiled."""
    found = []
    for name, module in list(sys.modules.items()):
        if name != package and not name.startswith(package + "."):
            continue
        cached, origin = getattr(module, "__cached__", None), getattr(module, "__file__", None)
        if not cached or not origin or not os.path.lexists(cached):
            continue
        if _pyc_problem(Path(cached), Path(origin)) is not None:
            found.append(str(cached))
    return sorted(found)


def _refuse_foreign(found: list[str], top: Path) -> None:
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise HarnessDriftError(f"bytecode {top / found[0]}{more}",
                                "only what its source compiles to", "other code",
                                said_by="the trusted-core digest")


def _checkout_files(top: Path) -> Iterator[tuple[str, bytes]]:
    """Regular files under ``top`` (iterative walk; links and special files refused)."""
    pending = [(top, "")]
    seen = 0
    while pending:
        folder, prefix = pending.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
        except OSError as err:
            raise UsageError(f"cannot list {folder}: {err.strerror or err}") from None
        for entry in entries:
            if _skipped(entry.name):
                continue
            rel = f"{prefix}{entry.name}"
            mode = entry.stat(follow_symlinks=False).st_mode
            if stat.S_ISDIR(mode):
                pending.append((Path(entry.path), rel + "/"))
            elif not _counted(entry.name):
                continue
            elif not stat.S_ISREG(mode):
                raise UsageError(f"{rel!r} in {top} is not a regular file")
            else:
                seen += 1
                if seen > MAX_FILES:
                    raise UsageError(f"{top} holds more than {MAX_FILES} source files")
                yield rel, read_regular_file(Path(entry.path), "source file", MAX_FILE_BYTES,
                                             follow_link=False)


def checkout_digest(root: Path, algorithm: str = CORE_TREE) -> dict[str, Any]:
    """The digest of the ``harness`` package in checkout ``root`` under ``algorithm``."""
    if algorithm not in _SCOPE:
        raise UsageError(f"unknown harness digest algorithm {algorithm!r}; "
                         f"known: {', '.join(ALGORITHMS)}")
    top = Path(root).joinpath(*_SCOPE[algorithm])
    if not top.is_dir() or top.is_symlink():
        raise UsageError(f"{root} holds no {'/'.join(_SCOPE[algorithm])}/ folder "
                         "(give the root of a topp-gate checkout)")
    _refuse_foreign(foreign_bytecode(top), top)
    return {"algorithm": algorithm, **digest_lines(_checkout_files(top))}


def describe_source(source: dict[str, Any] | None) -> str:
    """One line for the commit a receipt records (receipts before provenance have none)."""
    if source is None:
        return ("no commit recorded (an older receipt: VERIFYING.md lists the commit whose "
                "harness digest it records)")
    if source.get("commit") is None:
        return "no commit recorded (the harness did not run from a git checkout)"
    clean = {True: "clean tree", False: "tree with uncommitted changes",
             None: "cleanliness not recorded"}[source.get("clean")]
    how = "" if source.get("how") == "git" else f", as claimed by {source.get('how')}"
    return f"commit {source['commit']} ({clean}{how})"
