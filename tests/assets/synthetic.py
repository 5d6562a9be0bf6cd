"""SYNTHETIC TEST FIXTURES -- never evidence.

The test suite's manifest and test-only keys; the bundle content comes from the one
builder the probes use too (:mod:`harness.probes.fixture`: captured cases whose "kernel
outputs" are the oracle's kept set applied to the inputs; no kernel ever ran), written by
the real bundle writer. Every bundle made here carries ``"synthetic": true`` in its
kernel-path evidence and environment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.capture.bundle_writer import BundleContent, WrittenBundle, write_bundle
from harness.capture.signing import load_private_key
from harness.probes import fixture

ASSETS = Path(__file__).resolve().parent
SIGNING_KEY = ASSETS / "keys" / "test-only-signing.key"
SIGNING_PUB = ASSETS / "keys" / "test-only-signing.pub"
OTHER_KEY = ASSETS / "keys" / "test-only-other.key"
OTHER_PUB = ASSETS / "keys" / "test-only-other.pub"

MANIFEST: dict[str, Any] = {
    "schema": "topp-gate/manifest/v1",
    "name": "synthetic-test-fixture",
    "description": "SYNTHETIC TEST FIXTURE: tiny matrix for bundle and verifier tests; "
                   "outputs are the oracle's kept set, never a kernel's.",
    "sources": {
        "sides": {
            "stock": {"version": "0.30.0",
                      "wheel": "vllm-0.30.0-cp38-abi3-manylinux_2_28_x86_64.whl",
                      "wheel_sha256": ("ef52ee58c410ead0b8afb190838fa4cb"
                                  "cb52075596f67862a03859d984966ac4"),
                      "kernel_sha256": ("0b5fc337058e22bc28a8530ccec904d6"
                                  "ccd89b9548b02955c657ac429b1669d2")},
            "patched": {"version": "0.33.0",
                        "wheel": "vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl",
                        "wheel_sha256": ("4b6bdec4ab269990bf70d45a3c1e94c3"
                                  "760a27064513760193b26d6f0da883aa"),
                        "kernel_sha256": ("6264a524884274824b65c3a3a91d4d34"
                                  "418561cde566c31879cb394acd85f2ef")},
        },
        "patch_sha256": "a578020428c5456e9d140cde3b141049d00789b941b004b3940e1af209d70736",
    },
    "backend": {"required": "interpreter", "split_path_required": True,
                "interpreter_sm_count": 132},
    "limits": {"max_vocab": 4096, "max_batch": 64, "child_timeout_s": 60,
               "run_timeout_s": 600, "max_bundle_bytes": 4_000_000},
    "cases": [
        {"id": "forced-v64", "kind": "forced", "vocab": 64, "background_seed": 0,
         "grid": {"value": ["1e30"], "p": ["0.5", "0.9"], "forced_id": [0, 17]}},
        {"id": "ordinary-s1-b3-v100", "kind": "ordinary", "seed": 1, "batch": 3, "vocab": 100},
    ],
}


def manifest_bytes() -> bytes:
    return fixture.manifest_bytes(MANIFEST)


def content(seed: int = 0, *, damage: bool = False,
            stock_failure: str | None = None) -> BundleContent:
    """The synthetic BundleContent of :data:`MANIFEST` (read when called, so a test may
    swap it): patched keeps the oracle set, stock fails forced rows. ``damage`` makes a
    STOP; ``stock_failure`` replaces the stock output of the ordinary case by a status."""
    return fixture.content(MANIFEST, seed=seed, damage=damage, stock_failure=stock_failure)


def rereport(bundle: BundleContent) -> BundleContent:
    """``bundle`` with its ``report.md`` made again from its own rows, verdict, evidence."""
    return fixture.with_report(bundle, MANIFEST)


def write(dest: Path, *, seed: int = 0, key: Path = SIGNING_KEY, **variant: Any) -> WrittenBundle:
    return write_bundle(dest, content(seed, **variant), load_private_key(key),
                        max_bytes=MANIFEST["limits"]["max_bundle_bytes"])


# A version 3 manifest (sides by pin file, the rule set by id): the same cases, judged by
# seed/v2 (the seed's rules plus kept-value integrity). The pin files are never read by the
# verifier: it binds the receipt to the digests copied here.
_PINNED = {"pin_sha256": "1" * 64, "tree_sha256": "2" * 64, "dispatch": "split",
           "family": "vllm-triton"}
MANIFEST_V3: dict[str, Any] = {
    **{k: v for k, v in MANIFEST.items() if k != "sources"},
    "schema": "topp-gate/manifest/v3",
    "name": "synthetic-test-fixture-v3",
    "rules": "seed/v2",
    "backend": {"required": "interpreter", "interpreter_sm_count": 132},
    "sources": {"sides": {
        side: {"pin": f"pins/vllm-{entry['version']}.json", "version": entry["version"],
               "kernel_sha256": entry["kernel_sha256"], **_PINNED}
        for side, entry in MANIFEST["sources"]["sides"].items()}},
}
SOURCES_V3 = {side: {**{key: entry[key] for key in ("pin_sha256", "version", "kernel_sha256",
                                                      "tree_sha256")},
                     "origin": {"kind": "synthetic"}}
              for side, entry in MANIFEST_V3["sources"]["sides"].items()}


def write_v3(dest: Path, *, key: Path = SIGNING_KEY, **variant: Any) -> WrittenBundle:
    """A bundle of :data:`MANIFEST_V3`; ``variant`` as :func:`harness.probes.fixture.content`
    takes it (``rewrite_values``, ``rules``, ``damage``...)."""
    bundle = fixture.content(MANIFEST_V3, sources=SOURCES_V3, **variant)
    return write_bundle(dest, bundle, load_private_key(key),
                        max_bytes=MANIFEST_V3["limits"]["max_bundle_bytes"])


# A version 3 manifest judged by serve/v1: bf16-rounded traffic rows with top-k only,
# top-k then top-p, top-p only, and a forced row at 1e9 under top-k.
MANIFEST_SERVE: dict[str, Any] = {
    **MANIFEST_V3,
    "name": "synthetic-test-fixture-serve",
    "rules": "serve/v1",
    "limits": {**MANIFEST["limits"], "max_batch": 128},
    "cases": [
        {"id": "traffic-bf16-v200", "kind": "traffic", "vocab": 200, "batch": 6, "seed": 3,
         "rows": {"round": "bf16"},
         "sampling": [{"k": 20}, {"k": 50, "p": "0.8"}, {"p": "0.9"}]},
        {"id": "traffic-forced-v128", "kind": "traffic", "vocab": 128, "batch": 2, "seed": 4,
         "rows": {"force": {"ids": [7]}}, "forced_id": 7,
         "sampling": [{"p": "0.5"}, {"k": 10, "p": "0.9"}]},
    ],
}


def write_serve(dest: Path, *, key: Path = SIGNING_KEY, **variant: Any) -> WrittenBundle:
    """A bundle of :data:`MANIFEST_SERVE` (judged by serve/v1)."""
    bundle = fixture.content(MANIFEST_SERVE, sources=SOURCES_V3, **variant)
    return write_bundle(dest, bundle, load_private_key(key),
                        max_bytes=MANIFEST_SERVE["limits"]["max_bundle_bytes"])


# A version 3 manifest of a sampler's pull request (FlashInfer-like sides, regression-support
# /v2) that declares its draws (``sampling``): the fixture records each kept token as drawn,
# every row's counts summing to 64, and the declared seed and offset in each case's proof.
# Top-k at most 20 on every row, so 64 draws can record every kept token.
MANIFEST_SAMPLING: dict[str, Any] = {
    **MANIFEST_V3,
    "name": "synthetic-test-fixture-sampling",
    "rules": "regression-support/v2",
    "limits": {**MANIFEST["limits"], "max_batch": 128},
    "sources": {"sides": {
        side: {**entry, "dispatch": "top-k-top-p-sampling", "family": "flashinfer"}
        for side, entry in MANIFEST_V3["sources"]["sides"].items()}},
    "sampling": {"draws_per_row": 64, "seed": 20261201, "offset": 0},
    "cases": [
        {"id": "sample-bf16-v200", "kind": "traffic", "vocab": 200, "batch": 6, "seed": 3,
         "rows": {"round": "bf16"},
         "sampling": [{"k": 20}, {"k": 5, "p": "0.8"}, {"k": 12, "p": "0.5"}]},
        {"id": "sample-v128", "kind": "traffic", "vocab": 128, "batch": 2, "seed": 4,
         "rows": {"round": "bf16"}, "sampling": [{"k": 3, "p": "0.5"}, {"k": 10, "p": "0.9"}]},
    ],
}
