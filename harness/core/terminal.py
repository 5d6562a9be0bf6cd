"""One way to put untrusted text (file names, paths, messages) on a terminal.

A bundle is hostile input: a file named ``\\x1b[2K\\rverdict: PASS`` must not redraw the
line a user reads. :func:`printable` replaces every character that is not printable
(C0/C1 controls, ESC, DEL, line and paragraph separators, bidirectional and other format
characters) by its Python escape, so what reaches the terminal is exactly what is there.
Every error message (:class:`harness.core.errors.HarnessError`) and every path a command prints
goes through it. Beside it, the one escape for untrusted text in Markdown (README tables,
reports): :func:`markdown_cell`, and :func:`markdown_code` for a code span in a cell.

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


# --- Markdown: one table cell, or one code span in it ----------------------------------------

_MARKDOWN_ACTIVE = {"&": "&amp;", "<": "&lt;", ">": "&gt;",
                    **{c: "\\" + c for c in "\\`*_[]|!~#"}}
_CODE_SPAN_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                            " ()+,-./_:=@%'")


def markdown_cell(text: object) -> str:
    """``str(text)`` as Markdown that renders as exactly its characters, in a table cell or
    inline: non-printable characters as their escapes (:func:`printable`: no newline, carriage
    return or ESC survives to start a forged row), HTML's ``& < >`` as entities, and every
    character that can start Markdown inline syntax or end a cell (``|``) backslash-escaped.
    An underscore between two letters or digits is left as it is (CommonMark never reads it as
    emphasis). The same output as :func:`harness.core.report.markdown_text` (report/v2)."""
    shown = printable(text)
    return "".join(c if c == "_" and _intraword(shown, i) else _MARKDOWN_ACTIVE.get(c, c)
                   for i, c in enumerate(shown))


def markdown_code(text: object) -> str:
    """``str(text)`` as a code span (`` `text` ``) when every character of it is inert there
    (letters, digits, space and ``()+,-./_:=@%'``); otherwise :func:`markdown_cell` of it,
    without a span: a code span can escape neither a backtick nor a table's ``|``."""
    value = str(text)
    if value and set(value) <= _CODE_SPAN_SAFE:
        return f"`{value}`"
    return markdown_cell(value)


def _intraword(text: str, i: int) -> bool:
    return 0 < i < len(text) - 1 and text[i - 1].isalnum() and text[i + 1].isalnum()
