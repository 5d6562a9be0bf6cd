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
    parser.add_argument("--out", required=True, metavar="PREFIX",
                        help="path prefix for PREFIX.key and PREFIX.pub (not a folder: "
                        "DIR/signing writes DIR/signing.key and DIR/signing.pub)")
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


def _prefix(text: str) -> Path:
    """``--out`` as a key path prefix. A folder (existing, or named with a trailing slash)
    is refused: the keys would land beside it as ``DIR.key`` (for a top-level folder, at
    the filesystem root)."""
    if not text or Path(text).name in ("", ".", ".."):
        from ..capture.signing import key_paths

        key_paths(Path(text))  # refuses it: "names no file"
    example = os.path.join(text, "signing")
    if text.endswith(os.sep) or (os.altsep and text.endswith(os.altsep)) or os.path.isdir(text):
        raise UsageError(f"--out {printable(text)} names a folder; give a path prefix inside "
                         f"it, e.g. --out {printable(example)} (writes signing.key and "
                         "signing.pub there)")
    return Path(text)


def run(args: argparse.Namespace) -> int:
    from ..capture.signing import write_keypair

    prefix = _prefix(args.out)
    _make_private_parents(prefix)
    private_path, public_path, kid = write_keypair(prefix)
    print(f"private key: {printable(private_path)} (mode 0600; never put it in a bundle or a "
          "repository)")
    print(f"public key:  {printable(public_path)}")
    print(f"key id:      {kid}")
    return EXIT_OK
