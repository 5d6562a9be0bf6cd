"""``topp-gate oracle FILE [--p P] [--k K] [--vocab V] [--json] [--pure] [--exact]``: the
binary64 reference on raw logits (top-k then top-p by the predeclared convention of
``harness.core.oracle.top_k_top_p``), optionally beside the exact-real count."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast

from ..core.errors import (
    EXIT_AMBIGUOUS,
    EXIT_OK,
    InvalidKError,
    InvalidPError,
    UsageError,
)
from ..core.f32 import hexf, row_length, rows, runtime_top_p, to_float32
from ..core.oracle import SCAN, Ambiguous, OracleOutcome, numpy_available, top_k_top_p
from ..core.safeio import read_regular_file
from ..core.terminal import printable

MAX_LOGITS_BYTES = 1 << 30  # 256 Mi float32 values; a larger file is refused, not read


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "oracle",
        help="binary64 top-k/top-p reference for raw little-endian float32 logits",
        description="Run the independent binary64 oracle on FILE (raw little-endian float32 "
        "logits: one row, or rows of --vocab values; -inf is a masked token). P is a decimal "
        "converted to float32 first, as the kernel does. With --k, top-k keeps the first "
        "min(K, unmasked) tokens in canonical order and top-p runs on those alone; --k "
        "without --p (or P = 1) is top-k only; P must be in (0, 1] (P = 1 only with --k). "
        "Exit 0 when every row is certified, 3 when any boundary is ambiguous, 2 on bad "
        "input.",
    )
    parser.add_argument("file", type=Path, metavar="FILE")
    parser.add_argument("--p", metavar="P", help="top-p, e.g. 0.9 (needed unless --k)")
    parser.add_argument("--k", metavar="K", help="top-k, an integer >= 1 (applied first)")
    parser.add_argument("--vocab", type=int, metavar="V", help="row length (default: one row)")
    parser.add_argument("--json", action="store_true",
                        help='one JSON object per row: {"row": i, "count": n, "kept": [...]}')
    path = parser.add_mutually_exclusive_group()
    path.add_argument("--pure", action="store_true",
                      help="the pure-Python path even when numpy is installed (the default "
                      "uses numpy when it is importable; the two are bit-identical by test)")
    path.add_argument("--fast", action="store_true",
                      help="require the numpy path (exit 2 without numpy); it is the default "
                      "whenever numpy is importable")
    parser.add_argument("--exact", action="store_true",
                        help="also compute each row's exact-real nucleus count (needs the "
                        "exact extra); it never changes the exit code")
    parser.set_defaults(handler=run)


def _rows(data: bytes, vocab: int | None, use_numpy: bool) -> Iterator[Sequence[float]]:
    """Rows as Python float lists, or as numpy float64 arrays for the numpy path (no list
    round trip); the same refusals either way."""
    if not use_numpy:
        yield from rows(data, vocab)
        return
    import numpy as np

    length = row_length(len(data), vocab)
    values = np.frombuffer(data, dtype="<f4").astype(np.float64)
    for start in range(0, values.size, length):
        # numpy does not register ndarray as a Sequence; the core's numpy path takes a
        # float64 array where it takes Sequence[float] (len, indexing, iteration)
        yield cast("Sequence[float]", values[start : start + length])


def _parse_k(given: str | None) -> int | None:
    if given is None:
        return None
    try:
        k = int(given, 10)
    except ValueError:
        raise InvalidKError(given) from None
    if k < 1:
        raise InvalidKError(given)
    return k


def _parse_p(given: str | None, k: int | None) -> float | None:
    """float32 p, always in (0, 1]: below 1 it is top-p; exactly 1 (or absent) means top-k
    only (None) and needs --k. Anything above 1 is refused, with or without --k."""
    if given is None:
        if k is None:
            raise UsageError("oracle needs --p P, --k K, or both")
        return None
    p32 = runtime_top_p(given)
    if p32 is not None:
        return p32
    # float32 p >= 1: only exactly 1 means "no top-p", and only beside a top-k cut
    p = to_float32(float(given))
    if p > 1.0:
        raise InvalidPError(given, p, f"p={printable(given)} is above 1; it must be in (0, 1] "
                            "(1 means no top-p, only with --k)")
    if k is None:
        raise InvalidPError(given, p, f"p={printable(given)} keeps every token: give --k K "
                            "with it (top-k only), or a p in (0, 1)")
    return None


def run(args: argparse.Namespace) -> int:
    data = read_regular_file(args.file, "logits file", MAX_LOGITS_BYTES)
    k = _parse_k(args.k)
    p32 = _parse_p(args.p, k)
    if args.fast and not numpy_available():
        from . import gpu_extra_hint

        raise UsageError(f"--fast needs numpy: {gpu_extra_hint()}")
    if args.exact:
        from ..diagnostics.exact import require_exact

        require_exact()
    use_numpy = not args.pure and numpy_available()
    # Every row is judged (and any bad row refused, exit 2) before anything is printed:
    # the output is all rows or nothing.
    outcomes = [(row, top_k_top_p(row, p32=p32, k=k, row=i, fast=use_numpy))
                for i, row in enumerate(_rows(data, args.vocab, use_numpy))]
    ambiguous = False
    lines = []
    for i, (row, outcome) in enumerate(outcomes):
        vocab = len(row)
        if isinstance(outcome, Ambiguous):
            ambiguous = True
            record: dict[str, Any] = {"row": i, "status": outcome.status}
            text = f"row {i}: {outcome.status} (scan count {outcome.scan_count})"
            binary64, start = None, outcome.scan_count
        else:
            record = {"row": i, "count": outcome.count, "kept": list(outcome.kept)}
            text = f"row {i}: keep {outcome.count} of {vocab} tokens ({_how(outcome, p32)})"
            binary64, start = outcome.count, outcome.count
        if k is not None:
            record["k"] = k
        if args.exact:
            exact_record, exact_text = _exact(row, p32, k, i, binary64, start)
            record.update(exact_record)
            text += exact_text
        lines.append(json.dumps(record, separators=(",", ":")) if args.json else text)
    for line in lines:
        print(line)
    sys.stdout.flush()
    return EXIT_AMBIGUOUS if ambiguous else EXIT_OK


def _how(outcome: OracleOutcome, p32: float | None) -> str:
    """The text line's parenthesis: what was applied and how it was certified."""
    parts = []
    if outcome.k is not None:
        parts.append(f"top-k {outcome.k}" + ("" if outcome.top_k_applied else " (no cut)"))
    if p32 is None:
        parts.append("no top-p")
    else:
        parts.append(f"p float32 {hexf(p32)}, {SCAN} scan, fsum-certified")
    if outcome.masked:
        parts.append(f"{outcome.masked} masked")
    return "; ".join(parts)


def _exact(row: Sequence[float], p32: float | None, k: int | None, index: int,
           binary64: int | None, start: int) -> tuple[dict[str, Any], str]:
    """The exact-real fields of a row's JSON object and a sentence for its text line."""
    from ..diagnostics.exact import ExactCount, describe, exact_count, outcome_json

    values = row.tolist() if hasattr(row, "tolist") else list(row)
    outcome = exact_count(values, p32, k=k, start=start, row=index)
    if not isinstance(outcome, ExactCount):
        verdict = "binary64 count not checked"
    elif binary64 is None:
        verdict = "binary64 ambiguous"
    elif binary64 == outcome.count:
        verdict = "binary64 count equals it"
    else:
        verdict = f"binary64 count {binary64} DIFFERS"
    return outcome_json(outcome), f"; exact-real count {describe(outcome)}: {verdict}"
