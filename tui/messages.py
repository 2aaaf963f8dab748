"""The Textual messages the app gets from its source's events (one worker turns wire
events into these; widgets react to them and never touch the connection)."""

from __future__ import annotations

from typing import Any

from textual.message import Message


class JobEvent(Message):
    """A pushed event from the agent (handled by ``on_job_event``)."""

    def __init__(self, event: str, data: Any) -> None:
        super().__init__()
        self.event = event
        self.data = data


HISTORY_KEPT = 500  # step records the app keeps (the plots' width; the agent's step event carries as many)


def with_records(history: list[dict[str, Any]], records: list[dict[str, Any]],
                 kept: int = HISTORY_KEPT) -> list[dict[str, Any]]:
    """`history` with `records` (oldest first) in place of the ones from their first step on
    (a rewind runs steps again: they replace theirs), the last `kept` of them."""
    history, records = step_records(history), step_records(records)
    if not records:
        return history
    return ([h for h in history if h["step"] < records[0]["step"]] + records)[-kept:]


def step_records(items: Any) -> list[dict[str, Any]]:
    """The step records of an answer or an event from the job: dicts with an int `step`. The
    job is the user's own process: anything else in them is dropped, never raised in the TUI."""
    return [r for r in items if isinstance(r, dict) and type(r.get("step")) is int] if isinstance(items, list) else []


class StepSummary(Message, bubble=False):
    """The latest step record, with the records before it in ``earlier`` (handled by
    ``on_step_summary``); an older one not yet handled gives its records to the newer one
    that replaces it."""

    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__()
        self.data = data if isinstance(data, dict) else {}  # (the job's word: step_records)

    def records(self) -> list[dict[str, Any]]:
        """Every step record this message carries, oldest first."""
        return step_records([*step_records(self.data.get("earlier")),
                             {k: v for k, v in self.data.items() if k != "earlier"}])

    def can_replace(self, message: Message) -> bool:
        # Textual 8 asks the message it is about to handle (`self`, the older) whether the
        # next one queued (`message`, the newer) may take its place, then drops `self`: its
        # records go into the newer one, or the plots lose those steps.
        if not isinstance(message, StepSummary):
            return False
        message.data = {**message.data, "earlier": [*self.records(), *step_records(message.data.get("earlier"))][-HISTORY_KEPT:]}
        return True


class ConnectionLost(Message):
    """The connection to the job is gone (handled by ``on_connection_lost``)."""

    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason
