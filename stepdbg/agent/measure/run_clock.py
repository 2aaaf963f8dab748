"""A clock of the time a thread had a CPU or was blocked, without the time it was ready to
run and waited for a CPU (preempted on a busy machine).

A data wait measured on the wall clock grows on a loaded machine: a 0.3 ms ``get_batch()``
preempted for 20 ms reads as a slow loader. Linux counts a task's run-queue wait in
``/proc/thread-self/schedstat`` (its second field, ns); this clock leaves it out. Time
blocked (a DataLoader's queue, disk) still counts: that is data wait. Where the file is
missing (not Linux) the clock is the wall clock.

One read is a ``pread`` on a descriptor kept per thread (about 1 us).
"""

from __future__ import annotations

import os
import threading
import time

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


def run_clock() -> float:
    """perf_counter() less this thread's run-queue wait: differences over a window are the
    window's wall time less the time the thread was preempted in it."""
    return time.perf_counter() - waited_for_cpu()
