"""`diff ranks`: ask every rank of a job for its parameters' and gradients' fingerprints
(the `replicas` op), a page at a time, all ranks at once, and compare them
(stepdbg/wire/rank_diff.py) until the first tensor whose replicas differ.

The same walk for the console's Job (threads) and the TUI's JobSource (asyncio); a
single process, or one rank attached alone, is answered in one line without asking.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..wire.rank_diff import RankDiff

PAGE = 1024  # fingerprints a rank sends in one answer at most (about 0.5 KB each; the agent
#              ends a page sooner, after about 16M values read)
PROGRESS_AFTER = 2.0  # seconds of walking before each page's progress is said


class RankError(RuntimeError):
    """A rank did not answer: which one, and why (the job not paused, a rank gone)."""


def alone(target: Any) -> dict[str, Any] | None:
    """The answer when `target` holds no replicas to compare (one process, one rank
    attached alone, a job of one live rank), else None."""
    if getattr(target, "many_ranks", False):
        live = target._live()
        if len(live) > 1:
            return None
        why = (f"the job has {len(target.clients)} rank{'s' if len(target.clients) != 1 else ''}, "
               f"{len(live)} of them alive: there are no replicas to compare")
    else:
        session = getattr(target, "session", None) or {}
        world, job = session.get("world_size"), session.get("job_id")
        ranks = getattr(target, "ranks", None)  # in process: the job's own Session
        if not session and ranks is not None and ranks.world() > 1:
            why = (f"this is rank {ranks.rank}'s own console: diff ranks compares every rank's replicas from a "
                   "client attached to the whole job (`stepdbg attach`)")
        elif isinstance(world, int) and world > 1:
            again = f"`stepdbg attach {job}`" if job else "attaching to the whole job"
            why = (f"attached to rank {session.get('rank')} alone: {again} attaches to all {world} ranks, "
                   "where diff ranks compares their replicas")
        else:
            why = "this job is one process: diff ranks compares the replicas of a distributed job's ranks"
    return {"first_divergence": None, "not_compared": why, "summary": f"nothing compared: {why}"}


def _answers(results: dict[int, Any]) -> dict[int, dict[str, Any]]:
    for r, a in results.items():
        if isinstance(a, BaseException):
            raise RankError(f"rank {r}: {a}") from a
    return results


def diff_ranks(job: Any, atol: float = 0.0, rtol: float = 0.0,
               progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Every live rank's replicas compared (a Job, or anything `alone` answers); `progress`
    hears how far it is after each page, once it has taken PROGRESS_AFTER seconds."""
    said = alone(job)
    if said is not None:
        return said
    live, walk, said_at = job._live(), RankDiff(atol, rtol), _Pace(progress)
    start: int | None = 0
    with ThreadPoolExecutor(len(live)) as pool:
        while start is not None:
            futures = {r: pool.submit(job.clients[r].replica_fingerprints, start, PAGE) for r in live}
            start = walk.feed(_answers({r: f.exception() or f.result() for r, f in futures.items()}))
            said_at.tell(walk, start)
    return walk.result()


async def diff_ranks_async(job: Any, atol: float = 0.0, rtol: float = 0.0,
                           progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """diff_ranks for a source of AsyncClients (the TUI's JobSource)."""
    said = alone(job)
    if said is not None:
        return said
    live, walk, said_at = job._live(), RankDiff(atol, rtol), _Pace(progress)
    start: int | None = 0
    while start is not None:
        got = await asyncio.gather(*(job.clients[r].replica_fingerprints(start, PAGE) for r in live),
                                   return_exceptions=True)
        start = walk.feed(_answers(dict(zip(live, got, strict=True))))
        said_at.tell(walk, start)
    return walk.result()


class _Pace:
    """Progress said after each page once the walk has taken PROGRESS_AFTER seconds."""

    def __init__(self, progress: Callable[[str], None] | None) -> None:
        self.progress, self.started = progress, time.monotonic()

    def tell(self, walk: RankDiff, start: int | None) -> None:
        if self.progress is not None and start is not None and time.monotonic() - self.started > PROGRESS_AFTER:
            self.progress(walk.progress())
