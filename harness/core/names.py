"""The small shared facts, each named once: sides, row kinds, dispatch paths, pin fields,
and how a side's kernel evidence proves the path it took.

Standard library only (trusted core; the kernel child imports it too).
"""

from __future__ import annotations

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
# always means split). These are the paths of the vllm-triton kernel family: the CUDA split
# top-p pipeline (``_apply_topp_split``) or the one-kernel path of releases before 0.30.0
# (``_topk_topp_kernel``). Other families name their own paths
# (``harness.capture.families``); the proof is read by path name either way.
SPLIT = "split"
SINGLE = "single"
DISPATCH_PATHS = (SPLIT, SINGLE)

# What a receipt records of each side's sources, and what must equal the manifest's pins:
# version 1 manifests pin a wheel; version 2 manifests pin a pin file (the receipt adds the
# tree digest of an unpatched side, or the patch of a patched one).
WHEEL_PIN_FIELDS = ("version", "wheel", "wheel_sha256", "kernel_sha256")
PIN_FILE_FIELDS = ("pin_sha256", "version", "kernel_sha256")
# What a version 2 manifest's side entry copies from its pin file (and must still agree).
PIN_FILE_COPIED_FIELDS = ("version", "kernel_sha256", "tree_sha256")


def proven_cases(evidence: Any, dispatch: str = SPLIT) -> dict[str, bool]:
    """Case id -> whether one side's kernel evidence proves ``dispatch`` (``split`` or
    ``single``) for that case: its record holds ``{dispatch: {"proven": true}}``.

    Anything malformed (no evidence, no case list, a record that is not an object) proves
    nothing. The kernel child writes the proof (:mod:`harness.capture.kernels.child`); the
    runner and the verifier read it here.
    """
    if not isinstance(evidence, dict) or not isinstance(evidence.get("cases"), list):
        return {}
    return {str(record.get("id")): bool((record.get(dispatch) or {}).get("proven"))
            for record in evidence["cases"] if isinstance(record, dict)}
