"""What the app does with each event its job pushes: the status in the header, the Log
panel's lines and the Break panel. One function, so that `app.py` only routes."""

from __future__ import annotations

import re
from typing import Any

from textual.widgets import TabbedContent

# The agent says these on stderr too; with --forward-output the Log would show each twice.
SAID_AS_EVENTS = re.compile(r"stepdbg(\[rank \d+\])?: (change: |break at step )")


def change_words(data: dict[str, Any]) -> str:
    """A change as one line: 'change at step 41: rewind to_step=40, batches_skipped=2'."""
    fields = ", ".join(f"{k}={v}" for k, v in data.items() if k not in ("what", "step"))
    return f"change at step {data.get('step')}: {data.get('what')} {fields}".rstrip()


def apply(app: Any, event: str, data: Any) -> None:  # noqa: C901 - one branch per event the TUI shows
    if event == "paused":
        app.replay_result = None
        app.status = {**app.status, "state": "paused", "paused": data, "step": data["step"], "phase": data["phase"]}
        # (its reason is the break's, logged just before: the break event comes first)
        app.log_line(f"paused at step {data['step']} ({data['phase']})", "yellow")
        app.query_one(TabbedContent).active = "break"
        app.refresh_all()
    elif event == "resumed":
        app.status = {**app.status, "state": "running", "paused": None}
        app.refresh_break()
    elif event == "output":
        for batch in data or []:
            for line in batch["lines"]:
                if not SAID_AS_EVENTS.match(line):
                    app.log_line(line, "red" if batch["stream"] == "stderr" else "")
    elif event == "change":
        app.log_line(change_words(data), "cyan")
        brk = app.status.get("paused")
        if data.get("what") == "lr" and brk:  # the Break panel shows the LR now beside the one at the break
            app.status = {**app.status, "paused": {**brk, "lr_now": {"lr": data.get("lr"), "pinned": data.get("pinned")}}}
            app.refresh_break()
    elif event == "break":
        app.log_line(f"break at step {data['step']} [{data['condition']}]: {data['reason']}", "magenta")
    elif event == "finding":
        app.findings.append(data)
        app.log_line(f"finding [{data['rule']}]: {data['message']}", "bold red")
        app.refresh_break()
    elif event == "exited":
        code = data.get("exit_code")
        steps = data.get("steps")  # how many ran: the last one's number is one less (the status lags)
        last = steps - 1 if isinstance(steps, int) and steps > 0 else app.status.get("step")
        app.status = {**app.status, "state": f"exited ({code})", "paused": None, "phase": "ended", "step": last}
        app.connection = f"job ended, exit code {code}"
        app.log_line(f"the job ended with exit code {code}", "bold")
        app.refresh_break()
