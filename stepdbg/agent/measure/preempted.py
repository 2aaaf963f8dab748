"""The time a thread was ready to run and waited for a CPU: preempted on a busy machine.

Linux counts it per task in ``/proc/thread-self/schedstat`` (the second field, in ns).
The doctor reads it where a step's gap starts and where its first forward does, so that a
gap whose time went to other processes is not called data wait (a 0.3 ms ``get_batch()`` preempted for 20 ms reads as a slow
loader on the wall clock). Not read on the watch's path: one read costs about 1 us in a
loop but 10-15 us between a step's kernels, 4% of a 1.2 ms step at four a step.
Where the file is missing (not Linux) nothing is known: 0.0.
"""

from __future__ import annotations

import os
import threading
from typing import Any

_PATH = "/proc/thread-self/schedstat"


class _ThreadFile(threading.local):
    """This thread's schedstat descriptor (opened on first use; closed with the thread)."""

    fd: int | None = None
    pid: int = -1
    missing: bool = False

    def __del__(self) -> None:
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass


_file = _ThreadFile()


def waited_for_cpu() -> float:
    """Seconds this thread has waited for a CPU since it started (0.0 where not known)."""
    f = _file
    if f.missing:
        return 0.0
    try:
        if f.fd is None or f.pid != os.getpid():  # (a forked child has its own task)
            f.fd, f.pid = os.open(_PATH, os.O_RDONLY | os.O_CLOEXEC), os.getpid()
        return int(os.pread(f.fd, 64, 0).split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        f.missing = True
        return 0.0


class StepPreemption:
    """Per step, the training thread's time waiting for a CPU in its gap (from where the
    step before ended to its first forward), in its work (from there to its end) and, of
    that work, in its forward-to-backward gaps (a prefetch: the next step's data wait; read
    by the step's data clock, which first_forward gives this one's clock): what the
    machine's load, not the loader or the model, took. Three reads a step, two a forward."""

    KEEP = 16  # steps remembered

    def __init__(self) -> None:
        self.gap: dict[int, float] = {}
        self.work: dict[int, float] = {}
        self.fetch: dict[int, float] = {}
        self._mark: float | None = None

    def gap_starts(self) -> None:
        self._mark = waited_for_cpu()

    def first_forward(self, step: int, data: Any) -> None:
        data.cpu_clock = waited_for_cpu  # (a DataWait: its prefetch gaps, measured the same way)
        now = waited_for_cpu()
        if self._mark is not None:
            self._keep(self.gap, step, now - self._mark)
        self._mark = now

    def step_ended(self, step: int, data: Any) -> None:
        now = waited_for_cpu()
        if self._mark is not None:
            self._keep(self.work, step, now - self._mark)
        self._keep(self.fetch, step, data.preempted_in_step())
        self._mark = None

    def _keep(self, table: dict[int, float], step: int, seconds: float) -> None:
        table[step] = seconds
        if len(table) > self.KEEP:
            del table[min(table)]
