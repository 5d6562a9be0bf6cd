"""``topp-gate replay``: replay a sampler bug that shipped upstream, from its frozen replay file.

The broken release against the oracle and the fixed release as an upgrade of it, on the
matrix that calls the kernel the way the bug needs, in one signed, verified bundle (what
``topp-gate pr BROKEN --change FIXED --matrix MATRIX`` writes). Exit 0 when the broken release
fails some row and the fix PASSes and repairs every one of them (REPRODUCED AND FIXED), 1
otherwise (NOT REPRODUCED, or REPRODUCED, FIX NOT PROVEN), 2 refused before anything ran or
the broken release could not run, 4 the bundle did not verify.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import Any

from ..core.errors import EXIT_OK, EXIT_STOP, EXIT_USAGE
from ..core.terminal import printable
from . import flags
from .pr import closing_lines, key_and_sources, terminated

SHOWN_ROWS = 20  # rows named on the terminal; the bundle's report names every one


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "replay",
        help="replay an upstream sampler bug: broken release vs oracle, fix as an upgrade",
        description="Replay a sampler bug that shipped upstream from its frozen replay file "
        "(evidence/replays/ID/replay.json: the thread, the broken and the fixed release by "
        "pin, a matrix per backend that calls the kernel the way the bug needs). Runs 'pr' "
        "with the broken release as the base and the fixed one as the change, on the "
        "replay's matrix for the backend; prints the rows the broken release fails against "
        "the oracle (with the fix's faults and the kept counts), whether a kernel wrote "
        "outside its logits view, and the gate's verdict on the fix. Exit 0 REPRODUCED AND "
        "FIXED, 1 NOT REPRODUCED or REPRODUCED, FIX NOT PROVEN, 2 refused before anything "
        "ran or the broken release could not run, 4 the bundle did not verify.")
    parser.add_argument("replay", type=Path, metavar="REPLAY",
                        help="a frozen replay file (replay.json beside replay.json.sha256)")
    parser.add_argument("--backend", choices=("auto", "cuda", "interpreter"), default="auto",
                        help="auto (default): cuda when torch sees a CUDA device, else "
                        "Triton's interpreter on the CPU (the replay must have a matrix "
                        "for it)")
    flags.signing_key(parser)
    parser.add_argument("--ephemeral-key", action="store_true",
                        help="sign with a key made for this run alone (its public half is "
                        "written to OUT/ephemeral.pub)")
    flags.run_folder(parser)
    flags.exported_sources(parser)
    flags.cache(parser)
    flags.unsandboxed(parser)
    flags.workers(parser, "judging and verifying rows", default=0)
    parser.set_defaults(handler=run)


def _say(message: str) -> None:
    print(f"topp-gate replay: {message}", file=sys.stderr, flush=True)


def _rows(n: int) -> str:
    return f"{n} row" if n == 1 else f"{n} rows"


def render(replay: Any, answer: Any, outcome: Any) -> list[str]:
    """The outcome's lines (stdout), every string from evidence escaped."""
    data = replay.data
    head = (f"{outcome.answer}: {printable(data['title'])} ({printable(data['thread'])}); "
            f"broken {printable(replay.broken.release)}, fixed {printable(replay.fixed.release)}")
    lines = [head]
    if answer.base_failed:
        lines.append(f"the broken release could not run ({printable(answer.base_failed)}): "
                     "no replay")
    failed = outcome.failed
    lines.append(f"broken release: fails {len(failed)} of {_rows(outcome.rows)} against the "
                 "binary64 oracle" + (":" if failed else ""))
    for row in failed[:SHOWN_ROWS]:
        oracle, broken, fixed = (str(n) if n is not None else "?" for n in row.kept)
        lines.append(f"  {printable(row.row)}  {printable(','.join(row.broken))}  kept: oracle "
                     f"{oracle}, broken {broken}, fixed {fixed}; fixed: "
                     f"{printable(','.join(row.fixed) or 'no fault')}")
    if len(failed) > SHOWN_ROWS:
        lines.append(f"  ... and {len(failed) - SHOWN_ROWS} more (report.md names every row)")
    for side, role in (("stock", "broken"), ("patched", "fixed")):
        cases = outcome.wrote_outside_view.get(side, ())
        if cases:
            lines.append(f"{role} release wrote outside its logits view (the buffer's padding "
                         f"changed) in {len(cases)} case(s): "
                         f"{printable(', '.join(cases))}")
    if outcome.run_stops:
        lines.append(f"run stops: {printable(', '.join(outcome.run_stops))}")
    lines.append(f"fixed release: {printable(outcome.upgrade_said())}")
    return lines + closing_lines(answer)


def run(args: argparse.Namespace) -> int:
    from . import require_gpu_extra

    require_gpu_extra("replay")
    signal.signal(signal.SIGTERM, terminated)
    from ..pr.flow import default_out
    from ..replay.outcome import REPRODUCED_AND_FIXED
    from ..replay.run import ReplayOptions, gate_replay
    from ..replay.spec import load_replay

    replay = load_replay(args.replay)  # refused before a key or a folder is touched
    key, sources = key_and_sources(args)
    answer, outcome = gate_replay(replay, ReplayOptions(
        out=args.out or default_out(), key=key, backend=args.backend, sources=sources,
        cache=args.cache, workers=args.workers, unsandboxed=args.unsandboxed,
        ephemeral_key=args.ephemeral_key), _say)
    for line in render(replay, answer, outcome):
        print(line)
    sys.stdout.flush()
    if answer.base_failed:
        return EXIT_USAGE
    return EXIT_OK if outcome.answer == REPRODUCED_AND_FIXED else EXIT_STOP
