#!/usr/bin/env python3
"""Check (or rewrite) every generated documentation section in one process.

    .venv/bin/python scripts/readme_sections.py --check
    .venv/bin/python scripts/readme_sections.py --write
    .venv/bin/python scripts/readme_sections.py --check --only mutation_table

Runs the six section scripts (results, implementations, deployment, mutation testing,
affected releases, replays; :data:`harness.present.sections.SECTIONS` holds their markers)
one after another in this process, each on the file of this repository that holds its
section (:data:`harness.present.sections.HOMES`: ``docs/results.md``,
``docs/implementations.md``, ``docs/mutation.md``, ``docs/replays.md``; README.md itself
holds none since it fits on a page, issue 29). Every bundle a section reads is verified by
the trusted core first, and once per process (:mod:`harness.present.verified`): a bundle two
sections read (vLLM 0.33.0's deployment bundle, beside the implementations) is verified
once. Exit 0 when every section is current (or was rewritten), else the first non-zero exit
of a section script (1 stale, 2 bad input, 4 a mutation run that does not verify); every
section is checked either way.

``--only NAME[,NAME...]`` runs those section scripts alone: ``scripts/test`` runs the
mutation runs' check in one process and the other five in another, at once (no bundle is
read by both groups, so each is still verified once).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's harness package

# the committed mutation runs and the key that signed each, in the mutation table's order
MUTATION_RUNS = (
    ("evidence/mutation/pr-cuda-h200-20261201", "evidence/keys/topp-gate-evidence-3.pub"),
    ("evidence/mutation/pr-interpreter-cpu-20261201", "evidence/keys/topp-gate-evidence-3.pub"),
    ("evidence/mutation/pr-cuda-v2-h200-20261203.tar.xz", "evidence/keys/topp-gate-evidence-4.pub"),
    ("evidence/mutation/pr-interpreter-v2-cpu-20261203.tar.xz",
     "evidence/keys/topp-gate-evidence-4.pub"),
    ("evidence/mutation/pr-cuda-v3-h200-20261203.tar.xz", "evidence/keys/topp-gate-evidence-4.pub"),
    ("evidence/mutation/pr-cuda-v4-h200-20261203-part1.tar.xz",
     "evidence/keys/topp-gate-evidence-5.pub"),
    ("evidence/mutation/pr-cuda-v4-h200-20261203-part2.tar.xz",
     "evidence/keys/topp-gate-evidence-5.pub"),
    ("evidence/mutation/pr-cuda-v4-h200-20261203-part3.tar.xz",
     "evidence/keys/topp-gate-evidence-5.pub"),
    ("evidence/mutation/pr-pytorch-v1-cpu-20261205.tar.xz",
     "evidence/keys/topp-gate-evidence-6.pub"),
    ("evidence/mutation/pr-pytorch-v2-cpu-20261205.tar.xz",
     "evidence/keys/topp-gate-evidence-6.pub"),
    ("evidence/mutation/pr-pytorch-cuda-v1-h100-20261205.tar.xz",
     "evidence/keys/topp-gate-evidence-6.pub"),
    ("evidence/mutation/pr-cuda-v4-h100-20261205.tar.xz",
     "evidence/keys/topp-gate-evidence-6.pub"),
    ("evidence/mutation/pr-flashinfer-v2-h100-20261205-part1.tar.xz",
     "evidence/keys/topp-gate-evidence-6.pub"),
    ("evidence/mutation/pr-flashinfer-v2-h100-20261205-part2.tar.xz",
     "evidence/keys/topp-gate-evidence-6.pub"),
    ("evidence/mutation/pr-interpreter-v4-small-cpu-20261205.tar.xz",
     "evidence/keys/topp-gate-evidence-6.pub"),
)


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true",
                      help="exit 1 when a section differs from the generated one")
    mode.add_argument("--write", action="store_true",
                      help="replace every section with the generated one")
    parser.add_argument("--only", metavar="NAME[,NAME...]",
                        help="run only these section scripts (results_section, impl_table, "
                             "deploy_table, mutation_table, affected_releases, replay_table)")
    args = parser.parse_args(argv)
    from harness.present.sections import HOMES

    flag = "--check" if args.check else "--write"

    def home(name: str) -> str:
        return str(ROOT / HOMES[name])

    mutation = [str(ROOT / path) for path, _ in MUTATION_RUNS]
    for _, key in MUTATION_RUNS:
        mutation += ["--pubkey", str(ROOT / key)]
    runs = [("results_section", [flag, home("results")]),
            ("impl_table", [flag, home("impls")]),
            ("deploy_table", [flag, home("deploy")]),
            ("mutation_table", [*mutation, flag, home("mutation")]),
            ("affected_releases", [flag, home("affected")]),
            ("replay_table", [flag, home("replays")])]
    if args.only is not None:
        names = args.only.split(",")
        unknown = sorted(set(names) - {name for name, _ in runs})
        if unknown:  # "" too: --only "" or a stray comma
            print(f"readme_sections: --only: no section script {ascii(unknown[0])} (give "
                  f"some of {', '.join(name for name, _ in runs)})", file=sys.stderr)
            return 2
        runs = [(name, script_args) for name, script_args in runs if name in names]
    worst = 0
    for name, script_args in runs:
        start = time.monotonic()
        print(f"readme_sections: {name} ...", file=sys.stderr, flush=True)
        code = int(_script(name).main(script_args))
        said = "current" if code == 0 and args.check else "written" if code == 0 else \
            f"exit {code}"
        print(f"readme_sections: {name}: {said} ({time.monotonic() - start:.0f} s)",
              file=sys.stderr, flush=True)
        worst = worst or code
    return worst


if __name__ == "__main__":
    raise SystemExit(main())
