"""Captured inputs taken from an earlier bundle of the same cases instead of built again.

Every run of a mutation run (``topp-gate mutate``) freezes the same cases, so each built
the same captured inputs: on ``pr-cuda-v4`` (903 rows, 36.9 million values) that took a
minute of every run's 300 s budget on the H200, and with several runs at once the input
builders crowded out the kernel children the budget is for. A mutant's run now takes them
from the base run's bundle (``--inputs-from``), made moments before by the same parent:

* the bundle is opened with the run's public key (:func:`harness.core.verify.open_bundle`:
  signature, schema, file set), so only what that key signed is read;
* its frozen manifest's cases must equal this run's, value for value, but for each case's
  dispatch ``paths`` (a mutant of the dispatch may take another path per case; the inputs
  do not depend on it), and its declared ``sampling`` this run's (``cases.json`` carries
  it to the kernel child), else the run refuses in one line;
* ``cases.json`` and every ``inputs/`` file are read through the signed statement: stored
  and raw size and sha256 checked before a byte is written here.

What is judged is unchanged: the new bundle binds these inputs as it binds built ones, the
kept base side is still checked against them (``input_mismatch`` otherwise), and
``verify --regenerate`` rebuilds them from the manifest. A run without ``--inputs-from``
builds them (``write_cases``) as before.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..core.bundle import check_path
from ..core.errors import UsageError
from ..core.manifest import Manifest
from ..core.terminal import printable


def copy_inputs(bundle: Path, public_key: Any, manifest: Manifest, work: Path) -> int:
    """Write ``cases.json`` and ``inputs/*`` of ``bundle`` under ``work``; return how many
    files. Refused (:class:`UsageError`) when the bundle's cases are not ``manifest``'s."""
    from ..core.verify import open_bundle

    view = open_bundle(bundle, public_key)
    frozen = json.loads(view.raw("manifest.json"))
    if _inputs_of(frozen.get("cases")) != _inputs_of(manifest.data["cases"]) \
            or frozen.get("sampling") != manifest.data.get("sampling"):
        raise UsageError(f"--inputs-from {printable(str(bundle))}: its cases are not this "
                         "manifest's; its captured inputs belong to another matrix")
    names = [str(s["name"]) for s in view.statement["subject"]]
    wanted = [n for n in names if n == "cases.json" or n.startswith("inputs/")]
    if "cases.json" not in wanted:
        raise UsageError(f"--inputs-from {printable(str(bundle))}: no cases.json")
    (work / "inputs").mkdir(parents=True)
    for name in wanted:
        target = work / check_path(name)
        target.write_bytes(view.raw(name))
    return len(wanted)


def _inputs_of(cases: Any) -> Any:
    """The cases as the captured inputs depend on them: each without its ``paths``."""
    if not isinstance(cases, list):
        return cases
    return [{k: v for k, v in c.items() if k != "paths"} if isinstance(c, dict) else c
            for c in cases]
