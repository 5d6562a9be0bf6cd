"""The `self` a test passes to the flake's outputs when it evaluates them against nix/stub.

A flake's own `self` is a store copy of the files git tracks. The tests once passed
`{ outPath = ./.; }`, the checkout's directory as it is: any output whose text names
`${src}` (the cpu-tests and smoke checks' build commands) made Nix hash it, and in
read-write mode copy it into /nix/store, with .git, .venv and every cache in it: 3.1 GB per
run, a new copy whenever .venv changed (20 copies, 62 GB, had filled this project's disk).

Here `self` is the tracked files that `git archive` exports (what a `github:` reference
fetches, .gitattributes' export-ignore applied: about 7 MB), read from the working tree so
uncommitted edits count. Where there is no .git (part 1's copy of the tracked files, or an
exported tarball) the directory already is that, and is used as it is.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path


def exported_files(root: Path) -> list[str]:
    """Every file git tracks under ROOT that `git archive` keeps: neither it nor a folder
    above it is export-ignore (git archive leaves an ignored folder out whole, while
    check-attr on a file inside it does not see the folder's attribute)."""
    # bytes, not text=True: universal newlines would turn a \r in a name into \n (one
    # tracked fixture's name holds an escape sequence and a carriage return)
    tracked = [
        os.fsdecode(name) for name in subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z"], capture_output=True, check=True
        ).stdout.split(b"\0") if name
    ]
    paths = sorted({prefix for name in tracked for prefix in _prefixes(name)})
    attrs = [os.fsdecode(field) for field in subprocess.run(
        ["git", "-C", str(root), "check-attr", "--stdin", "-z", "export-ignore"],
        input=b"\0".join(os.fsencode(p) for p in paths), capture_output=True, check=True,
    ).stdout.split(b"\0")]
    # check-attr -z prints path, attribute, value triples
    ignored = {p for p, _attr, value in zip(attrs[0::3], attrs[1::3], attrs[2::3], strict=False)
               if value == "set"}
    return [name for name in tracked if ignored.isdisjoint(_prefixes(name))]


def _prefixes(name: str) -> list[str]:
    """NAME's folders, outermost first, then NAME itself: a/b/c -> a, a/b, a/b/c."""
    parts = name.split("/")
    return ["/".join(parts[:depth]) for depth in range(1, len(parts) + 1)]


def self_expr(root: Path, scratch: Path) -> str:
    """A Nix expression (evaluated with ROOT as the working directory) for the flake's `self`.

    SCRATCH: a folder for the list of kept paths (JSON, read by the expression)."""
    if not (root / ".git").exists():
        return "{ outPath = ./.; }"
    keep = {prefix: True for name in exported_files(root) for prefix in _prefixes(name)}
    listing = scratch / "flake-self-paths.json"
    listing.write_text(json.dumps(keep, sort_keys=True))
    # a Nix string: JSON's quoting, and "${" escaped so a folder name cannot interpolate
    quoted = json.dumps(str(listing)).replace("${", "\\${")
    return (
        f"(let keep = builtins.fromJSON (builtins.readFile {quoted}); "
        "skip = builtins.stringLength (toString ./.) + 1; in "
        '{ outPath = builtins.path { path = ./.; name = "source"; '
        "filter = p: _: builtins.hasAttr (builtins.substring skip 1000000 p) keep; }; })"
    )


@functools.cache
def cached_self_expr(root: Path) -> str:
    """self_expr(ROOT, ...) once per process, its list in a folder removed at exit."""
    scratch = Path(tempfile.mkdtemp(prefix="topp-gate-flake-self-"))
    atexit.register(shutil.rmtree, scratch, True)
    return self_expr(root, scratch)
