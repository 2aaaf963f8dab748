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
        app.log_line(f"paused at step {data['step']} ({data['phase']}): {data['reason']}", "yellow")
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
    elif event == "break":
        app.log_line(f"break at step {data['step']} [{data['condition']}]: {data['reason']}", "magenta")
    elif event == "finding":
        app.findings.append(data)
        app.log_line(f"finding [{data['rule']}]: {data['message']}", "bold red")
        app.refresh_break()
    elif event == "exited":
        code = data.get("exit_code")
        app.status = {**app.status, "state": f"exited ({code})", "paused": None, "phase": "ended"}
        app.connection = f"job ended, exit code {code}"
        app.log_line(f"the job ended with exit code {code}", "bold")
        app.refresh_break()
