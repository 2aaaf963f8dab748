"""One authenticated client of the server: its connection, its outbox and its requests."""

from __future__ import annotations

import queue
import time
from dataclasses import dataclass, field
from typing import Any

from stepdbg.agent.serve.outbox import Outbox
from stepdbg.wire import protocol

REQUESTS_IN_FLIGHT = 64  # per client; more are answered with an error, not queued


@dataclass(eq=False)
class Peer:
    """One authenticated connection."""

    conn: protocol.Connection
    outbox: Outbox
    role: str  # "frontend" or "probe" (stepdbg ls: not counted as attached)
    then: str = "stay"  # what happens to the job when this client leaves (op_detach)
    attached: bool = False
    local = False  # a client over a socket: never the job's own console (the end's `by here`)
    requests: queue.Queue[dict[str, Any] | None] = field(
        default_factory=lambda: queue.Queue(maxsize=REQUESTS_IN_FLIGHT))  # its worker's, in order

    def answered(self, deadline: float) -> None:
        """Wait (until `deadline`, monotonic) for the requests taken from this client to be
        answered into its outbox. At the job's end a `cont` that let the job run to it is
        answered before the connection closes: its worker was between resuming the job and
        putting the answer when the training thread, ending, closed the connection (CI's
        red: `c.cont()` raised "the connection to the job closed" on a 3-step job)."""
        done = self.requests.all_tasks_done
        with done:
            done.wait_for(lambda: self.requests.unfinished_tasks == 0, timeout=max(0.0, deadline - time.monotonic()))
