"""``verify --regenerate``: rebuild every captured input from the bundle's manifest (CPU
torch generator, as ``run`` builds them) and require the very bytes the receipt binds.

The verifier's core checks, without torch, every value a manifest fixes explicitly
(:mod:`harness.core.input_bindings`); what a generator made (ordinary rows, random
backgrounds, permutations) only a rebuild can check. This is an auditor's strongest check
that the rows judged are the rows the manifest describes. Needs the gpu extra (torch).
"""

from __future__ import annotations

from ..core.digest import sha256_hex
from ..core.errors import BindingMismatchError
from ..core.manifest import SCHEMA_V3, parse_manifest
from ..core.verify import UnsafeBundleView
from .cases import build_case


def regenerate_inputs(view: UnsafeBundleView) -> int:
    """Rebuild each case's logits and p from the view's manifest, one case at a time, and
    compare their sha256 with the bound digests. Returns the number of files compared."""
    manifest = parse_manifest(view.raw("manifest.json"), source="bundle manifest")
    compared = 0
    has_k = manifest.data["schema"] == SCHEMA_V3
    for spec in manifest.cases:
        built = build_case(spec, has_k=has_k)
        for name, data in built.files().items():
            found = sha256_hex(data)
            if found != view.digest(name):
                raise BindingMismatchError(f"{name} rebuilt from the manifest",
                                           view.digest(name), found)
            compared += 1
        del built
    return compared
