"""``topp-gate``: the command line. ``main(argv)`` returns the exit code; only
``__main__`` calls ``sys.exit``. Every HarnessError becomes one line on stderr.

Exit codes: 0 success, 1 gate STOP (only), 2 usage or bad input, 3 oracle boundary
ambiguous, 4 verification failed, 5 internal error; 141 when stdout is closed early.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from . import __version__
from .core.errors import EXIT_INTERNAL, EXIT_USAGE, HarnessError, MissingExtraError, UsageError
from .core.terminal import printable

DESCRIPTION = ("Is a change to vLLM's split top-p Triton kernel numerically safe to ship? "
               "Run a predeclared gate into a signed evidence bundle, or verify one offline.")
EPILOG = """exit codes (stable; scripts may rely on them):
  0    success: gate PASS, bundle verified with verdict PASS, oracle certified every row
  1    gate STOP: the gate ran (run) or was verified (verify) and said stop; nothing else
  2    usage or bad input: one line on stderr, nothing half-done
  3    oracle boundary ambiguous (oracle)
  4    verification failed (verify): signature, schema, digest, binding or rerun mismatch
  5    internal error: a bug in topp-gate, never a verdict
  141  stdout was closed early (as by '| head'); nothing more is printed"""
EXIT_SIGPIPE = 128 + int(getattr(signal, "SIGPIPE", 13))

# verb -> module under harness.commands (imported only when that verb runs or --help lists it)
VERBS: dict[str, str] = {
    "oracle": "oracle",
    "run": "run",
    "verify": "verify",
    "probe": "probe",
    "keygen": "keygen",
    "sources": "sources",
    "kernels": "kernels",
    "harness-digest": "harness_digest",
    "exact": "exact",
    "manifest": "manifest",
    "mutate": "mutate",
    "pr": "pr",
    "replay": "replay",
    "site": "site",
}


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so main() owns the exit code, and that takes
    no abbreviation of a long option (``--man`` for ``--manifest``): a wrapper that reads an
    option itself (the Nix gate, ``scripts/gate``) must see it spelt whole."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def _available_verbs() -> dict[str, ModuleType]:
    modules: dict[str, ModuleType] = {}
    for verb, module in VERBS.items():
        try:
            modules[verb] = importlib.import_module(f"harness.commands.{module}")
        except ModuleNotFoundError as err:
            if err.name and err.name.startswith("harness.commands"):
                continue  # verb not built yet
            raise
    return modules


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="topp-gate", description=DESCRIPTION, epilog=EPILOG,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"topp-gate {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=_Parser)
    sub.required = True
    for module in _available_verbs().values():
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser()
        args = parser.parse_args(args_list)
        return int(args.handler(args))
    except HarnessError as err:
        if isinstance(err, MissingExtraError):  # its hint as a command that works here
            from .install_hint import missing_extra

            err = missing_extra(err.extra)
        print(f"topp-gate: {err}", file=sys.stderr)
        return err.exit_code
    except BrokenPipeError:
        return _stdout_closed()
    except ModuleNotFoundError as err:  # a kernel-side import on the base install
        from .commands import gpu_extra_missing

        usage = gpu_extra_missing(err)
        if usage is None:
            return _internal(err)
        print(f"topp-gate: {usage}", file=sys.stderr)
        return usage.exit_code
    except KeyboardInterrupt:
        print("topp-gate: interrupted", file=sys.stderr)
        return 130
    except SystemExit as err:  # --help / --version
        return int(err.code or 0) if isinstance(err.code, int) else EXIT_USAGE
    except Exception as err:  # a bug: never a traceback, never a verdict's exit code
        return _internal(err)


def _internal(err: Exception) -> int:
    print(f"topp-gate: internal_error: unexpected {type(err).__name__}: "
          f"{printable(' '.join(str(err).split()))} (a bug in topp-gate; please report it)",
          file=sys.stderr)
    return EXIT_INTERNAL


def _stdout_closed() -> int:
    """The reader went away (``topp-gate oracle ... | head -1``): stop quietly, as Unix tools
    do on SIGPIPE, and keep Python from failing again when it flushes stdout at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout is not a real file (tests capture it)
        pass
    return EXIT_SIGPIPE
