"""Both sides of a version 2 manifest: pin files checked against the manifest, trees, patch.

Kernel side. Each side's pin file must be the bytes the manifest froze (its sha256), and
must agree with the version, kernel and tree digests the manifest copied from it. A side
whose manifest entry freezes a patch needs the patch file (``run --patch``): its sha256 and
the patched kernel's sha256 must be the frozen ones. Any difference is ``evidence_drift``
and nothing runs.
"""

from __future__ import annotations

from collections.abc import Callable
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
            if side.kernel_sha256 != frozen["kernel_sha256"]:
                raise EvidenceDriftError(f"{name} kernel after the patch (vs frozen manifest)",
                                         frozen["kernel_sha256"], side.kernel_sha256)
        out[name] = (side, tree)
    return out
