"""The flags several verbs share, defined once: same name, same metavar, same help, and
accepted after the verb (and after the action, for verbs with actions).

A verb calls these instead of ``add_argument`` for a shared flag, so ``--cache DIR`` means
the same on ``run``, ``kernels``, ``manifest new`` and every ``sources`` action, and
``--workers N``, ``--json``, ``--sources DIR`` and ``--patch DIFF`` read alike everywhere.
"""

from __future__ import annotations

import argparse
from pathlib import Path

CACHE_HELP = ("wheel and tree cache (default: $TOPP_GATE_CACHE, else "
              "$XDG_CACHE_HOME/topp-gate, else ~/.cache/topp-gate)")


def cache(parser: argparse.ArgumentParser, *, nested: bool = False) -> None:
    """``--cache DIR``. ``nested``: an action's copy of a flag its verb also takes, which
    leaves the verb's value alone when the action is not given it."""
    parser.add_argument("--cache", type=Path, metavar="DIR", help=CACHE_HELP,
                        default=argparse.SUPPRESS if nested else None)


def sources(parser: argparse.ArgumentParser, help: str | None = None) -> None:
    parser.add_argument("--sources", type=Path, metavar="DIR", default=None,
                        help=help or "exported source trees (topp-gate sources export), for "
                        "machines with no network (default: the cache)")


def patch(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--patch", type=Path, metavar="DIFF", default=None, help=help)


def signing_key(parser: argparse.ArgumentParser) -> None:
    """``--key K``: the Ed25519 private key a verb signs with (``pr``, ``replay``)."""
    parser.add_argument("--key", type=Path, default=None,
                        help="Ed25519 private key (default: $TOPP_GATE_KEY or "
                        "~/.config/topp-gate/signing.key)")


def run_folder(parser: argparse.ArgumentParser) -> None:
    """``--out DIR``: the new folder a verb writes pins, manifest and bundle into."""
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help="folder to create for pins, manifest and bundle (default: a "
                        "new folder under runs/; never an existing one)")


def exported_sources(parser: argparse.ArgumentParser) -> None:
    """``--sources DIR`` where ``$TOPP_GATE_SOURCES`` is the default too (``pr``, ``replay``)."""
    sources(parser, "exported source trees (topp-gate sources export), for machines with no "
            "network (default: $TOPP_GATE_SOURCES or the cache)")


def workers(parser: argparse.ArgumentParser, what: str, *, default: int | None = None) -> None:
    from ..core.limits import WORKERS_HELP

    parser.add_argument("--workers", type=int, metavar="N", default=default,
                        help=f"processes for {what} {WORKERS_HELP}")


def json_output(parser: argparse.ArgumentParser, what: str = "one JSON object") -> None:
    parser.add_argument("--json", action="store_true", help=what)


UNSANDBOXED_HELP = ("run the kernel children without a sandbox: as your user, with your "
                    "environment and files in view. Only for code you trust; without it a "
                    "machine where bubblewrap cannot make namespaces refuses to run. The "
                    "evidence records each side's isolation ('verify --require-isolation' "
                    "refuses such a bundle)")


def unsandboxed(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--unsandboxed", action="store_true", help=UNSANDBOXED_HELP)
