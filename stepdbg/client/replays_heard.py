"""A replay another client ran, said at the console once (issue 45, the closing walk of
05:50's 7): `r` in the TUI replayed the step and `stepdbg attach --repl` beside it never said
so. The job sends every replay's answer to every client (the `replay` event); the console
says those it did not ask for itself (its own `r` says its answer: commands._replay). A job's
console (attached to the job: rank 0 in view) heard none: the events of a job come on each
rank's client, which nothing read; each rank's replay is said once, its rank named (the
seventeenth walk's 1)."""

from __future__ import annotations

import queue
from collections import deque
from typing import Any

from ..wire.replay_text import pause_reason, who_asked
from .kept import kept


class Heard:
    """The replays this console asked for: one in flight (`asking`), the answers come."""

    def __init__(self) -> None:
        self.asking = 0
        self.answers: deque[dict[str, Any]] = deque(maxlen=8)

    @staticmethod
    def of(client: Any) -> Heard:
        return kept(client, "_replays_heard", Heard)


def own_replay(target: Any) -> dict[str, Any]:
    """`r` at this console: the replay's answer, its event not said again."""
    heard = Heard.of(target)
    heard.asking += 1
    try:
        result: dict[str, Any] = target.replay()
    finally:
        heard.asking -= 1
    heard.answers.append(result)
    return result


def replays_heard(client: Any) -> list[str]:
    """The replays another client ran since the last look, in words (the client's events,
    which nothing else reads at the console, are taken here); a job's: each rank's, named."""
    if getattr(client, "many_ranks", False):
        return [w for rank, c in enumerate(client.clients) for w in _heard(c, f" on rank {rank}")]
    return _heard(client, "")


def _heard(client: Any, on: str) -> list[str]:
    """One connection's replays another client ran (`on`: the rank it is, in words)."""
    events = client.__dict__.get("events")
    if not isinstance(events, queue.Queue):
        return []
    heard, said = Heard.of(client), []
    while True:
        try:
            msg = events.get_nowait()
        except queue.Empty:
            return said
        data = msg.get("data")
        if msg.get("event") != "replay" or not isinstance(data, dict):
            continue
        if heard.asking or data in heard.answers:  # (this console's own: its answer says it)
            continue
        said.append(replay_words(data, on, who_asked(data)))


def replay_words(data: dict[str, Any], on: str = "", asked: str = "another client asked") -> str:
    """Another client's replay in the console's words: its step, rank, summary and verdict."""
    return (f"replay of step {data.get('step')}{on} ({asked}): {data.get('summary')}"
            + (f"\n{data['verdict']}" if data.get("verdict") else ""))


def replayed_before(paused: dict[str, Any]) -> list[str]:
    """The replay run at this pause before this console attached (the pause's `replayed`), in
    the words of one heard while attached: a REPL attached after the TUI's `r` was told
    `(replay the step to name it)` and nothing of the replay (the eighteenth walk's 5)."""
    data = paused.get("replayed")
    return [replay_words(data, "", f"{who_asked(data)}, before you attached")] if isinstance(data, dict) else []


def pause_words(paused: dict[str, Any]) -> list[str]:
    """A pause at an attached console, in words: its break with its reason as status says it,
    then the replay run at it before the console attached. One place for the piped console
    (console._say_pause) and the terminal's REPL (tui/repl.py), which printed the raw reason,
    `(replay the step to name it)`, and nothing of the TUI's replay (the nineteenth walk's 1)."""
    line = f"paused at step {paused['step']} ({paused['phase']}) [{paused['condition']}]: {pause_reason(paused)}"
    return [line, *replayed_before(paused)]
