"""A request from the UI, and what a panel does when it is shown.

A request's error becomes a notification on screen, never a crash. A panel fills itself
with ``load(source, status, history)`` when it is shown; the panels the app keeps up to date
from the job's events (Break, Log) load nothing. Once the job has ended a panel asks nothing:
it says so above what it last showed, and of which step (a visit after the end toasted
`optimizer: Connection lost` and `memory: [Errno 32] Broken pipe`).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, Protocol

from textual.widgets import Static

from .header import last_reached


class Notifies(Protocol):
    def notify(self, message: str, *, severity: Any = ..., timeout: float | None = ...) -> None: ...


async def ask(where: Notifies, what: str, request: Awaitable[Any]) -> Any:
    """Await one request; its error is shown (`what: the agent's message`) and None returned.
    A panel's request after the job's end is not sent: the panel says the job ended. A lost
    connection is not a request's error: it is said once, by the app."""
    panel = where if isinstance(where, Loads) else None
    if panel is not None and panel.job_ended():
        getattr(request, "close", lambda: None)()  # (a coroutine never awaited warns)
        panel.say_ended()
        return None
    try:
        answer = await request
    except ConnectionError:
        # Not this request's own error: the connection closed under it (the job ended, or
        # the link broke). The app says that once, from its events (the header and one
        # toast); each request in flight toasted `locals: the connection to the job closed`
        # and `names: Connection lost` beside the job's end.
        if panel is not None and panel.job_ended():
            panel.say_ended()
        return None
    except Exception as e:
        if panel is not None and panel.job_ended():  # it ended while the request was on its way
            panel.say_ended()
            return None
        where.notify(f"{what}: {getattr(e, 'message', None) or e}", severity="error", timeout=6)
        return None
    if panel is not None:
        panel.answered()
    return answer


class Loads:
    """A panel: what it asks the source for when it is shown (nothing, by default)."""

    seen_step: Any = None  # the job's step when this panel last had an answer

    async def load(self, source: Any, status: dict[str, Any], history: list[dict[str, Any]]) -> None:
        """Kept up to date by the app from the job's events: nothing to ask."""

    def _state(self) -> dict[str, Any]:
        return getattr(getattr(self, "app", None), "status", None) or {}

    def job_ended(self) -> bool:
        return str(self._state().get("state", "")).startswith("exited")

    def says_its_end(self) -> None:
        """(From the panel's on_mount.) Once the job has ended the panel says so above what it
        shows, as it ends, shown or not: the Model, Tensor and Optim panels kept the values of
        the pause without a word, since a panel shown asks nothing till it is shown again."""
        def status_changed(status: dict[str, Any]) -> None:
            if self.job_ended():
                self.say_ended()

        self.watch(self.app, "status", status_changed)  # type: ignore[attr-defined]

    def answered(self) -> None:
        """An answer came: its step is the one shown, as the header names it (the last step
        reached: running between steps the status's step is the next one's, not begun, and
        the note at the end said `step 20` under a header's `step 19`); a note of an earlier
        end goes (a reconnect)."""
        self.seen_step = last_reached(self._state())
        for note in self.query("#ended-note"):  # type: ignore[attr-defined]
            note.remove()

    def say_ended(self) -> None:
        """Above what the panel shows: the job ended, and what it shows is as of which step."""
        state = str(self._state().get("state", "")).replace("exited (", "ended (exit code ")
        if self.seen_step is not None:
            words = f"the job has {state}: this shows step {self.seen_step}, the last step this panel saw"
        else:
            words = f"the job has {state}: this panel was not shown while it ran, so it has nothing to show"
        notes = self.query("#ended-note")  # type: ignore[attr-defined]
        if notes:
            notes.first(Static).update(words)
            return
        note = Static(words, id="ended-note", markup=False)
        note.styles.text_style = "bold"
        # Docked: above the panel whatever its layout (in a Horizontal panel, Model's, a note in
        # the row pushed the table off screen with the focus on it: the long walk, seed 2).
        note.styles.dock = "top"
        note.styles.width = "100%"
        note.styles.height = "auto"
        children = list(self.children)  # type: ignore[attr-defined]
        self.mount(note, before=children[0]) if children else self.mount(note)  # type: ignore[attr-defined]
