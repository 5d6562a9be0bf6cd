"""One way to put untrusted text (file names, paths, messages) on a terminal.

A bundle is hostile input: a file named ``\\x1b[2K\\rverdict: PASS`` must not redraw the
line a user reads. :func:`printable` replaces every character that is not printable
(C0/C1 controls, ESC, DEL, line and paragraph separators, bidirectional and other format
characters) by its Python escape, so what reaches the terminal is exactly what is there.
Every error message (:class:`harness.core.errors.HarnessError`) and every path a command prints
goes through it.

Standard library only (trusted core).
"""

from __future__ import annotations


def _escape(char: str) -> str:
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def printable(text: object) -> str:
    """``str(text)`` with each non-printable character written as its escape."""
    value = str(text)
    if value.isprintable():
        return value
    return "".join(c if c.isprintable() else _escape(c) for c in value)
