"""Progress for long runs (rich): one status line per stage and a bar for row judging.

Writes to stderr, so stdout stays the summary; without a terminal rich prints plain lines.
"""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)


class RunProgress:
    def __init__(self) -> None:
        # no "progress.py:38" on every line: the caller of say() is always this file
        self.console = Console(stderr=True, log_path=False)
        self._bar = Progress(TextColumn("{task.description}"), BarColumn(),
                             MofNCompleteColumn(), TimeElapsedColumn(), console=self.console,
                             transient=False)
        self._task: TaskID | None = None

    def __enter__(self) -> RunProgress:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._task is not None:
            self._bar.stop()

    def say(self, message: str) -> None:
        self.console.log(message)

    def start_rows(self, total: int) -> None:
        self._bar.start()
        self._task = self._bar.add_task("judging rows", total=total)

    def advance(self, n: int) -> None:
        if self._task is not None:
            self._bar.advance(self._task, n)
