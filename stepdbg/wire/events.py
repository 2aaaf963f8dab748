"""Every event pushed to a client, declared once: its name, what its data is, the fields a
front end reads, and one line of doc.

The agent sends them with ``protocol.event(name, data)`` (``check_out`` refuses a name not
declared here); the clients check what arrives (``check_in``: an unknown event or one
without its fields is dropped, never dispatched half-made); front ends dispatch by name
to a table of handlers (tui/job_events.py); docs/protocol.md's events table is
``markdown_table`` (a test keeps it in step). ``lost`` is the clients' own: the
connection ended without an ``exited``. Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Event:
    name: str
    data: str  # what `data` is: "object", "list of objects", "string"
    fields: tuple[str, ...]  # the keys a front end reads (of each object, for a list)
    doc: str
    local: bool = False  # made by the client, never sent by the agent


EVENTS: dict[str, Event] = {e.name: e for e in (
    Event("break", "object", ("step", "phase", "condition", "reason"),
          "a break: also `scalars`, `where`, `details`, `conditions` (as in the report)"),
    Event("paused", "object", ("step", "phase", "condition", "reason"),
          "the training thread waits for a front end (the break it paused at)"),
    Event("resumed", "object", ("step",), "the job runs again"),
    Event("step", "object", ("step",),
          "a step ended: its record (loss, grad_norm, lr, data_wait, step_time, ...), and in `earlier` "
          "the records of the steps since the last step event; at most 10 a second"),
    Event("change", "object", ("what", "step"),
          "a change made to the job (lr, skip, rewind, a breakpoint); `between_steps`: made between steps (`step`, not "
          "begun yet, is the next one's)"),
    Event("finding", "object", ("rule", "message", "advice"), "a diagnostic rule fired (doctor)"),
    Event("replay", "object", ("step", "summary"), "a replay's answer: the replay op's object"),
    Event("output", "list of objects", ("stream", "lines"),
          "the job's stdout/stderr lines, batched (--forward-output)"),
    Event("exited", "object", ("exit_code",),
          "the job ended: also `steps` (how many ran to their end), `in_step` (it ended inside step `steps`), `error` "
          "and `breakpoints` (the breakpoints op's list as the job ended); after a break, `last_break` (the last "
          "break event's object) and `changes_after` (the change events from its step on, the last 20)"),
    Event("lost", "string", (), "the connection ended without `exited`", local=True),
)}


def check_out(name: str) -> str:
    """The name of an event the agent may send (a typo fails where it is made)."""
    if name not in EVENTS or EVENTS[name].local:
        raise ValueError(f"no such event {name!r}; declared: {', '.join(EVENTS)}")
    return name


def check_in(name: Any, data: Any) -> bool:
    """Whether an event that arrived is one declared here with the fields it declares."""
    ev = EVENTS.get(name) if isinstance(name, str) else None
    if ev is None:
        return False
    if ev.data == "string":
        return isinstance(data, str)
    if ev.data == "list of objects" and not isinstance(data, list):
        return False
    items = data if ev.data == "list of objects" else [data]
    return all(isinstance(i, dict) and all(f in i for f in ev.fields) for i in items)


def markdown_table() -> str:
    """docs/protocol.md's events table."""
    rows = ["| event | data | fields read | what it says |", "| --- | --- | --- | --- |"]
    for ev in EVENTS.values():
        fields = ", ".join(f"`{f}`" for f in ev.fields) or "—"
        own = " (the client's own)" if ev.local else ""
        rows.append(f"| `{ev.name}` | {ev.data} | {fields} | {ev.doc}{own} |")
    return "\n".join(rows)


__all__ = ["EVENTS", "Event", "check_in", "check_out", "markdown_table"]
