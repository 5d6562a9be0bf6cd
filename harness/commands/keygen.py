"""``topp-gate keygen --out PREFIX``: an Ed25519 signing key pair for bundles."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..core.errors import EXIT_OK, UsageError
from ..core.terminal import printable


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "keygen",
        help="write an Ed25519 key pair for signing bundles",
        description="Write PREFIX.key (Ed25519 private key, PEM PKCS#8, mode 0600) and "
        "PREFIX.pub (public key, PEM). Refuses to overwrite either file; creates missing "
        "folders above PREFIX with mode 0700. Keep the private key out of bundles, logs and "
        "repositories; give auditors the .pub file.",
    )
    parser.add_argument("--out", required=True, type=Path, metavar="PREFIX",
                        help="path prefix for PREFIX.key and PREFIX.pub")
    parser.set_defaults(handler=run)


def _make_private_parents(prefix: Path) -> None:
    """Create the missing folders above ``prefix``, each with mode 0700 (as ssh-keygen's
    ~/.ssh), so a first run can write ``~/.config/topp-gate/signing.key``. Existing folders
    are left as they are."""
    parent = prefix.absolute().parent
    missing = [f for f in [*reversed(parent.parents), parent] if not os.path.lexists(f)]
    for folder in missing:
        try:
            folder.mkdir(mode=0o700)
            os.chmod(folder, 0o700)  # the umask must not widen or narrow it
        except FileExistsError:
            continue
        except OSError as err:
            raise UsageError(f"cannot create folder {folder} for the key: "
                             f"{err.strerror or err}") from None


def run(args: argparse.Namespace) -> int:
    from ..capture.signing import write_keypair

    _make_private_parents(args.out)
    private_path, public_path, kid = write_keypair(args.out)
    print(f"private key: {printable(private_path)} (mode 0600; never put it in a bundle or a "
          "repository)")
    print(f"public key:  {printable(public_path)}")
    print(f"key id:      {kid}")
    return EXIT_OK
