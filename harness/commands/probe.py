"""``topp-gate probe [--only NAME ...]``: run the seed's breakage probes against the real code.

One line per probe: group, name, the code its refusal must carry, the code observed, and
``ok`` (failed closed as declared), ``FAILED`` or ``skipped: needs ...``. Exit 0 only when
every probe run failed closed as declared; exit 1 when any did not or was skipped (a skipped
probe proves nothing); exit 2 on bad usage (an unknown probe name).
"""

from __future__ import annotations

import argparse

from ..core.errors import EXIT_OK, EXIT_STOP, UsageError
from . import flags

EXIT_PROBE_FAILED = EXIT_STOP  # 1: a probe did not fail closed


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "probe",
        help="run the breakage probes; each must fail closed",
        description="Break one thing at a time (unreadable state, boundary input, bounds, "
        "drift) and run the real oracle, judge, manifest loader, kernel runner, bundle "
        "writer, sources check and verifier on it; each must refuse with the declared "
        "code. Prints one line per probe. Exit 0 when every probe failed closed as "
        "declared, 1 when any did not (or was skipped), 2 on bad usage.",
    )
    parser.add_argument("--only", nargs="+", metavar="NAME",
                        help="run only these probes (names as printed)")
    flags.sources(parser, "exported source trees for the source-drift probe (default: the "
                  "cache); the Nix wrapper passes its Nix-built trees")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..probes import PROBES, Outcome, run_all

    chosen = list(PROBES)
    if args.only:
        known = {p.name for p in PROBES}
        unknown = [n for n in args.only if n not in known]
        if unknown:
            raise UsageError(f"unknown probe {unknown[0]!r}; known: {', '.join(sorted(known))}")
        chosen = [p for p in PROBES if p.name in args.only]
    width = max(len(p.name) for p in PROBES)

    def show(o: Outcome) -> None:
        status = o.detail if o.status == "skipped" else o.status
        line = (f"{o.probe.group:<10} {o.probe.name:<{width}}  expect {o.probe.expected}  "
                f"observed {o.observed}  {status}")
        if o.status == "FAILED" and o.detail:
            line += f" ({o.detail})"
        print(line, flush=True)

    outcomes = run_all(chosen, progress=show, sources=args.sources)
    failed = [o for o in outcomes if o.status == "FAILED"]
    skipped = [o for o in outcomes if o.status == "skipped"]
    ok = len(outcomes) - len(failed) - len(skipped)
    print(f"{ok} of {len(outcomes)} probes failed closed as declared; {len(failed)} did not; "
          f"{len(skipped)} skipped")
    return EXIT_PROBE_FAILED if failed or skipped else EXIT_OK
