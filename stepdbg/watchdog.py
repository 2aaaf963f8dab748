"""The stall watchdog: a thread that notices when no phase progresses for S seconds.

The main thread cannot pause itself while it hangs (in a DataLoader queue, a
collective, a deadlock), so the watchdog records what it can see from outside: every
thread's stack and the DataLoader's settings and worker states.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from . import inspection
from .conditions import Condition

if TYPE_CHECKING:
    from .session import Session


class Watchdog:
    def __init__(self, session: Session, condition: Condition) -> None:
        self.session = session
        self.condition = condition
        self.limit = float(condition.threshold or 60.0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stepdbg-watchdog", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        s = self.session
        fired_at = None  # one report per stall episode
        while not self._stop.wait(min(1.0, self.limit / 4)):
            if s.paused is not None or s._thread is None:
                continue
            last = s._last_progress
            idle = time.monotonic() - last
            if idle < self.limit or fired_at == last:
                continue
            fired_at = last
            try:
                loader = s.capture.get("loader")
                it = loader() if loader is not None else None
                details = {
                    "idle_seconds": round(idle, 2),
                    "threads": inspection.thread_stacks(),
                    "dataloader": inspection.loader_settings(it) if it is not None else None,
                }
                train = next((t for t in details["threads"] if t["id"] == s._thread), None)
                top = train["stack"][-1] if train and train["stack"] else None
                where = f"; the training thread waits in {top['function']} ({top['file']}:{top['line']})" if top else ""
                s.report_stall(self.condition.spec, f"no progress for {idle:.1f}s{where}", details)
            except Exception as e:  # the watchdog must never take the job down
                s._say(f"watchdog failed: {type(e).__name__}: {e}")
