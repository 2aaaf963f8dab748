"""The Log's order for a launched job: a change, a break, a finding or a replay comes
where the job said it, after the lines the job printed before it and before those it
caused (a Ctrl-C's KeyboardInterrupt traceback came first; under torchrun `step 15 loss
nan`, printed before the break, came after `break at step 16`).

A launched job's lines reach the Log by its pipes (under torchrun through torchrun's
copies, tenths of a second late), its events by the socket: which comes first is chance.
The job says each of these events on its stderr too (`stepdbg: change: ...`, under
torchrun `[default0]:stepdbg[rank 0]: break at step ...`): that line is where the event
goes. An event that comes first waits in the Log, and what the Log says after it, for its
line; a line that comes first holds the job's lines after it for its event; never longer
than HELD_AT_MOST, never the job.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .panels import LogPanel
from .rank_order import said_as_event

HELD_AT_MOST = 2.0  # seconds the Log waits for the other half (an event, or the job's line of it)
SAID = {"change", "break", "finding", "replay"}  # the events the job says on its stderr too

Line = tuple[str, str]  # (text, style) of a line the Log writes


class LogOrder:
    """`ahead`: the job's lines of events not come yet (the job's lines after them wait in
    `held`); `behind`: the Log's lines of each event whose line has not come, and what the
    Log said after it."""

    def __init__(self, show: Callable[[Any, str, str], None]) -> None:
        self.show = show  # (app, stream, line): a line of the job's output, in the Log
        self.ahead = 0
        self.showing = False  # a line of the job's output is being shown: it never waits behind an event
        self.held: list[tuple[str, str]] = []  # (stream, line) of the job's output
        self.behind: list[list[Line]] = []

    @staticmethod
    def of(app: Any, show: Callable[[Any, str, str], None]) -> LogOrder:
        order = app.__dict__.get("_log_order")
        if order is None:
            order = app.__dict__["_log_order"] = LogOrder(show)
        return order

    @staticmethod
    def launched(app: Any) -> bool:
        """Started here: its output comes to the Log by pipes (a torchrun job: through torchrun)."""
        return getattr(app, "child", None) is not None or getattr(app.source, "torchrun", None) is not None

    def write(self, app: Any, line: str, style: str) -> None:
        """A line the Log says: after an event waiting for its line, it waits too."""
        if self.behind and not self.showing:
            self.behind[-1].append((line, style))
        else:
            app.query_one(LogPanel).write(line, style)

    def event(self, app: Any, name: str, handler: Callable[[], None]) -> None:
        """Event `name` came: said now if its line came first, else it waits for its line."""
        if name not in SAID or not self.launched(app):
            handler()
        elif self.ahead:
            self.ahead -= 1
            handler()
            if not self.ahead:
                self.release_output(app)
        else:
            first = not self.behind
            self.behind.append([])
            handler()  # (its lines go into its group)
            if first:
                self._wait_for_next(app)

    def output(self, app: Any, stream: str, line: str) -> None:
        """A line of the job's output: the job's own line of an event lets that event's lines
        follow it; after a line of an event not come yet, the lines wait."""
        if self.launched(app) and said_as_event(line):
            if self.behind:
                self._show(app, stream, line)
                self._write(app, self.behind.pop(0))
                self._wait_for_next(app)
                return
            self.ahead += 1
            app.set_timer(HELD_AT_MOST, lambda: self.release_output(app))
            self.held.append((stream, line))
            return
        if self.ahead:
            self.held.append((stream, line))
        else:
            self._show(app, stream, line)

    def release_output(self, app: Any) -> None:
        self.ahead = 0
        held, self.held = self.held, []
        for stream, line in held:
            self._show(app, stream, line)

    def _show(self, app: Any, stream: str, line: str) -> None:
        self.showing = True
        try:
            self.show(app, stream, line)
        finally:
            self.showing = False

    def release_events(self, app: Any, upto: list[Line]) -> None:
        """The events up to `upto` waited long enough (a line the job never said: -q)."""
        while self.behind and any(g is upto for g in self.behind):
            self._write(app, self.behind.pop(0))
        self._wait_for_next(app)

    def _wait_for_next(self, app: Any) -> None:
        """The next event waiting for its line waits HELD_AT_MOST from now, at most."""
        if self.behind:
            app.set_timer(HELD_AT_MOST, lambda g=self.behind[0]: self.release_events(app, g))

    def release(self, app: Any) -> None:
        """Everything held (the job ended)."""
        while self.behind:
            self._write(app, self.behind.pop(0))
        self.release_output(app)

    @staticmethod
    def _write(app: Any, lines: list[Line]) -> None:
        """An event's lines, and what the Log said after it, now (before the next one's)."""
        panel = app.query_one(LogPanel)
        for line, style in lines:
            panel.write(line, style)
