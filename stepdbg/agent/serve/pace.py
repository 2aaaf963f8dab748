"""A client's share of a running job. While the job runs, each client's requests are
answered at most RATE a second (BURST at once), all clients' together at most JOB_RATE a
second (JOB_BURST at once: ten clients cost what two would), and take at most SHARE of the
time each and JOB_SHARE all together: a
request that held the CPU for 2 ms (every thread's stack, the memory census, a module
tree, a summary) is followed by a rest of 2 ms x (1/SHARE - 1) before the client's next.
Clients polling as fast as they can, whatever they ask, so cost the job little. While
the job is paused its training thread waits anyway, and requests run unpaced."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

RATE = 20.0  # requests a second, per client, while the job runs
BURST = 40  # a front end's burst at a break (status, frames, locals, history, ...) fits
SHARE = 0.01  # of the time, per client, its requests may hold a CPU while the job runs
JOB_RATE = 40.0  # requests a second, all clients together, while the job runs
JOB_BURST = 40
JOB_SHARE = 0.03  # of the time all clients' requests together may hold a CPU while the job runs


class Bucket:
    """A token bucket any thread may take from: the whole job's share."""

    def __init__(self, rate: float = JOB_RATE, burst: int = JOB_BURST, share: float = JOB_SHARE,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.rate, self.burst, self.share, self.clock = rate, burst, share, clock
        self.tokens, self.last = float(burst), clock()
        self.rest_until = 0.0
        self._lock = threading.Lock()

    def spent(self, cpu_seconds: float) -> None:
        """A request (any client's) just held a CPU this long while the job ran."""
        with self._lock:
            self.rest_until = max(self.rest_until, self.clock()) + cpu_seconds * (1 / self.share - 1)

    def take(self) -> float:
        """0 when a token was taken; else the seconds until one may be."""
        with self._lock:
            now = self.clock()
            if now < self.rest_until:
                return self.rest_until - now
            self.tokens = min(float(self.burst), self.tokens + (now - self.last) * self.rate)
            self.last = now
            if self.tokens >= 1:
                self.tokens -= 1
                return 0.0
            return max((1 - self.tokens) / self.rate, 0.001)


class Pace:
    """A token bucket that waits rather than refuses, and a rest after each costly request:
    a client that floods is slowed, never refused."""

    def __init__(self, rate: float = RATE, burst: int = BURST, share: float = SHARE,
                 clock: Callable[[], float] = time.monotonic, job: Bucket | None = None) -> None:
        self.rate, self.burst, self.share, self.clock, self.job = rate, burst, share, clock, job
        self.tokens = float(burst)
        self.last = clock()
        self.rest_until = 0.0

    def spent(self, cpu_seconds: float) -> None:
        """The request just answered held a CPU this long (while the job ran)."""
        self.rest_until = max(self.rest_until, self.clock() + cpu_seconds * (1 / self.share - 1))
        if self.job is not None:
            self.job.spent(cpu_seconds)

    def now_or_never(self, running: Callable[[], bool]) -> bool:
        """True (a token taken) when a request may run at once; False, taking nothing, when
        it would wait: the reader, which must stay free for `interrupt`, never waits."""
        if not running():
            return True
        now = self.clock()
        if now < self.rest_until:
            return False
        tokens = min(float(self.burst), self.tokens + (now - self.last) * self.rate)
        if tokens < 1 or (self.job is not None and self.job.take()):
            return False
        self.tokens, self.last = tokens - 1, now
        return True

    def wait(self, running: Callable[[], bool], stopped: threading.Event) -> None:
        """Return when the next request may run: at once while the job is paused."""
        while running() and not stopped.is_set():
            now = self.clock()
            if now < self.rest_until:
                stopped.wait(min(self.rest_until - now, 0.1))  # re-check: a pause lifts the limit
                continue
            self.tokens = min(float(self.burst), self.tokens + (now - self.last) * self.rate)
            self.last = now
            if self.tokens >= 1:
                later = self.job.take() if self.job is not None else 0.0
                if not later:
                    self.tokens -= 1
                    return
                stopped.wait(min(later, 0.1))
                continue
            stopped.wait(min(max((1 - self.tokens) / self.rate, 0.001), 0.1))  # (never a spin on a rounding)
