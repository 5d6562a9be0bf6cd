"""Where the running harness came from: the git commit of its checkout and whether the
tree was clean, recorded in every new receipt beside the trusted-core digest.

The commit is read with ``git`` from the checkout that holds the imported ``harness``
package, unless the caller names it in ``TOPP_GATE_SOURCE_COMMIT`` (and
``TOPP_GATE_SOURCE_CLEAN=1|0|true|false``), as the device scripts do for a working tree
shipped to a GPU machine (whose copy may hold a stale ``.git``); the receipt then says
``"how": "environment"``: a claim of the signer, like everything else it signs. An
installed wheel records ``"how": "unknown"``. The core digest is what binds the code; the
commit says where to find it (``topp-gate harness-digest DIR`` recomputes it).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import harness

from ..pins import safegit

COMMIT_ENV = "TOPP_GATE_SOURCE_COMMIT"
CLEAN_ENV = "TOPP_GATE_SOURCE_CLEAN"
_COMMIT = re.compile(r"[0-9a-f]{40}")


def source_revision(root: Path | None = None) -> dict[str, Any]:
    """``{"commit": hex|None, "clean": bool|None, "how": "git"|"environment"|"unknown"}``."""
    claimed = os.environ.get(COMMIT_ENV, "").strip()
    if _COMMIT.fullmatch(claimed):
        # an explicit claim wins: a copied working tree can hold a stale .git of another
        # commit (seen on the GPU machine, 2026-12-01: every receipt named the session's
        # first commit, dirty), and the claim is labelled as one
        clean = _CLEAN.get(os.environ.get(CLEAN_ENV, "").strip().lower())
        return {"commit": claimed, "clean": clean, "how": "environment"}
    checkout = Path(root) if root is not None else Path(harness.__file__).resolve().parent.parent
    head = safegit.head_commit(checkout)  # git runs nothing from the tree (safegit.py)
    if head is not None and _COMMIT.fullmatch(head):
        return {"commit": head, "clean": safegit.is_clean(checkout, head), "how": "git"}
    return {"commit": None, "clean": None, "how": "unknown"}


_CLEAN = {"1": True, "true": True, "0": False, "false": False}
