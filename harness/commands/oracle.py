"""``topp-gate oracle FILE --p P [--vocab V] [--json]``: the binary64 reference on raw logits."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..core.errors import EXIT_AMBIGUOUS, EXIT_OK, UsageError
from ..core.f32 import hexf, rows, runtime_p
from ..core.oracle import SCAN, Ambiguous, numpy_available, reference


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "oracle",
        help="binary64 top-p reference for raw little-endian float32 logits",
        description="Run the independent binary64 oracle on FILE (raw little-endian float32 "
        "logits: one row, or rows of --vocab values). P is a decimal converted to float32 "
        "first, as the kernel does. Exit 0 when every row is certified, 3 when any boundary "
        "is ambiguous, 2 on bad input.",
    )
    parser.add_argument("file", type=Path, metavar="FILE")
    parser.add_argument("--p", required=True, metavar="P", help="top-p, e.g. 0.9")
    parser.add_argument("--vocab", type=int, metavar="V", help="row length (default: one row)")
    parser.add_argument("--json", action="store_true",
                        help='one JSON object per row: {"row": i, "count": n, "kept": [...]}')
    parser.add_argument("--fast", action="store_true",
                        help="numpy fast path for sort and scan (bit-identical by test)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    try:
        data = args.file.read_bytes()
    except OSError as err:
        raise UsageError(f"cannot read {args.file}: {err.strerror or err}") from None
    p32 = runtime_p(args.p)
    if args.fast and not numpy_available():
        raise UsageError("--fast needs numpy (pip install 'topp-gate[gpu]' or numpy)")
    # Every row is judged (and any bad row refused, exit 2) before anything is printed:
    # the output is all rows or nothing.
    outcomes = [(len(row), reference(row, p32, row=i, fast=args.fast))
                for i, row in enumerate(rows(data, args.vocab))]
    ambiguous = False
    lines = []
    for i, (vocab, outcome) in enumerate(outcomes):
        if isinstance(outcome, Ambiguous):
            ambiguous = True
            record: dict[str, object] = {"row": i, "status": outcome.status}
            text = f"row {i}: {outcome.status} (scan count {outcome.scan_count})"
        else:
            record = {"row": i, "count": outcome.count, "kept": list(outcome.kept)}
            text = (f"row {i}: keep {outcome.count} of {vocab} tokens "
                    f"(p float32 {hexf(p32)}, {SCAN} scan, fsum-certified)")
        lines.append(json.dumps(record, separators=(",", ":")) if args.json else text)
    for line in lines:
        print(line)
    sys.stdout.flush()
    return EXIT_AMBIGUOUS if ambiguous else EXIT_OK
