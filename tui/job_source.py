"""A distributed job as the app's source: one AsyncClient per rank, one rank in view.

Inspection goes to the rank in view; stepping, LR changes, skip, end and breakpoints go
to every rank (a per-rank LR silently diverges the replicas); pause asks every rank to
stop at the next step boundary past all of them, outside any collective.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from stepdbg.client.connection import Ops
from stepdbg.client.job import RankView, TorchrunLog, gone_note, rank_row
from stepdbg.wire.ops import OPS

from .log_order import SAID
from .rank_breaks import FROM_RANK
from .rank_order import HELD_AT_MOST


class JobSource(RankView, Ops):
    """`torchrun`: what the launcher reads of torchrun's output (exit codes, each rank's
    last lines); None when attached to a job started elsewhere."""

    def __init__(self, clients: list[Any], torchrun: TorchrunLog | None = None) -> None:
        self.clients = clients
        self.current = 0
        self.torchrun = torchrun
        self.replays: dict[int, dict[str, Any]] = {}  # each rank's replay at its pause (rank_replays)
        self._queue: asyncio.Queue[tuple[int, dict[str, Any]]] = asyncio.Queue()
        self._tasks = [asyncio.get_running_loop().create_task(self._pump(r, c)) for r, c in enumerate(clients)]

    async def _pump(self, rank: int, c: Any) -> None:
        async for ev in c.iter_events():
            await self._queue.put((rank, ev))
            if ev.get("event") in ("exited", "lost"):
                return

    async def _relayed(self, c: Any) -> None:
        """Until every line a rank that ended wrote is relayed by the launcher (torchrun
        copies them from its files 0.1 s apart), HELD_AT_MOST at most: its `step 15 loss` came
        after `[rank 0] is gone` (issue 45, the twelfth walk's 2)."""
        caught_up = getattr(self.torchrun, "caught_up", None)
        local = (getattr(c, "session", None) or {}).get("local_rank")
        if caught_up is None or not isinstance(local, int):
            return
        loop = asyncio.get_running_loop()
        until = loop.time() + HELD_AT_MOST
        while not caught_up(local) and loop.time() < until:
            await asyncio.sleep(0.05)

    def switch(self, rank: int) -> None:
        self.current = rank % len(self.clients)

    async def iter_events(self) -> AsyncIterator[dict[str, Any]]:
        while True:
            rank, ev = await self._queue.get()
            name = ev.get("event")
            if name in ("paused", "resumed"):  # (a rank's replay is of its pause: gone with it)
                self.replays.pop(rank, None)
            elif name == "replay" and isinstance(ev.get("data"), dict):  # whoever asked for it
                self.replays[rank] = {**ev["data"], FROM_RANK: rank}
            if name in ("paused", "resumed", "step") and rank != self.current:
                continue  # the view follows one rank; the Ranks panel shows the others
            if name in ("exited", "lost"):
                if all(c.exited is not None for c in self.clients):
                    yield {"type": "event", "event": "exited", "data": self.client.exited}
                    return
                c = self.clients[rank]
                await self._relayed(c)  # (its last lines, its end summary: before it is said gone)
                yield {"type": "event", "event": "output", "data": [
                    {"stream": "stderr", "lines": [f"[rank {rank}] is gone: {gone_note(c.exited or {}, [])}"]}]}
                continue
            if name == "output":
                ev = {**ev, "data": [{**b, "lines": [f"[rank {rank}] {ln}" for ln in b["lines"]]} for b in ev["data"]]}
            elif name in SAID and isinstance(ev.get("data"), dict):  # whose it is: every rank sends its own
                ev = {**ev, "data": {**ev["data"], FROM_RANK: rank}}
            yield ev

    async def call(self, op: str, timeout: float | None = 300, **args: Any) -> Any:  # type: ignore[override]
        to = self._routed(op)
        if OPS[op].resumes:
            for r in to:
                self.clients[r]._forget_pause()
        results = await asyncio.gather(*(self.clients[r].call(op, timeout, **args) for r in to))
        return results[0] if results else None

    def __getattr__(self, name: str) -> Any:  # what is not an op (wait_paused, output_tail): the rank in view's
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.client, name)

    async def replay(self) -> dict[str, Any]:
        live = self._live()
        answers = await asyncio.gather(*(self.clients[r].replay() for r in live), return_exceptions=True)
        self.replays.update({r: {**a, FROM_RANK: r} for r, a in zip(live, answers, strict=True) if isinstance(a, dict)})
        return self._one_replay(dict(zip(live, answers, strict=True)))

    async def pause(self) -> None:
        live = [c for c in self.clients if c.exited is None]
        steps = await asyncio.gather(*(c.status() for c in live))
        n = max(s["step"] for s in steps) + 1
        await asyncio.gather(*(c.pause_at(n) for c in live))

    async def rank_table(self) -> list[dict[str, Any]]:
        async def row(r: int, c: Any) -> dict[str, Any]:
            try:
                st, hist = await asyncio.gather(c.status(), c.get_history(1)) if c.exited is None else (None, [])
            except ConnectionError:
                st, hist = None, []
            return rank_row(r, c, st, hist[-1] if hist else None, self.torchrun)

        return list(await asyncio.gather(*(row(r, c) for r, c in enumerate(self.clients))))

    def ended_rows(self) -> list[dict[str, Any]]:
        """The ranks table once every rank has ended, from each one's record of its end (asks nothing)."""
        return [rank_row(r, c, None, None, self.torchrun) for r, c in enumerate(self.clients)]

    async def close(self, then: str = "stay") -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*(c.close(then=then) for c in self.clients))
