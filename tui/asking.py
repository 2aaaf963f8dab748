"""A request from the UI, and what a panel does when it is shown.

A request's error becomes a notification on screen, never a crash. A panel fills itself
with ``load(source, status, history)`` when it is shown; the panels the app keeps up to date
from the job's events (Break, Log) load nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, Protocol


class Notifies(Protocol):
    def notify(self, message: str, *, severity: Any = ..., timeout: float | None = ...) -> None: ...


async def ask(where: Notifies, what: str, request: Awaitable[Any]) -> Any:
    """Await one request; its error is shown (`what: the agent's message`) and None returned."""
    try:
        return await request
    except Exception as e:
        where.notify(f"{what}: {getattr(e, 'message', None) or e}", severity="error", timeout=6)
        return None


class Loads:
    """A panel: what it asks the source for when it is shown (nothing, by default)."""

    async def load(self, source: Any, status: dict[str, Any], history: list[dict[str, Any]]) -> None:
        """Kept up to date by the app from the job's events: nothing to ask."""
