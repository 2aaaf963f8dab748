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
    """The latest step summary (handled by ``on_step_summary``); a newer one replaces an older one."""

    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__()
        self.data = data

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, StepSummary)


class ConnectionLost(Message):
    """The connection to the job is gone (handled by ``on_connection_lost``)."""

    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason
