"""`stepdbg doctor` and `stepdbg overfit`: run the job's first steps with every rule on,
then show the findings (rich) or print them as JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from stepdbg.wire import files

NARROW = 100  # columns under which the findings are blocks, not a table
SEVERITY_STYLE = {"error": "bold red", "warning": "bold yellow", "info": "cyan"}


def run_doctor(cmd: list[str], env: dict[str, str], report: str | None, opts: dict[str, Any]) -> int:
    """Run the job (its own output passes through), then report. Exit 1 with findings."""
    path = report
    if path is None:
        fd, path = tempfile.mkstemp(prefix="stepdbg-doctor-", suffix=".jsonl")
        os.close(fd)
        config = json.loads(env["STEPDBG_CONFIG"])
        config["report"] = path
        env = {**env, "STEPDBG_CONFIG": json.dumps(config)}
    # With --json, stdout holds the JSON alone: the script's own stdout goes to stderr.
    code = subprocess.call(cmd, env=env, stdout=sys.stderr if opts.get("json") else None)
    events = report_events(path)
    if report is None:
        os.unlink(path)
    findings = sorted((e for e in events if e["event"] == "finding"),
                      key=lambda f: ({"error": 0, "warning": 1, "info": 2}[f["severity"]], f["step"]))
    end = next((e for e in events if e["event"] == "end"), {})
    overfit = next((e for e in events if e["event"] == "overfit"), None)
    if opts.get("json"):
        print(json.dumps({"findings": findings, "steps": end.get("steps"), "exit_code": code, "overfit": overfit}))
    else:
        show(findings, end.get("steps"), code, overfit)
    if code not in (0, None) and not findings:
        return code
    return 1 if findings else 0


def report_events(path: str) -> list[dict[str, Any]]:
    """The report's events, read up to its cap; a line that is not an event (a write cut
    short when the job was killed) is left out."""
    try:
        raw = files.read_capped(path, files.REPORT_LIMIT)
    except (OSError, ValueError) as e:
        print(f"stepdbg: cannot read the report {path}: {e}", file=sys.stderr)
        return []
    events = []
    for line in raw.decode("utf-8", "replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and isinstance(event.get("event"), str):
            events.append(event)
    return events


def show(findings: list[dict[str, Any]], steps: int | None, code: int, overfit: dict[str, Any] | None) -> None:
    console = Console(file=sys.stdout)
    command = "stepdbg overfit" if overfit is not None else "stepdbg doctor"
    if steps is None and overfit is None:  # the agent never reported its end: nothing was watched
        console.print(f"[bold]{command}[/]: no step was watched (the script exited with {code})")
        return
    title = (f"{command}: {len(findings)} finding{'s' if len(findings) != 1 else ''} in {steps} "
             f"step{'s' if steps != 1 else ''}")
    if overfit is not None:
        fits = overfit["reached_near_zero"]
        verdict = next((f for f in findings if f["rule"] == "cannot_overfit"), None)
        words = Text(overfit["verdict"])
        if verdict is not None:  # the verdict is that finding: said once, here, with its advice
            words.append("\ntry: ", style="italic").append(verdict["advice"])
            findings = [f for f in findings if f is not verdict]
            title += ": the one above" + (", and" if findings else "")
        said = f": error cannot_overfit (step {verdict['step']})" if verdict else ""
        console.print(Panel(words, title=f"overfit one batch{said}",
                            style="yellow" if fits is None else "green" if fits else "red"))
        if fits is None:  # nothing was tried: there is nothing more to say
            return
        if verdict is not None and not findings:
            console.print(f"[bold]{title}[/]")
            return
    if console.width < NARROW:  # five columns in 80 broke words in two ('cross_entrop' / 'y')
        console.print(f"[bold]{title}[/]")
        for f in findings:
            console.print(f"[{SEVERITY_STYLE[f['severity']]}]{f['severity']}[/] [bold]{f['rule']}[/] (step {f['step']})")
            _indented(console, Text(f"{f['message']}\n").append("try:", style="italic").append(f" {f['advice']}"))
        return
    table = Table(title=title, show_lines=True, expand=True)
    table.add_column("", width=7)
    table.add_column("rule", style="bold", no_wrap=True)
    table.add_column("step", justify="right")
    # fold, not "…": a long token (a call, a path) is wrapped in full when the width is small
    table.add_column("what was measured", ratio=3, overflow="fold")
    table.add_column("try", ratio=2, overflow="fold")
    for f in findings:
        table.add_row(f"[{SEVERITY_STYLE[f['severity']]}]{f['severity']}[/]", f["rule"], str(f["step"]),
                      f["message"], f["advice"])
    console.print(table)


def _indented(console: Console, text: Text, by: int = 2) -> None:
    """`text` folded between words, each line indented `by` and not padded with spaces to the
    width (rich's Padding filled every line to 80 columns: trailing spaces in a copied summary)."""
    for line in text.wrap(console, console.width - by):
        line.rstrip()
        console.print(Text(" " * by).append_text(line), soft_wrap=True)
