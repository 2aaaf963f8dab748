"""Each rank's replay under its own rank (issue 45, the closing walk's 4). `r` replays the
paused step on every rank of a job, and each rank answers for its own step; the Break panel
showed one answer, the one that names a producer (rank 1's, the rank that broke), on rank 0's
panel with no rank named, and on rank 1's `press r to replay` (the answer was dropped at `t`);
`r` again replayed every rank again, saying nothing.

Here: the replay the Break panel shows, the rank in view's own (JobSource.replays: each rank's
replay at its pause, from its answer or its event, whoever asked), and what `r` does at a
pause whose replay ran already: it says so, and a second `r` replays again."""

from __future__ import annotations

from typing import Any

from stepdbg.wire.rank_words import ranks_words

from .rank_breaks import FROM_RANK


def _replays(app: Any) -> dict[int, dict[str, Any]] | None:
    """Each rank's replay at its pause (a job's source), None for a single process."""
    replays = getattr(app.source, "replays", None) if getattr(app.source, "many_ranks", False) else None
    return replays if isinstance(replays, dict) else None


def _of_this_pause(app: Any) -> dict[int, dict[str, Any]]:
    """The replays of the step paused at, by rank."""
    step = (app.status.get("paused") or {}).get("step")
    return {r: a for r, a in (_replays(app) or {}).items() if a.get("step") == step}


def shown(app: Any) -> dict[str, Any] | None:
    """The replay the Break panel shows: in a job, the rank in view's own at this pause (its
    rank named: FROM_RANK); a single process's last one (answered, or pushed: app.replay_result)."""
    if _replays(app) is None:
        answered: dict[str, Any] | None = app.replay_result
        return answered
    return _of_this_pause(app).get(app.source.current)


def named(replay: dict[str, Any]) -> str:
    """`replay on rank 1: ` for a rank's replay, `replay: ` for a single process's."""
    rank = replay.get(FROM_RANK)
    return f"replay on rank {rank}: " if rank is not None else "replay: "


class _Offered:
    """The pause at which `r` said that its step was replayed already (the next `r` there runs)."""

    at: tuple[Any, ...] | None = None


def _pause_key(app: Any) -> tuple[Any, ...]:
    brk = app.status.get("paused") or {}
    return brk.get("step"), brk.get("phase"), brk.get("at"), app.source.current


def replayed_already(app: Any) -> bool:
    """At `r`: whether this pause's step was replayed on the rank in view, said in words with
    what a second `r` does (True: the caller replays nothing now); the second `r` replays."""
    if _replays(app) is None:  # (a single process: r replays)
        return False
    done = _of_this_pause(app)
    offered: _Offered = app.__dict__.setdefault("_replay_offered", _Offered())
    if app.source.current not in done or offered.at == _pause_key(app):
        offered.at = None
        return False
    offered.at = _pause_key(app)
    ranks = ranks_words(sorted(done))
    app.refuse(f"step {(app.status.get('paused') or {}).get('step')} was replayed at this pause on {ranks}: "
               f"each rank's answer is on its Break panel (t switches ranks); r again replays it on every rank",
               severity="information")
    return True
