"""``topp-gate run``: the predeclared gate, end to end, into one signed bundle."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

from ..core.errors import EXIT_OK, EXIT_STOP
from ..core.terminal import printable
from . import flags

# The default manifest is the installed package's frozen copy (harness/data/manifests/,
# byte-identical to evidence/manifests/, held so by test), so `run` works from any
# directory; every path given on the command line is the caller's (relative to the cwd).
DEFAULT_MANIFEST_NAME = "h200-forced-logit-gate.json"
DEFAULT_KEY = Path("~/.config/topp-gate/signing.key")


def packaged_manifest(name: str = DEFAULT_MANIFEST_NAME) -> Path:
    """The installed package's frozen manifest NAME (beside its .sha256), as a file path."""
    from importlib import resources

    return Path(str(resources.files("harness").joinpath("data", "manifests", name)))


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "run",
        help="run stock and patched kernels on a frozen manifest; write a signed bundle",
        description="Run the frozen manifest's cases through the stock and patched vLLM "
        "split top-p kernels (one child process each, same captured bytes), judge every row "
        "against the binary64 oracle with the predeclared gate, and write a signed, "
        "schema-validated bundle to --out. Exit 0 on PASS, 1 on STOP (the bundle is still "
        "complete and signed), 2 when refused before anything ran.",
    )
    parser.add_argument("--manifest", type=Path, default=None,
                        help="frozen manifest (default: the installed package's copy of "
                        f"evidence/manifests/{DEFAULT_MANIFEST_NAME})")
    parser.add_argument("--backend", choices=("auto", "cuda", "interpreter"), default="auto",
                        help="auto (default) takes the manifest's required backend; naming "
                        "another one is refused")
    parser.add_argument("--out", type=Path, required=True,
                        help="bundle folder to create (never overwritten)")
    parser.add_argument("--key", type=Path, default=None,
                        help="Ed25519 private key (default: $TOPP_GATE_KEY or "
                        f"{DEFAULT_KEY}); make one with 'topp-gate keygen'")
    flags.sources(parser, "exported source trees (topp-gate sources export), for machines "
                  "with no network (default: $TOPP_GATE_SOURCES or the cache)")
    flags.cache(parser)
    flags.patch(parser, "gate stock plus this unified diff of one pinned file (the kernel file or "
                "another, such as a FlashInfer CUDA header) instead of the "
                "pinned patched release (the manifest must freeze its sha256)")
    flags.unsandboxed(parser)
    flags.workers(parser, "judging rows", default=0)
    parser.add_argument("--repeats", type=int, default=0,
                        help="extra timed CUDA calls per case, for timings only (default 0)")
    parser.set_defaults(handler=run)


def _terminated(signum: int, frame: object) -> None:
    """SIGTERM unwinds the run like an exception: the kernel child's process group is
    killed and scratch folders are removed on the way out; exit 128 + 15."""
    print("topp-gate: terminated; stopping the kernel child and removing scratch",
          file=sys.stderr)
    raise SystemExit(128 + signum)


def _require_key(key: Path) -> None:
    """A missing signing key is refused before anything runs, saying how to make one."""
    from ..core.errors import UsageError

    if os.path.lexists(key):
        return
    import shlex

    from ..capture.signing import PRIVATE_SUFFIX, keygen_command, keygen_prefix

    written = keygen_prefix(key) + PRIVATE_SUFFIX
    how = f"make one with '{keygen_command(key)}'"
    if written != str(key):
        how += f" and pass --key {shlex.quote(written)}"
    raise UsageError(f"no signing key at {printable(key)}: {how} (a new Ed25519 key pair; "
                     "give auditors the .pub file)")


def run(args: argparse.Namespace) -> int:
    from . import require_gpu_extra

    require_gpu_extra("run")
    signal.signal(signal.SIGTERM, _terminated)
    from ..capture.progress import RunProgress
    from ..capture.run import RunOptions, run_gate

    key = args.key or Path(os.environ.get("TOPP_GATE_KEY") or DEFAULT_KEY).expanduser()
    _require_key(key)
    manifest = args.manifest if args.manifest is not None else packaged_manifest()
    sources = args.sources or (Path(os.environ["TOPP_GATE_SOURCES"])
                               if os.environ.get("TOPP_GATE_SOURCES") else None)
    options = RunOptions(manifest=manifest, out=args.out, key=key, backend=args.backend,
                         sources=sources, cache=args.cache, patch=args.patch,
                         workers=args.workers, repeats=args.repeats,
                         unsandboxed=args.unsandboxed)
    with RunProgress() as progress:
        outcome = run_gate(options, progress=progress.say, row_progress=progress.advance,
                           on_rows=progress.start_rows)
    v = outcome.verdict
    reasons = ", ".join(v["reasons"]) or "none"
    print(f"{v['verdict']}: {v['rows']} rows judged, {v['rows_stopped']} stopped "
          f"(reasons: {reasons})")
    print(f"bundle: {printable(outcome.bundle.path)} ({outcome.bundle.stored_bytes} bytes, "
          f"signed by key {outcome.bundle.keyid[:16]}...)")
    sys.stdout.flush()
    return EXIT_OK if v["verdict"] == "PASS" else EXIT_STOP
