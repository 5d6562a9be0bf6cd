"""Open only regular files: never block on a FIFO, never read a device, bounded in size.

Every file a command reads on a user's behalf (``--pubkey``, ``--frozen-manifest`` and its
``.sha256``, ``run --key``, ``run --manifest``) goes through :func:`read_regular_file`:
``open(O_RDONLY | O_NONBLOCK | O_CLOEXEC)``, then ``fstat`` on the opened descriptor, then
a bounded read. ``O_NONBLOCK`` makes opening a FIFO return at once instead of waiting for
a writer; ``fstat`` then refuses anything that is not a regular file before one byte is
read. A symbolic link the user names is followed (it is their path, as ``cat`` would read
it); the file it leads to must still be regular. Bundle files are stricter (no link at any
level): :class:`harness.core.bundle.BundleDir`.

Standard library only (trusted core).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import HarnessError, UsageError

OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def read_regular_file(path: Path, what: str, max_bytes: int, *, owner_only: bool = False,
                      follow_link: bool = True,
                      error: type[HarnessError] = UsageError) -> bytes:
    """The bytes of the regular file ``path`` (at most ``max_bytes``), or ``error`` (a
    :class:`UsageError` unless the caller names a more precise exit-2 error).

    ``owner_only`` also refuses a file that its group or others may read or write (as ssh
    refuses a private key with such bits): for private keys. ``follow_link=False`` refuses
    a symbolic link in the last component (for files found by walking a tree).
    """
    flags = OPEN_FLAGS if follow_link else OPEN_FLAGS | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as err:
        raise error(f"cannot read {what} {path}: {err.strerror or err}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise error(f"{what} {path} is not a regular file")
        if owner_only and info.st_mode & 0o077:
            raise error(f"{what} {path} is accessible by group or others (mode "
                             f"{stat.S_IMODE(info.st_mode):04o}); run: chmod 600 {path}")
        if info.st_size > max_bytes:
            raise error(f"{what} {path} is too large: {info.st_size} bytes, over the "
                        f"{max_bytes} allowed")
        data = read_capped(fd, max_bytes)
    except OSError as err:
        raise error(f"cannot read {what} {path}: {err.strerror or err}") from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise error(f"{what} {path} grew past {max_bytes} bytes while being read")
    return data


def read_capped(fd: int, limit: int) -> bytes:
    """Everything ``fd`` yields, but never more than ``limit + 1`` bytes: a file that grows
    while it is read comes back one byte too long, so the caller can refuse it."""
    chunks: list[bytes] = []
    remaining = limit + 1
    while remaining > 0:
        chunk = os.read(fd, min(remaining, 1 << 24))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)
