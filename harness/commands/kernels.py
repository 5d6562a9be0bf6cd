"""``topp-gate kernels``: run stock and patched on one captured batch of your own bytes.

No manifest and no gate: the pinned kernels (one child process per side) on raw
little-endian float32 logits, writing each side's output bytes and kernel-path evidence.
Use ``topp-gate run`` for a judged, signed result.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import Any

from ..core.errors import EXIT_OK, EXIT_STOP, UsageError
from ..core.safeio import read_regular_file
from ..core.terminal import printable
from . import flags

CASE_ID = "batch"

# one batch of at most 64 rows of at most 262144 float32 values
MAX_INPUT_BYTES = 64 * 262144 * 4


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "kernels",
        help="run stock and patched kernels on one captured batch (outputs + evidence)",
        description="Run the pinned stock and patched vLLM split top-p kernels, one child "
        "process each, on one batch of raw little-endian float32 logits, and write "
        "OUT/<side>/batch.out.f32 plus OUT/<side>/evidence.json. Exit 0 when both sides "
        "ran, 1 when a side crashed, hung or could not prove the split path, 2 on bad input.",
    )
    parser.add_argument("--logits", type=Path, required=True, metavar="FILE",
                        help="batch x vocab little-endian float32 values, row-major")
    parser.add_argument("--vocab", type=int, required=True, metavar="V")
    parser.add_argument("--p", required=True, metavar="P_OR_FILE",
                        help="a decimal p for every row (converted to float32), or a file of "
                        "batch little-endian float32 values")
    parser.add_argument("--backend", choices=("cuda", "interpreter"), required=True)
    parser.add_argument("--out", type=Path, required=True, help="folder to create")
    parser.add_argument("--num-sm", type=int, default=132,
                        help="simulated SM count for the interpreter (default 132, the H200's)")
    parser.add_argument("--timeout", type=float, default=600.0, help="per side, seconds")
    flags.sources(parser)
    flags.cache(parser)
    flags.unsandboxed(parser)
    parser.set_defaults(handler=run)


def _p_bytes(text: str, batch: int) -> bytes:
    from ..core.f32 import decode, encode, runtime_p

    path = Path(text)
    if path.is_file():
        data = read_regular_file(path, "p file", MAX_INPUT_BYTES)
        values = decode(data)
        if len(values) != batch:
            raise UsageError(f"{path}: {len(values)} p values for {batch} rows")
        for v in values:
            runtime_p(v)
        return data
    return encode([runtime_p(text)] * batch)


def run(args: argparse.Namespace) -> int:
    from . import require_gpu_extra

    require_gpu_extra("kernels")
    from ..core.cases_index import render_cases_index
    from ..core.f32 import rows
    from ..core.limits import MAX_BATCH
    from ..core.manifest import CaseLayout, RowLayout
    from ..core.names import ORDINARY, SIDES, SPLIT
    from ..kernels.runner import run_side
    from ..kernels.sandbox import unsandboxed
    from ..pins.sources import cache_root, load_pins, resolve_tree

    if args.out.exists():
        raise UsageError(f"{args.out} already exists; refusing to overwrite")
    logits = read_regular_file(args.logits, "logits file", MAX_INPUT_BYTES)
    batch = len(rows(logits, args.vocab))
    if batch > MAX_BATCH:
        raise UsageError(f"batch {batch} is over {MAX_BATCH}: the split path needs <= 64")
    p = _p_bytes(args.p, batch)
    pins = load_pins()
    cache = cache_root(args.cache)
    trees = {n: resolve_tree(pins.side(n), cache=cache, sources=args.sources) for n in SIDES}
    layout = CaseLayout(CASE_ID, ORDINARY, batch, args.vocab,
                        tuple(RowLayout(ORDINARY, None, f"row {i}") for i in range(batch)))
    work = args.out / "captured"
    (work / "inputs").mkdir(parents=True)
    (work / layout.logits_path).write_bytes(logits)
    (work / layout.p_path).write_bytes(p)
    (work / "cases.json").write_bytes(render_cases_index([layout]))
    failed = False
    for name in SIDES:
        result = run_side(pins.side(name), trees[name], args.backend, args.num_sm,
                          work / "cases.json", args.out / name, args.timeout,
                          isolation=unsandboxed("--unsandboxed") if args.unsandboxed else None)
        record: dict[str, Any] = next(iter((result.evidence or {}).get("cases", [])), {})
        kept = record.get("kept_counts")
        slices = record.get(SPLIT, {}).get("slices")
        print(f"{name}: {result.status} {printable(result.reason)} kept={kept} slices={slices} "
              f"-> {args.out / name}".replace("  ", " "))
        failed = failed or not result.ok
    shutil.copy(work / "cases.json", args.out / "cases.json")
    sys.stdout.flush()
    return EXIT_STOP if failed else EXIT_OK
