"""A kept base side is reused only for a manifest that declares the same draws: its outputs
depend on them (issue 39), so ``base_key`` names them when the manifest declares any, and a
manifest that declares none keeps the key it had before."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

from harness.core.manifest import parse_manifest
from harness.pr.flow import base_key
from harness.probes.fixture import manifest_bytes

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "assets"))
import synthetic  # noqa: E402


def _key(sampling):
    manifest = copy.deepcopy(synthetic.MANIFEST_SAMPLING)
    if sampling is None:
        del manifest["sampling"]
    else:
        manifest["sampling"] = sampling
    return base_key(parse_manifest(manifest_bytes(manifest)), "interpreter", "k")


def test_the_base_key_names_the_declared_draws():
    declared = synthetic.MANIFEST_SAMPLING["sampling"]
    assert _key(declared)["sampling"] == declared
    assert _key(declared) != _key({**declared, "seed": 8}) != _key(None)
    assert "sampling" not in _key(None)
