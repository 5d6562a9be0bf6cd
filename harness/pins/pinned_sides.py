"""Both sides of a version 2 manifest: pin files checked against the manifest, trees, patch.

Kernel side. Each side's pin file must be the bytes the manifest froze (its sha256), and
must agree with the version, kernel and tree digests the manifest copied from it. A side
whose manifest entry freezes a patch needs the patch file (``run --patch``): a diff of one
file of the side's pinned set; its sha256, the kernel's sha256 after it and (where frozen)
the changed file's path and sha256 and the candidate tree's digest must be the frozen ones
(:func:`check_frozen_patch`). Any difference is ``evidence_drift``
and nothing runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from .. import families
from ..core.digest import sha256_hex
from ..core.errors import EvidenceDriftError, SourcesError, UsageError
from ..core.manifest import Manifest
from ..core.names import PIN_FILE_COPIED_FIELDS, SIDES
from ..core.safeio import read_regular_file
from ..core.terminal import printable
from .pinfile import WHEEL, load_pin_file
from .sources import MAX_PATCH_BYTES, Side, fetch_wheel, patched_side, resolve_tree, verified_wheel


def _agree(name: str, key: str, want: str, have: str) -> None:
    if want != have:
        raise EvidenceDriftError(f"{name} {key} (manifest vs pin file)", want, have)


def pinned_side(manifest: Manifest, name: str) -> Side:
    """The side ``name`` from its pin file, after checking it against the manifest."""
    entry = manifest.sources["sides"][name]
    pin = load_pin_file(manifest.pin_path(name), expected_sha256=str(entry["pin_sha256"]))
    for key in PIN_FILE_COPIED_FIELDS:
        _agree(name, key, str(entry[key]), str(pin.data[key]))
    # the lead's manifest schema lets a side carry its pin file's family (absent: default)
    _agree(name, "family", families.of_side(entry), pin.family)
    return pin.side(name)


def check_frozen_patch(name: str, side: Side, frozen: Mapping[str, str]) -> None:
    """The side after its patch is what the manifest froze: the kernel file's sha256, and,
    where the manifest records them (``manifest new`` since issue 39), the file the diff
    changed, that file's sha256 and the candidate tree's digest. A manifest that records no
    ``path`` froze a diff of the kernel file (the only kind it could freeze)."""
    path = str(frozen.get("path", side.kernel_path))
    if side.patch_path != path:
        raise EvidenceDriftError(f"{name} file the patch changes (vs frozen manifest)", path,
                                 str(side.patch_path))
    pairs = [("kernel after the patch", frozen["kernel_sha256"], side.kernel_sha256)]
    if "file_sha256" in frozen:
        pairs.append((f"file {path} after the patch", frozen["file_sha256"],
                      side.files[path]))
    if "tree_sha256" in frozen:
        pairs.append(("tree after the patch", frozen["tree_sha256"], side.digest))
    for what, want, have in pairs:
        if want != have:
            raise EvidenceDriftError(f"{name} {what} (vs frozen manifest)", want, have)


def prepare_pinned_sides(manifest: Manifest, *, cache: Path, sources: Path | None,
                         patch: Path | None,
                         say: Callable[[str], None]) -> dict[str, tuple[Side, Path]]:
    """Verified trees for both sides of a version 2 manifest (fetching a missing wheel)."""
    patched_on = [name for name in SIDES if manifest.side_patch(name) is not None]
    if patch is None and patched_on:
        raise UsageError(f"manifest {manifest.name} freezes a patch on the {patched_on[0]} "
                         "side; pass it with --patch FILE")
    if patch is not None and not patched_on:
        raise UsageError(f"manifest {manifest.name} freezes no patch; --patch would gate "
                         "another change than the one it names")
    out: dict[str, tuple[Side, Path]] = {}
    for name in SIDES:
        side = pinned_side(manifest, name)
        if sources is None and not (cache / "trees" / side.digest).exists():
            if side.origin is None or side.origin.get("kind") != WHEEL:
                raise SourcesError(f"{name} sources (a source tree pin, vLLM "
                                   f"{printable(side.version)}) are not in the cache; pin the "
                                   "tree again on this machine or pass --sources DIR")
            if verified_wheel(side, cache) is None:
                say(f"fetching {side.wheel} (pinned sha256 {side.wheel_sha256[:12]}...)")
                fetch_wheel(side, cache)
        tree = resolve_tree(side, cache=cache, sources=sources)
        frozen = manifest.side_patch(name)
        if frozen is not None and patch is not None:
            patch_bytes = read_regular_file(patch, "patch", MAX_PATCH_BYTES)
            if sha256_hex(patch_bytes) != frozen["sha256"]:
                raise EvidenceDriftError(f"patch file {patch.name} (vs frozen manifest)",
                                         frozen["sha256"], sha256_hex(patch_bytes))
            side, tree = patched_side(side, tree, patch_bytes, cache=cache)
            check_frozen_patch(name, side, frozen)
        out[name] = (side, tree)
    return out
