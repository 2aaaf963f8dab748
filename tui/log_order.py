"""The Log's order for a launched job: a change, a break, a finding or a replay comes
where the job said it, after the lines the job printed before it and before those it
caused (a Ctrl-C's KeyboardInterrupt traceback came first; under torchrun `step 15 loss
nan`, printed before the break, came after `break at step 16`).

A launched job's lines reach the Log by its pipes (under torchrun through torchrun's
copies, tenths of a second late), its events by the socket: which comes first is chance.
The job says each of these events on its stderr too (`stepdbg: change: ...`, under
torchrun `[default0]:stepdbg[rank 0]: break at step ...`): that line is where the event
goes, the line of the rank that sent the event (under torchrun every rank says its own:
paired with the first rank's line, rank 1's line let rank 0's break out before rank 0's
earlier lines, the ninth walk's 6). An event that comes first waits in the Log, and what
the Log says after it, for its line; a line that comes first holds the job's lines after
it for its event; never longer than HELD_AT_MOST, never the job.

An event the job sends after another before any line it prints after it (`then`: the
resume after a Ctrl-C sent at a pause, which the KeyboardInterrupt ends before its
traceback is printed) holds those lines in its turn: the Log said the traceback, then
`resumed at step 50`, then the end (the tenth walk's 3).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .panels import LogPanel
from .rank_order import said_by

HELD_AT_MOST = 2.0  # seconds the Log waits for the other half (an event, or the job's line of it)
SAID = {"change", "break", "finding", "replay"}  # the events the job says on its stderr too

Line = tuple[str, str]  # (text, style) of a line the Log writes
T = TypeVar("T")


@dataclass(eq=False)
class Said:
    """An event's lines in the Log (`after`: what the Log said after it while it waited),
    from the rank that sent it (None: a job of one process). `key`: which of the job's breaks
    it is (rank_breaks.whose), whose first event (`same`) says it for every rank: its words
    go at the first line of any of them (a rank's pause for another's break says none)."""

    rank: int | None
    key: Any = None
    lines: list[Line] = field(default_factory=list)
    after: list[Line] = field(default_factory=list)
    same: Said | None = None
    words_out: bool = False  # its lines are in the Log (its `after` may still wait for its own line)
    written: bool = False
    then: str | None = None  # the event the job sends next, before its next line (expect_next)


@dataclass(eq=False)
class Slot:
    """Where the job's output said an event of `rank`: its event (`said`) goes there; the
    job's lines after it wait for it (`given_up`: waited HELD_AT_MOST)."""

    stream: str
    line: str
    rank: int | None
    said: Said | None = None
    given_up: bool = False
    expects: str | None = None  # no line of the job: the place of event `expects` (a Said's `then`)


class LogOrder:
    """`queue`: the job's lines from the first one of an event not come yet (a Slot), in
    the order the job said them; `waiting`: the events whose line has not come, in the order
    they came; `unsaid`: the events not in the Log yet (waiting, or at their line behind
    another's), in the order they came; `filling`: the event whose handler runs."""

    def __init__(self, show: Callable[[Any, str, str], None]) -> None:
        self.show = show  # (app, stream, line): a line of the job's output, in the Log
        self.queue: list[Slot | tuple[str, str]] = []  # Slots and (stream, line) of the job's output
        self.waiting: list[Said] = []
        self.unsaid: list[Said] = []
        self.filling: Said | None = None
        self.showing = False  # a line of the job's output is being shown: it never waits behind an event
        self.resume_after: str | None = None  # the event this window's resume (R) makes before `resumed`

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
        """A line the Log says: an event's goes with it; after an event of the rank in view
        waiting for its line, it waits too (`paused at step 6` is that rank's: after another
        rank's silent pause for the break it went before rank 0's `step 5 loss`)."""
        in_view = getattr(app.source, "current", None)
        if self.filling is not None and not self.showing:
            self.filling.lines.append((line, style))
        elif not self.showing and (said := next((u for u in reversed(self.unsaid) if u.rank == in_view), None)):
            said.after.append((line, style))
        else:
            app.query_one(LogPanel).write(line, style)

    @staticmethod
    def resuming(app: Any, request: T, after: str | None = None) -> T:
        """`request` resumes the paused job from this window (c, n, s, until N, R): the job sends
        `resumed` before any line it prints after it (the traceback of an uncaught exception
        c let go on), but a launched job's lines come by its pipes and its events by the
        socket: from now, its lines wait for that event (HELD_AT_MOST at most). The Log said
        shape_error's traceback before `resumed` (the closing walk's 21). `after`: the job
        says that event of its own first (a rewind's `change`, at its stderr line), then
        `resumed`: the place is that event's next (expect_next), not the lines before it."""
        order = app.__dict__.get("_log_order")
        if getattr(app.source, "many_ranks", False):  # (each rank resumes and prints on its own: a
            return request  # place for one `resumed` held rank 0's lines past its next break)
        if order is not None and LogOrder.launched(app) and after is not None:
            order.resume_after = after
            app.set_timer(HELD_AT_MOST, lambda: setattr(order, "resume_after", None))  # (refused: none came)
        elif order is not None and LogOrder.launched(app):
            place = Slot("", "", getattr(app.source, "current", None), expects="resumed")
            order.queue.append(place)
            app.set_timer(HELD_AT_MOST, lambda: order._late_line(app, place))
        return request

    def expect_next(self, name: str) -> None:
        """The event whose handler runs is followed, in the job, by event `name` before any
        line the job prints after it: those lines wait for it (HELD_AT_MOST at most)."""
        if self.filling is not None:
            self.filling.then = name

    def _expected(self, app: Any, name: str, handler: Callable[[], None], rank: int | None) -> bool:
        """Event `name`, expected after another's: said at its place (the lines after it
        waited), or, come before that event was said, after it as any line; False if none."""
        for u in self.unsaid:
            if u.then == name and u.rank == rank:
                u.then = None  # (come first: its lines go after that event's, as the Log's lines do)
        slot = next((s for s in self.queue if isinstance(s, Slot) and s.expects == name and s.rank == rank
                     and s.said is None and not s.given_up), None)
        if slot is None:
            return False
        said = slot.said = Said(rank)
        self.filling = said
        try:
            handler()
        finally:
            self.filling = None
        self._flush(app)
        return True

    def event(self, app: Any, name: str, handler: Callable[[], None], rank: int | None = None,
              key: Any = None) -> None:
        """Event `name` of `rank` came: said at its line if that came, else it waits for it."""
        if name not in SAID or not self.launched(app):
            if not (self.launched(app) and self._expected(app, name, handler, rank)):
                handler()
            return
        said = Said(rank, key)
        self.filling = said
        try:
            handler()  # (its lines go into `said`)
            if name == self.resume_after:
                self.resume_after = None
                self.expect_next("resumed")
        finally:
            self.filling = None
        if key is not None and not said.lines:  # (a rank's pause for a break said by another event)
            said.same = next((u for u in self.unsaid if u.key == key and u.lines), None)
        self.unsaid.append(said)
        slot = next((s for s in self.queue if isinstance(s, Slot) and s.rank == rank and s.said is None
                     and not s.given_up), None)
        if slot is not None:
            slot.said = said
            self._flush(app)
            return
        self.waiting.append(said)
        app.set_timer(HELD_AT_MOST, lambda: self._late_event(app, said))

    def output(self, app: Any, stream: str, line: str) -> None:
        """A line of the job's output: the job's own line of an event lets that event's lines
        follow it (its rank's event); after a line of an event not come yet, the lines wait."""
        said, rank = said_by(line)
        if not (said and self.launched(app)):
            if self.queue:
                self.queue.append((stream, line))
            else:
                self._show(app, stream, line)
            return
        slot = Slot(stream, line, rank, next((w for w in self.waiting if w.rank == rank), None))
        if slot.said is not None:
            self.waiting.remove(slot.said)
        self.queue.append(slot)
        if slot.said is None:
            app.set_timer(HELD_AT_MOST, lambda: self._late_line(app, slot))
        self._flush(app)

    def _flush(self, app: Any) -> None:
        """The job's lines and events in their order, up to the first event not come."""
        while self.queue:
            item = self.queue[0]
            if isinstance(item, Slot):
                if item.said is None and not item.given_up:
                    return
                if item.expects is None:
                    self._show(app, item.stream, item.line)
                if item.said is not None:
                    self._write(app, item.said)
                    if item.said.then is not None:  # the job's lines after it wait for its next event
                        place = Slot("", "", item.rank, expects=item.said.then)
                        self.queue.insert(1, place)
                        app.set_timer(HELD_AT_MOST, lambda p=place: self._late_line(app, p))
            else:
                self._show(app, *item)
            self.queue.pop(0)

    def _late_line(self, app: Any, slot: Slot) -> None:
        """A line whose event did not come in HELD_AT_MOST: the lines after it go on."""
        if slot.said is None:
            slot.given_up = True
            self._flush(app)

    def _late_event(self, app: Any, said: Said) -> None:
        """An event whose line did not come in HELD_AT_MOST (-q), and those before it: now."""
        if said in self.waiting:
            upto = self.waiting.index(said) + 1
            for before in self.waiting[:upto]:
                self._write(app, before)
            del self.waiting[:upto]

    def _show(self, app: Any, stream: str, line: str) -> None:
        self.showing = True
        try:
            self.show(app, stream, line)
        finally:
            self.showing = False

    def release(self, app: Any) -> None:
        """Everything held (the job ended)."""
        for slot in self.queue:
            if isinstance(slot, Slot):
                slot.given_up = True
        self._flush(app)
        for said in self.waiting:
            self._write(app, said)
        self.waiting = []

    def _write(self, app: Any, said: Said) -> None:
        """An event's lines, and what the Log said after it, now (before the next one's): the
        words of the job's break it is first, at the first line of any rank's event of it
        (`paused at step 6`, rank 0's, came before rank 1's break, or after rank 0's `step 5
        loss` went after both)."""
        if said.written:
            return
        panel = app.query_one(LogPanel)
        for words in (said.same, said):
            if words is not None and not words.words_out:
                words.words_out = True
                for line, style in words.lines:
                    panel.write(line, style)
        said.written = True
        if said in self.unsaid:
            self.unsaid.remove(said)
        for line, style in said.after:
            panel.write(line, style)
