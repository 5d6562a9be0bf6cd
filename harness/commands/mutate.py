"""``topp-gate mutate``: mutation-test the gate with a frozen manifest (issue 20)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..core.errors import EXIT_OK, EXIT_STOP
from ..core.terminal import printable


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "mutate",
        help="mutation-test the gate: run it on mutants of the patched kernel",
        description="Write one mutant of the patched side's kernel per entry of a mutant "
        "catalogue (--catalogue; topp-gate/mutants/v1: the split top-p pipeline; "
        "topp-gate/mutants/v2, the default: v1 plus the monolithic kernel and the dispatch; "
        "topp-gate/mutants/pytorch-v1: vLLM's PyTorch path, family vllm-pytorch; "
        "topp-gate/mutants/flashinfer-v1: FlashInfer 0.7.2.post1's CUDA headers "
        "sampling.cuh and topk.cuh, family flashinfer; "
        "comparison flips, off-by-one, dropped clauses, search constants, precision), "
        "each a unified diff frozen into its own manifest by "
        "'manifest new'; run the gate on the base and every mutant (several at once), "
        "verify every bundle, and write OUT/mutation.json with its DSSE signature "
        "OUT/mutation.dsse.json: per mutant killed (STOP, with rows and reasons) or "
        "survived, vLLM's own batch count criterion beside it, and both kill rates. "
        "Exit 0 when the base passes and every bundle verified, 1 otherwise.",
    )
    parser.add_argument("--manifest", type=Path, metavar="M.json",
                        help="the frozen PR manifest (evidence/manifests/pr/, regression/v1)")
    parser.add_argument("--out", type=Path, metavar="DIR", help="a new folder")
    parser.add_argument("--key", type=Path, metavar="KEY", help="Ed25519 signing key")
    parser.add_argument("--backend", choices=("auto", "cuda", "interpreter"), default="auto")
    parser.add_argument("--patch", type=Path, default=None, metavar="DIFF",
                        help="the change under review on the patched side (frozen in the "
                        "manifest); mutants are of the file it changes with it applied")
    parser.add_argument("--sources", type=Path, default=None, metavar="DIR")
    parser.add_argument("--cache", type=Path, default=None, metavar="DIR")
    parser.add_argument("--jobs", type=int, default=2, help="gate runs at once (default 2)")
    parser.add_argument("--only", default="", metavar="ID,ID",
                        help="run only these catalogue entries")
    parser.add_argument("--run-timeout", type=int, default=3600, metavar="S")
    parser.add_argument("--no-vllm-criterion", action="store_true",
                        help="leave vLLM's own criterion out")
    parser.add_argument("--vllm-sampler", type=Path, default=None, metavar="FILE",
                        help="vLLM 0.33.0's vllm/v1/sample/ops/topk_topp_sampler.py (sha256 "
                        "checked; default: read from the cached pinned wheel)")
    parser.add_argument("--no-base-reuse", action="store_true",
                        help="run every mutant's base side again (default: the base runs "
                        "first and each mutant's bundle carries its verified base side, as "
                        "'topp-gate pr' reuses one)")
    parser.add_argument("--catalogue", default=None, metavar="ID",
                        help="the mutant catalogue, recorded in the summary (default: "
                        "topp-gate/mutants/v2; also topp-gate/mutants/v1, "
                        "topp-gate/mutants/pytorch-v1 for vLLM's PyTorch path and "
                        "topp-gate/mutants/flashinfer-v1 for FlashInfer's CUDA headers)")
    parser.add_argument("--list", action="store_true",
                        help="print the chosen catalogue (id, kind, what, target, principle; "
                        "tab-separated) and exit")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..core.errors import UsageError
    from ..mutation.mutate import CATALOGUE_ID, Options, catalogue, run_mutation

    catalogue_id = CATALOGUE_ID if args.catalogue is None else args.catalogue
    entries = catalogue(None, catalogue_id)  # an unknown id: exit 2, one line
    if args.list:
        own = sorted({m.path for m in entries if m.path})  # entries naming their own file
        print(f"# {catalogue_id}: {len(entries)} mutants"
              + (f" of {', '.join(own)}" if own else ""))
        for m in entries:
            print("\t".join((m.id, m.kind, m.what, m.target or "-", m.principle or "-")))
        return EXIT_OK
    for name in ("manifest", "out", "key"):
        if getattr(args, name) is None:
            raise UsageError(f"--{name} is required (or --list)")
    options = Options(manifest=args.manifest, out=args.out, key=args.key, backend=args.backend,
                      sources=args.sources, cache=args.cache, patch=args.patch,
                      jobs=args.jobs, only=tuple(x for x in args.only.split(",") if x),
                      run_timeout_s=args.run_timeout,
                      vllm_criterion=not args.no_vllm_criterion,
                      vllm_sampler=args.vllm_sampler, catalogue=catalogue_id,
                      reuse_base=not args.no_base_reuse)
    summary = run_mutation(options, say=lambda m: print(printable(m), file=sys.stderr))
    rate = summary["kill_rate"]
    print(json.dumps({"base_passes": summary["base_passes"], "kill_rate": rate,
                      "survivors": summary["survivors"], "unverified": summary["unverified"]}))
    ok = summary["base_passes"] and not summary["unverified"]
    return EXIT_OK if ok else EXIT_STOP
