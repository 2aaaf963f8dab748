"""The stall watchdog: a thread that notices when no phase progresses for S seconds.

The main thread cannot pause itself while it hangs (in a DataLoader queue, a
collective, a deadlock), so the watchdog records what it can see from outside: every
thread's stack and the DataLoader's settings and worker states. In a job of many ranks it
also asks every rank where it is (job_stall.py), answers the other ranks' asks, and ends
this rank when the rank that reported a stall ends the job.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from stepdbg.agent.breaks.job_stall import StallExchange, diagnose
from stepdbg.agent.measure import threads
from stepdbg.agent.measure.frames import is_user_file
from stepdbg.agent.step.step_model import StepModel
from stepdbg.wire.conditions import Condition


class Watchdog:
    """Watches `model`'s progress; `on_stall(spec, reason, details)` reports a stall."""

    def __init__(self, model: StepModel, condition: Condition, on_stall: Callable[[str, str, dict[str, Any]], None],
                 say: Callable[[str], None], job: StallExchange | None = None,
                 on_job_end: Callable[[int], None] | None = None) -> None:
        self.model = model
        self.job, self.on_job_end = job, on_job_end
        self.on_stall = on_stall
        self.say = say
        self.condition = condition
        self.limit = float(condition.threshold or 60.0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stepdbg-watchdog", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, wait: float = 10.0) -> None:
        """Stop, and wait (at most `wait` s) for the thread to end: it may be in a torch call
        (the job's store) that gave up the GIL. A daemon thread that takes the GIL back while
        the interpreter finalizes is ended by pthread_exit, whose unwinding through torch's
        C++ aborts the rank (`terminate called without an active exception`, SIGABRT: a
        torchrun job ended with `q` exited 1, not 3, once in CI)."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=wait)

    def _run(self) -> None:
        m = self.model
        fired_at = None  # one report per stall episode
        tick = min(1.0, self.limit / 4)
        while not self._stop.wait(tick):
            multi = self.job is not None and self.job.ranks.active()
            if multi:
                self._answer()
            if m.halted or m.thread is None:
                continue
            last = m.last_progress
            idle = time.monotonic() - last
            if idle < self.limit or fired_at == last:
                continue
            fired_at = last
            job = self.job
            if multi and job is not None and (job.answered_at or 0) > last:
                self._reported_elsewhere(idle)
                continue
            try:
                loader = m.capture.get("loader")
                it = loader() if loader is not None else None
                details = {
                    "idle_seconds": round(idle, 2),
                    "threads": threads.thread_stacks(m.thread),  # (its stack first: told whatever the rest)
                    "dataloader": threads.loader_settings(it) if it is not None else None,
                }
                train = next((t for t in details["threads"] if t["id"] == m.thread), None)
                where = _waits_at(train["stack"] if train else [])
                if multi and job is not None:
                    asked = job.ask(max(3.0, 3 * tick))
                    if asked is None:  # another rank asked too, later: it reports
                        self._reported_elsewhere(idle)
                        continue
                    details["ask_id"], details["ranks"] = asked
                    details["diagnosis"] = diagnose(details["ranks"])
                self.on_stall(self.condition.spec, f"no progress for {idle:.1f}s{where}", details)
            except Exception as e:  # the watchdog must never take the job down
                self.say(f"watchdog failed: {type(e).__name__}: {e}")

    def _reported_elsewhere(self, idle: float) -> None:
        assert self.job is not None
        self.say(f"no progress for {idle:.1f}s; rank {self.job.asker} reports the job's stall")

    def _answer(self) -> None:
        """Answer another rank's ask; end this rank when the job is ended by the one that reported."""
        assert self.job is not None
        try:
            ask = self.job.poll()
        except Exception as e:  # the store is gone (torchrun ended): nobody to answer
            self.say(f"watchdog: cannot reach the job's store: {type(e).__name__}: {e}")
            self.job = None
            return
        if ask is not None and self.on_job_end is not None:
            self.on_job_end(ask["rank"])


def _waits_at(stack: list[dict[str, Any]]) -> str:
    """Where the training thread waits, in words: the user's line, then the function it is
    in when that is torch's or a library's (a stall names the line to look at)."""
    if not stack:
        return ""
    top = stack[-1]
    user = next((f for f in reversed(stack) if is_user_file(f["file"])), None)
    if user is None:
        return f"; the training thread waits in {top['function']} ({top['file']}:{top['line']})"
    inner = f", in {top['function']}" if top is not user else ""
    return f"; the training thread waits at {user['file']}:{user['line']} ({(user.get('code') or '').strip()}){inner}"
