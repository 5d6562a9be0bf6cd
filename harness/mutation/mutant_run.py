"""One run of a mutation run (``topp-gate mutate``), in a process of its own, with the base
side reused.

    python -m harness.mutation.mutant_run --manifest M --out BUNDLE --key K --base-store S
        [--patch DIFF] [--backend B] [--sources DIR] [--cache DIR] [--keep-base]
        [--inputs-from BASE_BUNDLE]

Every run of a mutation run has the same stock side: the manifest's pinned base on the same
frozen cases (only the patched side differs, by one mutant). So the run goes through
``topp-gate pr``'s phases (:func:`harness.pr.flow.run_bundle`): when the store ``S`` holds
a kept, verified base side for this manifest's key (:func:`harness.pr.flow.base_key`),
only the patched child runs and the bundle carries the kept side with
``environment.base_reused_from``, every check of ``pr``'s reuse made again; otherwise both
children run at once. ``--inputs-from`` (a mutant's run: the base run's bundle) takes the
captured inputs from that bundle, signature, cases and digests checked, instead of building
them again (:mod:`harness.capture.reused_inputs`). ``--keep-base`` (the unmutated base
run, made first) verifies the new bundle offline and, when it PASSes with its base side
run here, keeps that side in ``S`` (:func:`harness.pr.flow.keep_base`, signed with the
run's key).

Prints what ``run`` prints (progress on stderr; the verdict line and the bundle line on
stdout) and exits as ``run`` does: 0 PASS, 1 STOP, a HarnessError's code with one line.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ..core.errors import EXIT_OK, EXIT_STOP, HarnessError
from ..core.terminal import printable


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m harness.mutation.mutant_run")
    parser.add_argument("--manifest", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--key", type=Path, required=True)
    parser.add_argument("--base-store", type=Path, required=True)
    parser.add_argument("--patch", type=Path, default=None)
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--sources", type=Path, default=None)
    parser.add_argument("--cache", type=Path, default=None)
    parser.add_argument("--keep-base", action="store_true")
    parser.add_argument("--public-key", type=Path, default=None)
    # a bundle of the same cases (the mutation run's base) whose inputs are taken, not built
    parser.add_argument("--inputs-from", type=Path, default=None)
    return parser


def run_one(args: argparse.Namespace) -> int:
    from ..capture.progress import RunProgress
    from ..capture.run import child_isolation
    from ..core.verify import open_bundle, verify_bundle
    from ..pr.flow import PrOptions, Signer, _View, keep_base, run_bundle

    options = PrOptions(base="", out=args.out, key=args.key, patch=args.patch,
                        backend=args.backend, sources=args.sources, cache=args.cache,
                        reuse=True, workers=1)
    isolation = child_isolation(False, args.key)
    with RunProgress() as progress:
        written = run_bundle(args.manifest, args.out, Signer(args.key, args.public_key),
                             options, args.patch, args.base_store, isolation, progress.say,
                             inputs_from=args.inputs_from)
        private_key = written.private_key
        public_key = private_key.public_key()
        view = open_bundle(args.out, public_key)
        verdict = view.statement["predicate"]["verdict"]
        if args.keep_base and written.base_clean and verdict["verdict"] == "PASS":
            progress.say("verifying the base bundle before keeping its base side")
            # the base runs alone: its verification takes every core
            verify_bundle(args.out, public_key, frozen_manifest=args.manifest, workers=None)
            kept = keep_base(args.base_store, written.key, _View(view, args.out), private_key,
                             written.layout, written.base_isolation)
            progress.say("base side kept for the mutants" if kept
                         else "base side not kept (an entry is already there)")
    reasons = ", ".join(verdict["reasons"]) or "none"
    print(f"{verdict['verdict']}: {verdict['rows']} rows judged, {verdict['rows_stopped']} "
          f"stopped (reasons: {reasons})")
    reused = written.reused_from
    print(f"bundle: {printable(args.out)}"
          + (f" (base side reused from {printable(reused)})" if reused else ""))
    sys.stdout.flush()
    return EXIT_OK if verdict["verdict"] == "PASS" else EXIT_STOP


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return run_one(args)
    except HarnessError as err:
        print(f"mutant_run: {printable(str(err))}", file=sys.stderr)
        return err.exit_code


if __name__ == "__main__":
    sys.exit(main())
