"""mutate's reports come from several threads at once (one per run): each must stay a line
of its own, whatever the ``say`` it is given does (``print`` writes text and newline apart)."""

from __future__ import annotations

import io
import threading
from collections.abc import Callable

from harness.mutation.mutate import one_at_a_time

THREADS = 2
EACH = 3


class _MeetingStream(io.StringIO):
    """After writing a report's text (before its newline), waits until the other thread has
    written its text too, or 0.2 s: unlocked, the two texts then always share a line."""

    def __init__(self) -> None:
        super().__init__()
        self.meet = threading.Barrier(THREADS, timeout=0.2)

    def write(self, s: str) -> int:
        n = super().write(s)
        if s != "\n":
            try:
                self.meet.wait()
            except threading.BrokenBarrierError:
                self.meet.reset()  # the other thread could not come (it waits on the lock)
        return n


def _lines(say: Callable[[str], None], stream: _MeetingStream) -> list[str]:
    def worker(t: int) -> None:
        for i in range(EACH):
            say(f"run-{t}: verified STOP ({i})")

    pool = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return stream.getvalue().split("\n")[:-1]


def test_printed_reports_from_threads_stay_whole_lines_behind_the_lock() -> None:
    stream = _MeetingStream()
    lines = _lines(one_at_a_time(lambda m: print(m, file=stream)), stream)
    assert sorted(lines) == sorted(f"run-{t}: verified STOP ({i})"
                                   for t in range(THREADS) for i in range(EACH))


def test_without_the_lock_the_same_reports_run_together() -> None:
    """The hazard the lock removes is real: the same reports, unlocked, share a line."""
    stream = _MeetingStream()
    lines = _lines(lambda m: print(m, file=stream), stream)
    assert any(line.count("run-") == 2 for line in lines)
