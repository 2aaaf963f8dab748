"""One rank of a torch.distributed job: how the ranks agree where to pause (or rewind), and the
process-group timeout that must not kill a paused job.

Pausing every rank "now" leaves them at different steps (one inside an all-reduce). So a
rank that breaks writes a pause request to the job's own store (the one
torch.distributed created) naming a step, and every rank pauses at that step's
`before_optimizer_step`: after the backward's gradient all-reduce, before the update,
outside any collective. A break seen before the step's backward names this step (no
rank can finish the all-reduce without the breaking rank); a later one names the next.
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import timedelta
from typing import Any

from stepdbg.wire.numbers import env_int

KEY = "stepdbg/pause"
NODE_KEY = "stepdbg/node/"
END_KEY = "stepdbg/end"  # a rank that ends the job says so here (announce_end)
EARLY_PHASES = ("before_forward", "after_forward", "before_backward", "forward")
PAUSED_TIMEOUT = timedelta(days=7)


class Ranks:
    def __init__(self) -> None:
        import torch.distributed as dist

        self.job_timeout: timedelta | None = None  # what init_process_group was given
        self._timeouts: list[tuple[float, timedelta | None]] = []  # (monotonic time, new timeout; None: default)
        self._raised = False
        self._handled: str | None = None
        self._d = dist if dist.is_available() else None
        self._world: int | None = None
        self._joins: dict[tuple[str, int], int] = {}  # (what, step) -> how many times this rank joined

    def _dist(self) -> Any:
        return self._d

    def active(self) -> bool:
        """A process group with more than one rank exists (asked every step: kept cheap)."""
        d = self._d
        if d is None or not d.is_initialized():
            self._world = None
            return False
        if self._world is None:
            self._world = d.get_world_size()
            if self._world > 1:
                self._publish_node()
        return self._world > 1

    def world(self) -> int:
        return (self._world or 1) if self.active() else env_int("WORLD_SIZE", 1) or 1

    def _publish_node(self) -> None:
        """Say in the store which node this rank runs on, so that a client that reached
        one node finds the others (once, when the process group is first seen)."""
        try:
            from stepdbg.wire.sessions import node_name

            self._store().set(f"{NODE_KEY}{self._dist().get_rank()}", node_name())
        except Exception:  # a job without a usable store still trains; attach reaches this node only
            pass

    def nodes(self) -> dict[int, str]:
        """rank -> node name, for the ranks that have said so."""
        if not self.active():
            return {}
        store = self._store()
        keys = [(r, f"{NODE_KEY}{r}") for r in range(self.world())]
        return {r: store.get(k).decode() for r, k in keys if store.check([k])}

    @property
    def rank(self) -> int:
        return self._dist().get_rank() if self.active() else env_int("RANK", 0) or 0

    def _store(self) -> Any:
        from torch.distributed import distributed_c10d

        return distributed_c10d._get_default_store()

    def request_pause(self, step: int, phase: str, reason: str, condition: str, kind: str = "pause",
                      **extra: Any) -> int:
        """Ask every rank to pause (or, with kind "rewind", to rewind to the snapshot
        `extra["to_step"]` where that step ends); returns the step they will do it at."""
        target = step if phase in EARLY_PHASES else step + 1
        req = {"step": target, "rank": self.rank, "reason": reason, "condition": condition,
               "broke_at": step, "id": uuid.uuid4().hex, "kind": kind, **extra}
        store = self._store()
        store.set(KEY, json.dumps(req))
        # TCPStore's set is sent with no answer: under load the store may serve another
        # rank's check (made after this rank's collectives) before it. A round trip on the
        # same connection returns once the set is applied, before this rank goes on.
        store.check([KEY])
        return target

    def join(self, what: str, step: int, timeout: float) -> str | None:
        """Wait until every rank joined `what` at this pause (the n-th time this rank asks at
        `step`); None when all did, else which ranks did not, after `timeout` seconds. The
        store is polled: the training thread never waits on a collective that might not come."""
        n = self._joins[(what, step)] = self._joins.get((what, step), 0) + 1
        key, store, world = f"stepdbg/{what}/{step}/{n}", self._store(), self.world()
        store.set(f"{key}/{self.rank}", "1")
        deadline = time.monotonic() + timeout
        while True:
            missing = [r for r in range(world) if not store.check([f"{key}/{r}"])]
            if not missing or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        if not missing:
            return None
        store.delete_key(f"{key}/{self.rank}")  # the next ask here is the n-th again, for every rank
        self._joins[(what, step)] = n - 1
        return f"rank{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))} did not join in {timeout:g}s"

    def agree(self, what: str, step: int, ready: bool, timeout: float) -> bool:
        """Every rank says whether it is `ready` for `what` at this pause; True on every rank
        when all are, else False on every rank. Rank 0 decides (a rank that finds the others'
        answers itself could go while one that timed out does not: a collective then waits
        for ever); the others wait for its word, a little longer than it waits for theirs."""
        n = self._joins[(what, step)] = self._joins.get((what, step), 0) + 1
        key, store, world = f"stepdbg/{what}/{step}/{n}", self._store(), self.world()
        store.set(f"{key}/{self.rank}", "1" if ready else "0")
        deadline = time.monotonic() + timeout
        if self.rank == 0:
            names = [f"{key}/{r}" for r in range(world)]
            while not store.check(names) and time.monotonic() < deadline:
                time.sleep(0.02)
            go = store.check(names) and all(store.get(k) == b"1" for k in names)
            store.set(f"{key}/decision", "go" if go else "no")
            store.check([f"{key}/decision"])  # (applied before this rank goes on: see request_pause)
            return go
        deadline += 5.0
        while not store.check([f"{key}/decision"]):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return store.get(f"{key}/decision") == b"go"

    def announce_end(self, reason: str, exit_code: int) -> None:
        """This rank ends the job (abort, a client's end): said in the store before it exits,
        so that the others, whose next collective then fails, end with one line (ended_by)."""
        if not self.active():
            return
        store = self._store()
        store.set(END_KEY, json.dumps({"rank": self.rank, "reason": reason, "exit_code": exit_code}))
        store.check([END_KEY])  # (a round trip: the set is applied before this rank exits)

    def ended_by(self) -> dict[str, Any] | None:
        """Another rank's announce_end ({rank, reason, exit_code}), or None."""
        if not self.active():
            return None
        store = self._store()
        if not store.check([END_KEY]):
            return None
        end = json.loads(store.get(END_KEY))
        return end if end.get("rank") != self.rank else None

    def due(self, step: int) -> dict[str, Any] | None:
        """The pause request this rank must honour at this step, once (a store round trip)."""
        store = self._store()
        if not store.check([KEY]):
            return None
        req = json.loads(store.get(KEY))
        if req["id"] == self._handled or req["step"] > step:
            return None
        self._handled = req["id"]
        return req

    def job_started(self, timeout: timedelta | None) -> None:
        """init_process_group was called with this timeout (None: the backend's default)."""
        self.job_timeout = timeout
        self._changed(timeout)

    def _changed(self, timeout: timedelta | None) -> None:
        self._timeouts = [*self._timeouts[-15:], (time.monotonic(), timeout)]

    def timeout_at(self, started: float) -> float | None:
        """Seconds of collective timeout for a collective started at `started` (monotonic):
        `_set_pg_timeout` only changes collectives started after it."""
        if not self.active():
            return None
        current = self.job_timeout
        for when, value in self._timeouts:
            if when <= started:
                current = value
        if current is None:
            from torch.distributed import distributed_c10d

            current = distributed_c10d._get_default_timeout(self._dist().get_backend())
        return current.total_seconds()

    def raise_timeout(self) -> float | None:
        """Collectives started from now on wait (almost) forever: a paused rank must not
        make the others' all-reduce time out and kill the job. The new timeout in seconds,
        None when nothing changed."""
        if not self.active() or self._raised:
            return None
        from torch.distributed import distributed_c10d

        distributed_c10d._set_pg_timeout(PAUSED_TIMEOUT)
        self._raised = True
        self._changed(PAUSED_TIMEOUT)
        return PAUSED_TIMEOUT.total_seconds()

    def restore_timeout(self) -> float | None:
        """The job's own collective timeout again (no front end is left); its seconds, None
        when nothing changed."""
        if not self._raised or not self.active():
            return None
        from torch.distributed import distributed_c10d

        backend = self._dist().get_backend()
        timeout = self.job_timeout or distributed_c10d._get_default_timeout(backend)
        distributed_c10d._set_pg_timeout(timeout)
        self._raised = False
        self._changed(self.job_timeout)
        return timeout.total_seconds()
