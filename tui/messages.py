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


class StepSummary(Message, bubble=False):
    """The latest step record, with the records before it in ``earlier`` (handled by
    ``on_step_summary``); a newer one not yet handled takes in an older one's records."""

    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__()
        self.data = data

    def records(self) -> list[dict[str, Any]]:
        """Every step record this message carries, oldest first."""
        return [*(self.data.get("earlier") or []), {k: v for k, v in self.data.items() if k != "earlier"}]

    def can_replace(self, message: Message) -> bool:
        if not isinstance(message, StepSummary):
            return False
        older = message.records()  # (the plots must have every step: none is dropped with the message)
        self.data = {**self.data, "earlier": [*older, *(self.data.get("earlier") or [])][-500:]}
        return True


class ConnectionLost(Message):
    """The connection to the job is gone (handled by ``on_connection_lost``)."""

    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason
