#!/usr/bin/env python3
"""The mutation-testing table of docs/mutation.md, generated from signed mutation results
(issue 20).

    scripts/mutation_table.py DIR [DIR...] --pubkey PUB [--pubkey PUB...]          print it
    scripts/mutation_table.py DIR [DIR...] --pubkey PUB [--pubkey PUB...] --check  FILE holds it
    scripts/mutation_table.py DIR [DIR...] --pubkey PUB [--pubkey PUB...] --write  replace it

``--check``/``--write`` take the file that holds the section, after the folders; without
one, this repository's ``docs/mutation.md`` (:data:`harness.present.sections.HOMES`).

One ``--pubkey`` verifies every folder; several are matched to the folders in order (each
folder with the key that signed it).

Each DIR is a ``topp-gate mutate`` folder, or a ``.tar.xz`` of one (how the folders of
December 3 are committed: their bundles repeat the same captured inputs, which xz stores once;
:func:`harness.mutation.mutate.mutation_folder` refuses links, special files, names outside
the folder and oversized archives before extracting to a temporary folder); its signed
summary and every bundle it names are verified first
and every claim of the summary is recomputed from them
(:func:`harness.mutation.mutation_check.check_summary`: kills, kill rates, survivors, vLLM's
criterion, matrix, rules, backend, catalogue, each bundle named once, the frozen PR manifest
taken from this repository only), and the table is rendered from the evidence model of the
run (:func:`harness.present.build.mutation_run`, which the site's pages use too), so it
states only what verified. Progress (one line
per verified bundle) goes to stderr; every string from a summary reaches the table through
:func:`harness.core.terminal.markdown_cell` / ``markdown_code``.
The section sits between the two marker lines below. Exit codes: 0 printed, or the file
holds it (--check) or was rewritten (--write); 1 the file differs or has no section;
2 usage or unreadable input; 4 a summary or bundle that does not verify (one line each).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.present import sections  # noqa: E402
from harness.present.model import MutationRun  # noqa: E402

BEGIN = sections.MUTATION.begin
END = sections.MUTATION.end


def section(folders: list[Path], pubkeys: list[Path]) -> str:
    from harness.core.keys import load_public_key
    from harness.core.terminal import markdown_cell, markdown_code, printable
    from harness.mutation.mutate import mutation_folder
    from harness.present.build import mutation_run

    if len(pubkeys) not in (1, len(folders)):
        raise SystemExit(f"mutation_table: {len(pubkeys)} --pubkey for {len(folders)} folders "
                         "(give one for all, or one per folder)")
    keys = [load_public_key(k) for k in (pubkeys * len(folders) if len(pubkeys) == 1
                                         else pubkeys)]
    lines = [BEGIN, "",
             "| matrix | rules | backend | base | gate kills | vLLM criterion (reimplemented): "
             "base, kills | survivors of the gate (smallest diff first; their patched outputs "
             "against the base's) |",
             "|---|---|---|---|---|---|---|"]
    for folder, key in zip(folders, keys, strict=True):
        with mutation_folder(folder) as opened:
            run = mutation_run(opened, key, folder.name, REPO,
                               lambda line: print(f"mutation_table: {printable(line)}",
                                                  file=sys.stderr, flush=True),
                               workers=None)  # every usable CPU
        killed, of = run.gate_kills
        lines.append(f"| {markdown_code(run.matrix)} | {markdown_code(run.rules)} | "
                     f"{markdown_cell(run.backend)} | {run.base_verdict} ({run.base_defects:d} "
                     f"base-defect rows) | {killed}/{of} ({100 * killed // max(of, 1)}%)"
                     f"{_subset(run)} | {_criterion(run)} | "
                     + (_survivors(run) or "none") + " |")
    return "\n".join([*lines, "", END]) + "\n"


def _subset(run: MutationRun) -> str:
    """Said after the kill count when the run took only part of its catalogue (``--only``),
    so a partial run never reads as the whole catalogue's rate."""
    from harness.core.terminal import markdown_code

    if run.gate_kills[1] >= run.catalogue_entries:
        return ""
    return (f", only {run.gate_kills[1]} of the {run.catalogue_entries} entries of "
            f"{markdown_code(run.catalogue)} run")


def _survivors(run: MutationRun) -> str:
    """Each survivor with what its outputs did: ``= base`` when its patched output equals the
    base's on every row (the matrix never made the mutation observable), else how many rows
    changed with no stop. From the bundles the run's verification just checked."""
    from harness.core.errors import MalformedEvidenceError
    from harness.core.terminal import markdown_code

    by_id = {m.id: m for m in run.mutants}
    shown = []
    for name in run.survivors:
        if name not in by_id:
            raise MalformedEvidenceError(f"survivor {name} has no verified bundle")
        rows = by_id[name].changed
        said = ("outputs not comparable" if rows is None else "outputs = base" if not rows
                else f"{len(rows)} row{'s' if len(rows) != 1 else ''} changed")
        shown.append(f"{markdown_code(name)} ({said})")
    return ", ".join(shown)


def _criterion(run: MutationRun) -> str:
    """vLLM's criterion as it fares on the base, then its kills: a criterion the unchanged
    base already fails kills every mutant by that batch alone, so the kills that tell a
    mutant from the base are counted apart (a batch the base passes fails). A run made
    without it (FlashInfer's samplers draw tokens; the criterion compares kept counts) says so."""
    if not run.criterion_run:
        return "not run (`--no-vllm-criterion`: a sampler's draws are not kept counts)"
    said = (f"base fails {run.criterion_base_failed} of {run.criterion_batches} batches"
            if run.criterion_base_failed else f"base passes all {run.criterion_batches} batches")
    killed, of = run.criterion_kills
    return (f"{said}; kills {killed}/{of}, of which {run.criterion_telling} on a batch "
            "the base passes")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--pubkey", type=Path, required=True, action="append")
    mode = parser.add_mutually_exclusive_group()
    home = REPO / sections.HOMES[sections.MUTATION.name]
    mode.add_argument("--check", type=Path, nargs="?", const=home, metavar="FILE",
                      help=f"exit 1 when FILE (default {home.relative_to(REPO)}) does not hold "
                      "the generated table")
    mode.add_argument("--write", type=Path, nargs="?", const=home, metavar="FILE",
                      help="replace FILE's table with the generated one")
    args = parser.parse_args(argv)
    from harness.core.errors import HarnessError
    from harness.core.terminal import printable

    try:
        text = section(args.folders, args.pubkey)
    except (HarnessError, OSError) as err:  # one line; a refused bundle or summary exits 4
        print(f"mutation_table: {printable(str(err))}", file=sys.stderr)
        return err.exit_code if isinstance(err, HarnessError) else 2
    except (KeyError, TypeError, ValueError, AttributeError) as err:  # a signed summary
        # of another shape than topp-gate mutate writes: refused in one line, never a table
        print(f"mutation_table: malformed mutation summary ({type(err).__name__}: "
              f"{printable(str(err))})", file=sys.stderr)
        return 4
    if args.check is None and args.write is None:
        sys.stdout.write(text)
        return 0
    path = args.check if args.check is not None else args.write
    try:
        if not sections.holds(sections.MUTATION, path.read_text(encoding="utf-8")):
            print(f"mutation_table: {printable(str(path))} has no mutation-table section",
                  file=sys.stderr)
            return 1
        return sections.run_mode(sections.MUTATION, text, check_path=args.check,
                                 write_path=args.write)
    except OSError as err:
        print(f"mutation_table: {printable(str(err))}", file=sys.stderr)
        return 2
    except HarnessError as err:
        print(f"mutation_table: {printable(str(err))}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
