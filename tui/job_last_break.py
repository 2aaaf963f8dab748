"""The job's last break and what was done after it, for the Break panel at the end (issue 45,
the closing walk of 05:50's 28): after a run that broke and rewound (corrupt_shard with
--on-break rewind) the panel said only `the job ended (exit code 0)`; the break and the
rewind were in the Log alone. Kept from the job's own records as they come: its break event,
the change events (a rewind, a skip) that followed it, and the replay of its step (after `r`,
`t`, `c` under torchrun the end said `(replay the step to name it)` and nothing of the replay's
`xb ... dataset index 201`: the seventeenth walk's 2)."""

from __future__ import annotations

from typing import Any

from stepdbg.client.kept import kept
from stepdbg.wire.change_text import change_line
from stepdbg.wire.replay_text import replayed

from .rank_breaks import FROM_RANK, whose

DONE = ("rewind", "skip")  # the changes that are what was done about a break


class LastBreak:
    brk: dict[str, Any] | None = None
    done: list[dict[str, Any]]  # the changes (job's change records) done about it
    replay: dict[str, Any] | None = None  # the replay of its step (a job's: the rank that broke's, if it came)
    late: bool = False  # `brk` is the job's status's at the attach: what was done before it, the end says

    def __init__(self) -> None:
        self.done = []

    @staticmethod
    def of(app: Any) -> LastBreak:
        return kept(app, "_last_break", LastBreak)

    def broke(self, brk: dict[str, Any]) -> None:
        self.brk, self.done, self.late = brk, [], False
        if self.replay is not None and self.replay.get("step") != brk.get("step"):  # (a break of another step)
            self.replay = None

    def replayed(self, replay: dict[str, Any]) -> None:
        """A replay (any client's, any rank's): kept when it is of the last break's step; in a
        job, the rank that broke's (it names the producer; the others' own steps made none)."""
        if self.brk is None or replay.get("step") != self.brk.get("step"):
            return
        broke = whose(self.brk)[1]
        if self.replay is None or replay.get(FROM_RANK) == broke or self.replay.get(FROM_RANK) != broke:
            self.replay = replay

    def at_the_end(self, end: dict[str, Any]) -> None:
        """The job's own record of its last break, as its end carries it, where this window
        attached after that break's event (it said only `the job ended`), or the status told
        it at the attach (the changes made about it before then are the end's to say)."""
        brk = end.get("last_break")
        if (self.brk is None or self.late) and isinstance(brk, dict):
            self.broke(brk)
            for change in end.get("changes_after") or []:
                if isinstance(change, dict):
                    self.changed(change)

    def changed(self, change: dict[str, Any]) -> None:
        if self.brk is not None and change.get("what") in DONE:
            self.done.append(change)

    def words(self, history: list[dict[str, Any]] | None = None) -> list[str]:
        """`the last break: step 41 (before_backward) [nan]: ... at FILE:LINE` (its ask for a
        replay, once one ran, pointing at it: the Break panel shows `replay` under it) and what
        was done (`then: change at step 41: rewind to ...`); none before a break. `history`:
        the job's step records, once it has ended: a skip is said as they have it (`was
        skipped`; it said `will be skipped` after the end)."""
        b = self.brk
        if b is None:
            return []
        w = b.get("where") or {}
        at = f" at {str(w.get('file', '')).rsplit('/', 1)[-1]}:{w.get('line')}" if w else ""
        reason = replayed(str(b.get("reason")), "the replay below") if self.replay else b.get("reason")
        return [f"the last break: step {b.get('step')} ({b.get('phase')}) [{b.get('condition')}]: {reason}{at}",
                *(f"then: {change_line(_told(d, history))}" for d in self.done)]


def _told(change: dict[str, Any], history: list[dict[str, Any]] | None) -> dict[str, Any]:
    """A skip, after the end (`history` given): whether its step's record says it was skipped."""
    if history is None or change.get("what") != "skip":
        return change
    record = next((r for r in reversed(history) if r.get("step") == change.get("target_step")), None)
    return {**change, "done": None if record is None else bool(record.get("skipped"))}
