"""The small shared facts, each named once: sides, row kinds, dispatch paths, pin fields,
and how a side's kernel evidence proves the path it took.

Standard library only (trusted core; the kernel child imports it too).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# The two sides a gate compares, in the order every table, receipt and loop uses.
STOCK = "stock"
PATCHED = "patched"
SIDES = (STOCK, PATCHED)

# Case kinds (manifest) and row kinds (how the gate judges a row). A boundary case's rows
# are judged by the ordinary rules, so only two row kinds exist.
FORCED = "forced"
ORDINARY = "ordinary"
BOUNDARY = "boundary"
TRAFFIC = "traffic"  # version 3: realistic rows (row builders) with per-row k and p
ROW_KINDS = (FORCED, ORDINARY)

# The dispatch path a side must take (version 2 manifests name one per side; version 1
# always means split; version 3 may also name one per side per traffic case). These are the
# paths of the vllm-triton kernel family (``harness.families.vllm_triton`` proves
# each): the CUDA split top-p pipeline alone (``_apply_topp_split``, p only, batch <= 64);
# the one monolithic ``_topk_topp_kernel`` launch without top-k (p only: batch > 64, or
# releases before 0.30.0); the monolithic kernel with a top-k pointer and no split
# (``single-topk``); the monolithic kernel with top-k, then the split pipeline for the
# rows without top-k (``mixed``). Other families name their own paths; the proof is read
# by path name either way.
SPLIT = "split"
SINGLE = "single"
SINGLE_TOPK = "single-topk"
MIXED = "mixed"
DISPATCH_PATHS = (SPLIT, SINGLE, SINGLE_TOPK, MIXED)

# What a receipt records of each side's sources, and what must equal the manifest's pins:
# version 1 manifests pin a wheel; version 2 manifests pin a pin file (the receipt adds the
# tree digest of an unpatched side, or the patch of a patched one).
WHEEL_PIN_FIELDS = ("version", "wheel", "wheel_sha256", "kernel_sha256")
PIN_FILE_FIELDS = ("pin_sha256", "version", "kernel_sha256")
# What a version 2 manifest's side entry copies from its pin file (and must still agree).
PIN_FILE_COPIED_FIELDS = ("version", "kernel_sha256", "tree_sha256")


def proven_cases(evidence: Any, dispatch: str = SPLIT) -> dict[str, bool]:
    """Case id -> whether one side's kernel evidence proves ``dispatch`` (a path name, such
    as ``split``) for that case: its record holds ``{dispatch: {"proven": true}}``.

    Anything malformed (no evidence, no case list, a record that is not an object) proves
    nothing. The kernel child writes the proof (:mod:`harness.kernels.child`); the
    runner and the verifier read it here.
    """
    if not isinstance(evidence, dict) or not isinstance(evidence.get("cases"), list):
        return {}
    return {str(record.get("id")): bool((record.get(dispatch) or {}).get("proven"))
            for record in evidence["cases"] if isinstance(record, dict)}


def proven_by_case(evidence: Any, paths: Mapping[str, str]) -> dict[str, bool]:
    """Case id -> whether one side's kernel evidence proves that case's own path
    (``paths[case id]``, as :meth:`harness.core.manifest.Manifest.dispatch` names it per
    case). A case not in ``paths`` proves nothing."""
    by_path = {path: proven_cases(evidence, path) for path in set(paths.values())}
    return {case_id: by_path[path].get(case_id, False) for case_id, path in paths.items()}


def recorded_cases(evidence: Any) -> list[str]:
    """The case ids one side's kernel evidence holds a record of (malformed: none)."""
    return list(proven_cases(evidence, SPLIT))
