#!/usr/bin/env python3
"""Build one FlashInfer mutant's JIT sampling module, running no case (issue 39).

    python3 scripts/fi_mutant_build.py ID|base [--catalogue topp-gate/mutants/flashinfer-v1]

On the GPU machine (nvcc, a CUDA device for the target architecture), with
``TOPP_GATE_CACHE`` holding FlashInfer 0.7.2.post1's pinned tree under ``trees/``. The
mutant's diff is made exactly as ``topp-gate mutate`` makes it (``mutant_diff`` on the
pinned header), its candidate tree is built as ``run --patch`` builds it (``patched_side``:
every file hashed), copied into the same stable private copy a kernel child uses
(``make_private_tree(stable=True)`` under ``$TOPP_GATE_CACHE/stable-trees``), imported the
way the family's child imports it (bare packages, the AOT checks, the guarded loader) and
``get_sampling_module()`` JIT-builds it with nvcc in the copy's own build folder. Prints one
line: ``ID ok BUILD_S s sha256 LIB`` or ``ID failed: ...`` with the tail of the build log.
The build folder is kept (the stable copy's ``.build``), so a later ``topp-gate mutate``
with the same ``TOPP_GATE_CACHE`` finds ninja's build up to date and runs only the cases.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.families import get as family_of  # noqa: E402
from harness.kernels.private_tree import make_private_tree  # noqa: E402
from harness.mutation.mutant_catalogue import CATALOGUES, FLASHINFER_V1_ID, mutation_path  # noqa: E402
from harness.mutation.mutate import mutant_diff  # noqa: E402
from harness.pins import sources  # noqa: E402
from harness.pins.pinfile import load_pin_file  # noqa: E402

PIN = ROOT / "evidence/pins/flashinfer-0.7.2.post1.json"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mutant", help="a catalogue entry's id, or 'base' (the pinned tree)")
    parser.add_argument("--catalogue", default=FLASHINFER_V1_ID)
    parser.add_argument("--prepare-only", action="store_true",
                        help="stop before the import (no GPU or nvcc needed): the diff, the "
                        "candidate tree and its stable copy")
    args = parser.parse_args()
    cache = sources.cache_root()
    side = load_pin_file(PIN).side("stock")
    tree = sources.resolve_tree(side, cache=cache)
    if args.mutant != "base":
        entry = {m.id: m for m in CATALOGUES[args.catalogue]}[args.mutant]
        path = mutation_path(args.catalogue, entry)
        pinned = (tree / path).read_bytes()
        diff = mutant_diff(pinned, pinned, entry, path)
        side, tree = sources.patched_side(side, tree, diff, cache=cache)
    family = family_of("flashinfer")
    copy = make_private_tree(args.mutant, side.files, tree, stable=True)
    started = time.monotonic()
    if args.prepare_only:
        print(f"{args.mutant} prepared: tree {side.digest[:16]} stable copy {copy.root.name}")
        copy.remove()
        return 0
    try:
        sys.path.insert(0, str(copy.tree))
        family.before_import(copy.tree, copy.build)
        module = family.import_kernel(copy.tree)
        module.get_sampling_module()
        from harness.families.flashinfer import jit_library

        lib = jit_library()
        print(f"{args.mutant} ok {time.monotonic() - started:.0f} s tree {side.digest[:16]} "
              f"library sha256 {lib['sha256'][:16]} built_by_this_child "
              f"{lib['built_by_this_child']}", flush=True)
        return 0
    except BaseException as err:  # noqa: BLE001 - one report line, then the build log
        print(f"{args.mutant} failed after {time.monotonic() - started:.0f} s: "
              f"{type(err).__name__}: {str(err)[:300]}", flush=True)
        traceback.print_exc(limit=3)
        for log in sorted(Path(copy.build).rglob("*.log")) if copy.build else []:
            print(f"--- {log.name}\n" + "\n".join(
                log.read_text("utf-8", "replace").splitlines()[-40:]))
        return 1
    finally:
        copy.remove()


if __name__ == "__main__":
    sys.exit(main())
