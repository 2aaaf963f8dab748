"""A client's share of a running job: each client's requests are answered at most RATE a
second (BURST at once), so clients polling as fast as they can cost the job little. While
the job is paused its training thread waits anyway, and requests run unpaced."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

RATE = 20.0  # requests a second, per client, while the job runs
BURST = 40  # a front end's burst at a break (status, frames, locals, history, ...) fits


class Pace:
    """A token bucket that waits rather than refuses: a client that floods is slowed."""

    def __init__(self, rate: float = RATE, burst: int = BURST) -> None:
        self.rate, self.burst = rate, burst
        self.tokens = float(burst)
        self.last = time.monotonic()

    def wait(self, running: Callable[[], bool], stopped: threading.Event) -> None:
        """Return when the next request may run: at once while the job is paused."""
        while running() and not stopped.is_set():
            now = time.monotonic()
            self.tokens = min(float(self.burst), self.tokens + (now - self.last) * self.rate)
            self.last = now
            if self.tokens >= 1:
                self.tokens -= 1
                return
            stopped.wait(min((1 - self.tokens) / self.rate, 0.1))  # re-check: a pause lifts the limit
