"""Row progress on stderr for the torch-free verbs (``verify``, ``exact``): one line
rewritten in place, only when stderr is a terminal (the capture side uses rich instead)."""

from __future__ import annotations

import sys


class RowProgress:
    """Row progress of one phase on stderr, only when stderr is a terminal."""

    def __init__(self, label: str, total: int = 0) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self.live = sys.stderr.isatty()

    def start(self, total: int) -> None:
        self.total = total

    def advance(self, n: int) -> None:
        self.done += n
        if self.live:
            of = f"/{self.total}" if self.total else ""
            end = "\n" if self.total and self.done >= self.total else ""
            print(f"\r{self.label}: {self.done}{of} rows", end=end, file=sys.stderr,
                  flush=True)

    def finish(self) -> None:
        """End the progress line (a verb then prints its result on a clean line)."""
        if self.live and self.done and not (self.total and self.done >= self.total):
            print(file=sys.stderr, flush=True)
