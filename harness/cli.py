"""``topp-gate``: the command line. ``main(argv)`` returns the exit code; only
``__main__`` calls ``sys.exit``. Every HarnessError becomes one line on stderr.

Exit codes: 0 success, 1 gate STOP, 2 usage or bad input, 3 oracle boundary ambiguous,
4 verification failed.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from . import __version__
from .errors import EXIT_USAGE, HarnessError, UsageError

# verb -> module under harness.commands (imported only when that verb runs or --help lists it)
VERBS: dict[str, str] = {
    "oracle": "oracle",
    "run": "run",
    "verify": "verify",
    "probe": "probe",
    "keygen": "keygen",
    "sources": "sources",
    "kernels": "kernels",
    "manifest": "manifest",
}


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so main() owns the exit code."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def _available_verbs() -> dict[str, object]:
    modules = {}
    for verb, module in VERBS.items():
        try:
            modules[verb] = importlib.import_module(f"harness.commands.{module}")
        except ModuleNotFoundError as err:
            if err.name and err.name.startswith("harness.commands"):
                continue  # verb not built yet
            raise
    return modules


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="topp-gate", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--version", action="version", version=f"topp-gate {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=_Parser)
    sub.required = True
    for module in _available_verbs().values():
        module.register(sub)  # type: ignore[attr-defined]
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser()
        args = parser.parse_args(args_list)
        return int(args.handler(args))
    except HarnessError as err:
        print(f"topp-gate: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("topp-gate: interrupted", file=sys.stderr)
        return 130
    except SystemExit as err:  # --help / --version
        return int(err.code or 0) if isinstance(err.code, int) else EXIT_USAGE
