"""The signer's public key for the verbs that read a bundle (``verify``, ``exact``): the
user's ``--pubkey``, or one of the project's built-in evidence keys. Torch-free."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

PUBKEY_HELP = ("the signer's Ed25519 public key (PEM), obtained out of band (default: the "
               "built-in topp-gate project key, of those shipped with the package, whose key "
               "id the envelope names)")


def add_pubkey_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pubkey", type=Path, metavar="PUB", help=PUBKEY_HELP)


def signer_key(pubkey: Path | None, bundle: Path, *, say: bool = True) -> Ed25519PublicKey:
    """``--pubkey``, else the built-in project key the bundle's envelope names (its key id
    is unverified and only picks between keys trusted anyway); ``say`` tells which on
    stderr (stdout stays the verb's result: ``verify --json`` prints one JSON object)."""
    from ..core.keys import keyid, load_public_key, project_public_key
    from ..core.verify import signer_hint

    if pubkey is not None:
        return load_public_key(pubkey)
    key = project_public_key(signer_hint(bundle))
    if say:
        print(f"using a built-in topp-gate project evidence key (key id {keyid(key)}; "
              "pass --pubkey for another signer)", file=sys.stderr)
    return key
