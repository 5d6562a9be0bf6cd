"""``topp-gate keygen --out PREFIX``: an Ed25519 signing key pair for bundles."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import EXIT_OK
from ..terminal import printable


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "keygen",
        help="write an Ed25519 key pair for signing bundles",
        description="Write PREFIX.key (Ed25519 private key, PEM PKCS#8, mode 0600) and "
        "PREFIX.pub (public key, PEM). Refuses to overwrite either file. Keep the private "
        "key out of bundles, logs and repositories; give auditors the .pub file.",
    )
    parser.add_argument("--out", required=True, type=Path, metavar="PREFIX",
                        help="path prefix for PREFIX.key and PREFIX.pub")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..keys import write_keypair

    private_path, public_path, kid = write_keypair(args.out)
    print(f"private key: {printable(private_path)} (mode 0600; never put it in a bundle or a "
          "repository)")
    print(f"public key:  {printable(public_path)}")
    print(f"key id:      {kid}")
    return EXIT_OK
