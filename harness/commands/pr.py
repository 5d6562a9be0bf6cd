"""``topp-gate pr``: gate a pull request against its base in one command.

Pins both sides, freezes the newest PR matrix of the family and backend, runs (reusing a
verified base side of the same matrix and base pin when one is kept), verifies the bundle
offline and prints the answer. Exit codes as ``run``: 0 PASS, 1 STOP (both verified), 2
refused before anything ran or the base could not run (its failure, never a verdict on the
change), 4 the bundle it wrote did not verify.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import Any

from ..core.errors import EXIT_OK, EXIT_STOP, EXIT_USAGE, UsageError
from ..core.terminal import printable
from . import flags


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "pr",
        help="gate a change against its base: pin, freeze, run, verify, answer",
        description="Gate a pull request against its base in one command. BASE is a "
        "release (vllm==X.Y.Z), a pin file, a wheel or a source tree (what 'sources pin' "
        "takes, or a pin file); the change is --patch DIFF (a unified diff of one file of "
        "the base's pinned set, the kernel file or another such as a FlashInfer CUDA "
        "header, applied exactly on the base) or --change SPEC (another release, pin file, "
        "wheel or tree: an upgrade is a change too). Both pins, the frozen manifest "
        "(the newest PR matrix of the family and backend), the signed bundle and its "
        "verification land in --out. A base side verified by an earlier 'pr' of the same "
        "frozen cases and base pin is reused (checked again) instead of run; otherwise the "
        "two kernel children run at once. Prints the verdict, the rows the change broke "
        "(case[row], reasons, dispatch path, the oracle's, base's and change's kept counts), "
        "how many rows' outputs differ from the base's, the base's defects the change "
        "altered, the report and the bundle. Exit 0 PASS, 1 STOP, 2 refused before anything "
        "ran or the base could not run (no verdict on the change), 4 the bundle did not "
        "verify.")
    parser.add_argument("base", metavar="BASE",
                        help="the base: vllm==X.Y.Z, a pin file (.json), a wheel or a tree")
    change = parser.add_mutually_exclusive_group(required=True)
    change.add_argument("--patch", type=Path, metavar="DIFF", default=None,
                        help="the change as a unified diff of one pinned file of BASE "
                        "(the kernel file, or another such as a FlashInfer CUDA header)")
    change.add_argument("--change", metavar="SPEC", default=None,
                        help="the change as another release, pin file, wheel or tree")
    parser.add_argument("--backend", choices=("auto", "cuda", "interpreter"), default="auto",
                        help="auto (default): cuda when torch sees a CUDA device, else "
                        "Triton's interpreter on the CPU. FlashInfer (family flashinfer, "
                        "matrix pr-flashinfer-v3) runs on CUDA only: on the CPU it is "
                        "refused")
    parser.add_argument("--matrix", default=None, metavar="NAME|FILE",
                        help="another matrix than the newest PR matrix of the family and "
                        "backend (a "
                        "predeclared name or your own matrix file)")
    flags.signing_key(parser)
    flags.run_folder(parser)
    flags.exported_sources(parser)
    flags.cache(parser)
    parser.add_argument("--base-cache", type=Path, default=None, metavar="DIR",
                        help="where verified base sides are kept for reuse (default: "
                        "pr-base under the cache)")
    parser.add_argument("--no-reuse", action="store_true",
                        help="run the base even when a verified base side is kept, and "
                        "keep none")
    parser.add_argument("--ephemeral-key", action="store_true",
                        help="sign with a key made for this run alone (CI on a pull request "
                        "from a fork, which gets no secrets): its public half is written to "
                        "OUT/ephemeral.pub and the evidence says the key was ephemeral; no "
                        "base side is reused or kept. Such a bundle proves that its verdict "
                        "follows from its captured bytes, not who ran it")
    flags.unsandboxed(parser)
    flags.workers(parser, "judging and verifying rows", default=0)
    parser.set_defaults(handler=run)


def terminated(signum: int, frame: object) -> None:
    print("topp-gate: terminated; stopping the kernel children and removing scratch",
          file=sys.stderr)
    raise SystemExit(128 + signum)


def _say(message: str) -> None:
    print(f"topp-gate pr: {message}", file=sys.stderr, flush=True)


def _rows(n: int) -> str:
    return f"{n} row" if n == 1 else f"{n} rows"


def render(answer: Any) -> list[str]:
    """The answer's lines (stdout): verdict, broken rows with kept counts, rows whose
    outputs changed, base defects touched, base, report and bundle. A base that did not run
    is the base's failure: no row is said to be broken by the change."""
    broken = answer.broken
    if answer.base_failed:
        lines = [f"BASE FAILED: the base could not run ({printable(answer.base_failed)}); "
                 "this is no verdict on the change: fix the base or its pin (a tree needs "
                 "what the kernel's import closure imports) and run again "
                 f"(matrix {printable(answer.matrix)}, rules {printable(answer.rules)})"]
        lines.append(f"bundle: {printable(answer.bundle)} (verified, signed by key "
                     f"{answer.keyid[:16]}...; it records the base's failure)")
        return lines
    head = (f"{answer.verdict}: the change broke {len(broken)} of {_rows(answer.rows)}"
            if answer.verdict != "PASS" else
            f"PASS: the change broke none of {_rows(answer.rows)}")
    lines = [f"{head} (matrix {printable(answer.matrix)}, rules {printable(answer.rules)})"]
    if broken:
        lines.append("rows the change broke (case[row]  reasons  dispatch path  kept counts):")
        lines += [f"  {printable(b.row)}  {printable(','.join(b.reasons))}  "
                  f"{printable(b.path or 'not proven')}  {b.kept}" for b in broken]
    lines.append(f"outputs: {answer.rows_changed} of {_rows(answer.rows)} differ from the "
                 f"base's; {answer.rows_changed_base_right} of them are rows the base got "
                 "right")
    if answer.run_stops:
        lines.append(f"run stops: {printable(', '.join(answer.run_stops))}")
    touched = answer.touched
    lines.append(f"base defects: {_rows(answer.base_defects)} the base already fails; the "
                 f"change altered {len(touched)} of them" + (":" if touched else ""))
    lines += [f"  {printable(t.row)}  base: {printable(','.join(t.base_faults))}; change: "
              f"{printable(','.join(t.change_faults) or 'no fault')}" for t in touched]
    if answer.base_reused_from is not None:
        lines.append("base: reused the verified base side of "
                     f"{printable(answer.base_reused_from)} (checked again; not run)")
    else:
        lines.append("base: ran" + ("; its verified side is kept for the next run of this "
                                    "matrix and base pin" if answer.base_kept else ""))
    return lines + closing_lines(answer)


def closing_lines(answer: Any) -> list[str]:
    """Where the answer came from: the frozen manifest, the report and the bundle."""
    lines = [f"manifest: {printable(answer.manifest)}"]
    if answer.report is not None:
        lines.append(f"report: {printable(answer.report)}")
    lines.append(f"bundle: {printable(answer.bundle)} (verified, signed by key "
                 f"{answer.keyid[:16]}...)")
    return lines


def key_and_sources(args: argparse.Namespace) -> tuple[Path, Path | None]:
    """The signing key (checked unless --ephemeral-key) and the exported trees, as the
    arguments and the environment name them."""
    from .run import DEFAULT_KEY, _require_key

    if args.ephemeral_key and args.key is not None:
        raise UsageError("--ephemeral-key makes its own key; give --key or --ephemeral-key, "
                         "not both")
    key = args.key or Path(os.environ.get("TOPP_GATE_KEY") or DEFAULT_KEY).expanduser()
    if not args.ephemeral_key:
        _require_key(key)
    sources = args.sources or (Path(os.environ["TOPP_GATE_SOURCES"])
                               if os.environ.get("TOPP_GATE_SOURCES") else None)
    return key, sources


def run(args: argparse.Namespace) -> int:
    from . import require_gpu_extra

    require_gpu_extra("pr")
    signal.signal(signal.SIGTERM, terminated)
    from ..pr.flow import PrOptions, default_out, gate_pr

    key, sources = key_and_sources(args)
    options = PrOptions(base=args.base, out=args.out or default_out(), key=key,
                        patch=args.patch, change=args.change, backend=args.backend,
                        matrix=args.matrix, sources=sources, cache=args.cache,
                        base_cache=args.base_cache, reuse=not args.no_reuse,
                        workers=args.workers, unsandboxed=args.unsandboxed,
                        ephemeral_key=args.ephemeral_key)
    answer = gate_pr(options, _say)
    for line in render(answer):
        print(line)
    sys.stdout.flush()
    if answer.base_failed:
        return EXIT_USAGE  # no verdict on the change: the base did not run
    return EXIT_OK if answer.verdict == "PASS" else EXIT_STOP
