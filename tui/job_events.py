"""What the app does with each event its job pushes: the status in the header, the Log
panel's lines and the Break panel. One function, so that `app.py` only routes."""

from __future__ import annotations

import re
from typing import Any

from textual.widgets import TabbedContent

from stepdbg.client import commands
from stepdbg.wire import stall_text

from .header import last_reached

# The agent says these on stderr too; with --forward-output the Log would show each twice.
SAID_AS_EVENTS = re.compile(r"stepdbg(\[rank \d+\])?: (change: |break at step )")


def change_words(data: dict[str, Any]) -> str:
    """A change as one line, in the console's words: 'change at step 30: LR set to 0.001 and
    pinned (param group 0, was 0.01)', 'change at step 41: breakpoint added: nan'."""
    return f"change at step {data.get('step')}: {commands.change_words(data)}"


def on_paused(app: Any, data: Any) -> None:
    app.replay_result = None
    app.status = {**app.status, "state": "paused", "paused": data, "step": data["step"], "phase": data["phase"]}
    # (its reason is the break's, logged just before: the break event comes first)
    app.log_line(f"paused at step {data['step']} ({data['phase']})", "yellow")
    app.query_one(TabbedContent).active = "break"
    if app.focused is None:  # (not while a line is typed): Down and PageDown scroll the Break panel
        app.action_panel("break")
    app.refresh_all()


def at_attach(app: Any) -> None:
    """Attached to a job paused already: the Log says the break it is paused at, as it would
    have had it seen the pause (it was empty), unless the job's output shown says it."""
    brk = app.status.get("paused")
    if app.status.get("state") != "paused" or not isinstance(brk, dict) or "step" not in brk:
        return
    if not any(SAID_AS_EVENTS.match(line) for _, line in app.log_buffer):
        on_break(app, brk)
    app.log_line(f"paused at step {brk['step']} ({brk.get('phase')})", "yellow")


def on_resumed(app: Any, data: Any) -> None:
    app.status = {**app.status, "state": "running", "paused": None}
    app.refresh_break()


def on_output(app: Any, data: Any) -> None:
    app.output_shown = True
    for batch in data or []:
        stream = batch["stream"]
        for line in batch["lines"]:
            if SAID_AS_EVENTS.match(line):
                app.said_as_event.add(stream)  # and the lines that go on from it ("  at FILE:LINE")
            elif not (stream in app.said_as_event and line.startswith("  ")):
                app.said_as_event.discard(stream)
                app.log_line(line, "red" if stream == "stderr" else "")


def on_change(app: Any, data: Any) -> None:
    app.log_line(change_words(data), "cyan")
    brk = app.status.get("paused")
    if data.get("what") == "lr" and brk:  # the Break panel shows the LR now beside the one at the break
        app.status = {**app.status, "paused": {**brk, "lr_now": {"lr": data.get("lr"), "pinned": data.get("pinned")}}}
        app.refresh_break()


def on_break(app: Any, data: Any) -> None:
    """The break as the job's stderr says it, where it is and a stall's ranks included."""
    where = data.get("where") or {}
    at = [f"  at {where.get('file')}:{where.get('line')}  {where.get('code') or ''}".rstrip()] if where else []
    for line in [f"break at step {data['step']} [{data['condition']}]: {data['reason']}", *at,
                 *(f"  {ln}" for ln in stall_text.report_lines(data.get("details") or {}))]:
        app.log_line(line, "magenta")
    if str(data.get("condition", "")).startswith("stall") and app.status.get("state") != "paused":
        app.action_panel("log")  # (a stall pauses nothing: the Break panel would say "no break yet")


def on_finding(app: Any, data: Any) -> None:
    app.findings.append(data)
    app.log_line(f"finding [{data['rule']}]: {data['message']}", "bold red")
    app.refresh_break()


def on_exited(app: Any, data: Any) -> None:
    code = data.get("exit_code")
    steps = data.get("steps")  # how many ran to their end: the last one's number is one less
    shown = last_reached(app.status)  # (the header's number: the last step reached)
    last = steps - 1 if isinstance(steps, int) and steps > 0 else shown
    if isinstance(shown, int) and (last is None or shown > last):  # ended inside the step shown (an interrupt
        last = shown  # at a pause): the step never goes back
    app.status = {**app.status, "state": f"exited ({code})", "paused": None, "phase": "ended", "step": last}
    app.connection = f"job ended, exit code {code}"
    app.log_line(f"the job ended with exit code {code}", "bold")
    app.refresh_break()


def on_replay(app: Any, data: Any) -> None:
    """A replay of the paused step, whoever asked for it (another client's too: this one
    said `press r to replay` beside it). A job's ranks each send theirs: the rank in view's
    comes here (JobSource)."""
    brk = app.status.get("paused")
    if brk and data.get("step") == brk.get("step") and app.replay_result != data:
        app.replay_result = data
        app.refresh_break()


# Every event of wire/events.py the TUI shows (`step` goes to the plots, `lost` ends the
# connection: app.py routes both); a test checks this table against the declaration.
HANDLERS = {"paused": on_paused, "resumed": on_resumed, "output": on_output, "change": on_change, "break": on_break,
            "finding": on_finding, "exited": on_exited, "replay": on_replay}


def apply(app: Any, event: str, data: Any) -> None:
    handler = HANDLERS.get(event)
    if handler is not None:
        handler(app, data)
