"""What the app does with each event its job pushes: the status in the header, the Log
panel's lines and the Break panel. One function, so that `app.py` only routes."""

from __future__ import annotations

import signal
from typing import Any

from textual.widgets import Input, TabbedContent

from stepdbg.client.kept import kept
from stepdbg.wire import stall_text
from stepdbg.wire.change_text import change_line
from stepdbg.wire.last_step import last_of_end
from stepdbg.wire.replay_text import who_asked

from . import pause_words
from .dialogs import ChoiceScreen
from .header import last_reached
from .job_last_break import LastBreak
from .log_order import LogOrder
from .rank_breaks import FROM_RANK, RankBreaks, whose
from .rank_order import said_as_event, source_of


def change_words(data: dict[str, Any]) -> str:
    """A change as one line, in the console's words: 'change at step 30: LR set to 0.001 and
    pinned (param group 0, was 0.01)'; made between steps, 'change after step 2: ...', as the
    header says it (wire/change_text.change_line: the job's own record says where it was)."""
    return change_line(data)


def on_paused(app: Any, data: Any) -> None:
    app.replay_result = None
    app.status = {**app.status, "state": "paused", "paused": data, "step": data["step"], "phase": data["phase"],
                  "pausing": None, "ending": None}
    # (its reason is the break's, logged just before: the break event comes first)
    app.log_line(f"paused at step {data['step']} ({data['phase']}){_with_every_rank(app, data)}", "yellow")
    follow_job(app)
    if isinstance(app.focused, Input):  # a field being typed in keeps the focus and its panel: the rest
        pause_words.say_in_field(app, data)  # of the typing stays in the field, not run as keys (walk 4,
        app.refresh_all()  # item 1); the pause and why are said under it while the job is paused (a toast goes)
        return
    # The Break panel, its focus on it in the same call (Down and PageDown scroll it): a tab
    # switched alone left the focus on the table of the panel hidden (7), and Textual, hiding
    # it, gave the focus to that panel's add box, which showed its panel again (slow_loader
    # stayed on Breaks; lr_explode, the race won, jumped): one rule, a field's focus alone keeps it.
    if len(app.screen_stack) > 1:  # a dialog on top keeps its focus (set on the main screen's panel,
        app.screen_stack[0].query_one(TabbedContent).active = "break"  # it showed nowhere): the tab alone
    else:
        app.action_panel("break")
    app.refresh_all()


def _with_every_rank(app: Any, data: dict[str, Any]) -> str:
    """Where the ranks paused, in a job of many: a rank's break is said where it was found
    (`at ddp_nan.py:45 loss.backward()`) and every rank pauses at the next place they can
    meet, its line another (the nineteenth walk: the Log's 45 beside the Break panel's 46)."""
    w = data.get("where")
    if not getattr(app.source, "many_ranks", False) or not isinstance(w, dict) or not w.get("line"):
        return ""
    return f" at {str(w.get('file', '')).rsplit('/', 1)[-1]}:{w['line']}, with every rank"


# A served job whose output the window does not get (not started here, no --forward-output): the
# Log says once, at the attach, where its prints go (the eighteenth walk's leftovers, 5).
SERVED_OUTPUT = ("the job's own output (its prints) goes to the terminal that started it, not to this Log "
                 "(a job started by stepdbg serve --forward-output sends it here)")  # (`served from`: a launched
# job's attached window said so too, the twentieth walk's 9)


def at_attach(app: Any) -> None:
    """Attached to a job paused already: the Log says the break it is paused at, as it would
    have had it seen the pause (it was empty), unless the job's output shown says it; a job's
    Break panel has each rank's pause (rank_breaks: the numbers of the rank that broke).
    Attached while it runs after a break, the Log says that break (the job's status: its
    `last_break`), and the Break panel says it as the last; and either way the replay of its
    step another client ran (`last_break`'s `replay`; paused, the pause's `replayed`): a late
    window said `no break yet`, and nothing of the replay (the walk of 08:30's 2)."""
    RankBreaks.of(app).attached(getattr(app.source, "clients", None) or [])
    if app.child is None and not app.output_shown and app.source.session.get("forward_output") is False:
        app.log_line(SERVED_OUTPUT, "dim")  # (said nowhere: a newcomer waited for the prints in the Log)
    brk, last = app.status.get("paused"), app.status.get("last_break")
    paused = app.status.get("state") == "paused" and isinstance(brk, dict) and "step" in brk
    told = any(said_as_event(line) for _, line in app.log_buffer)  # (the job's output shown says it)
    told_here = brk if paused else last if isinstance(last, dict) and "step" in last else None
    if told_here is not None and not told:
        on_break(app, told_here)
        LastBreak.of(app).late = True  # (what was done about it before this window came: the end's record says)
    if paused:
        app.log_line(f"paused at step {brk['step']} ({brk.get('phase')})", "yellow")
    replay = told_here.get("replayed" if paused else "replay") if told_here is not None else None
    if isinstance(replay, dict) and not told:  # (paused: the one at this pause)
        on_replay(app, replay)


def on_resumed(app: Any, data: Any) -> None:
    # Resumed from an uncaught exception's break, the job is ending: the exception goes on
    # (the header said `before_forward · RUNNING`, and s `not paused` of a job that ends)
    brk = app.status.get("paused") or {}
    ending = ((brk.get("details") or {}).get("exception") or "exception") if brk.get("phase") == "exception" else None
    app.status = {**app.status, "state": "running", "paused": None, "pausing": None, "ending": ending}
    app.log_line(pause_words.resumed_words(brk, data or {}), "yellow")  # (c said nothing; R only a toast)
    follow_job(app)
    app.refresh_break()


def on_output(app: Any, data: Any) -> None:
    app.output_shown = True
    order = LogOrder.of(app, _show_line)
    for batch in data or []:
        for line in batch["lines"]:
            order.output(app, batch["stream"], line)


def log_line(app: Any, line: str, style: str = "") -> None:
    """A line the Log says (app.log_line), in its place (log_order)."""
    LogOrder.of(app, _show_line).write(app, line, style)


def _show_line(app: Any, stream: str, line: str) -> None:
    """A line of the job's output, unless the Log says it in its own words: the agent's line
    of an event (said on stderr too, under torchrun after `[default0]:`) and the lines that go
    on from it ("  at FILE:LINE"), per writer (a torchrun rank's lines interleave with others')."""
    writer, text = source_of(stream, line)
    if said_as_event(line):
        app.said_as_event.add(writer)
    elif not (writer in app.said_as_event and text.startswith("  ")):
        app.said_as_event.discard(writer)
        app.log_line(line, "red" if stream == "stderr" else "")


def on_change(app: Any, data: Any) -> None:
    app.log_line(change_words(data), "cyan")
    LastBreak.of(app).changed(data)  # (a rewind, a skip: what was done, said at the end)
    if data.get("what") == "interrupt" and app.status.get("state") == "paused":  # the pause ends first:
        LogOrder.of(app, _show_line).expect_next("resumed")  # its `resumed` before the traceback
    brk = app.status.get("paused")
    if data.get("what") == "lr" and brk:  # the Break panel says the LR set (the job's status says it at an attach)
        app.status = {**app.status, "paused": {**brk, "lr_now": data}}
        app.refresh_break()
    elif data.get("what") == "skip" and brk:  # and the skip asked (the job's status says it at an attach)
        app.status = {**app.status, "paused": {**brk, "skip_step": data.get("target_step")}}
        app.refresh_break()
    elif str(data.get("what")).startswith("break_") and app.active_panel() == "breakpoints":
        app.load_panel("breakpoints")  # (another client's `break off nan`: the table shown kept the old rows)


def on_break(app: Any, data: Any) -> None:
    """The break as the job's stderr says it, where it is and a stall's ranks included; once
    a break of the job, which rank broke named (rank_breaks: every rank says its pause for it)."""
    if not RankBreaks.of(app).first_time(data):
        return
    LastBreak.of(app).broke(data)
    where = data.get("where") or {}
    at = [f"  at {where.get('file')}:{where.get('line')}  {where.get('code') or ''}".rstrip()] if where else []
    rank = whose(data)[1]
    on = f" on rank {rank}" if rank is not None else ""
    for line in [f"break at step {data['step']} [{data['condition']}]{on}: {data['reason']}", *at,
                 *(f"  {ln}" for ln in stall_text.report_lines(data.get("details") or {}))]:
        app.log_line(line, "magenta")
    if str(data.get("condition", "")).startswith("stall") and app.status.get("state") != "paused":
        app.action_panel("log")  # (a stall pauses nothing: the Break panel would say "no break yet")


def on_finding(app: Any, data: Any) -> None:
    """A finding, once for the job, naming the rank that found it (a job of many ranks: each
    sends its own, and the Log said the same finding once per rank), as a break is said."""
    if not RankBreaks.of(app).first_finding(data):
        return
    app.findings.append(data)
    rank = data.get(FROM_RANK)
    app.log_line(f"finding [{data['rule']}]{f' on rank {rank}' if rank is not None else ''}: {data['message']}",
                 "bold red")
    app.refresh_break()


def on_exited(app: Any, data: Any) -> None:
    LogOrder.of(app, _show_line).release(app)  # (the job's lines before its end: none held past it)
    LastBreak.of(app).at_the_end(data)  # (a window attached after the last break: the job's record of it)
    code = data.get("exit_code")
    last = last_of_end(data, last_reached(app.status))  # (the header's number: the last reached)
    app.status = {**app.status, "state": f"exited ({code})", "paused": None, "phase": "ended", "step": last,
                  "pausing": None}
    killed = data.get("killed_by")  # (a launched job's, as its parent saw it: its agent said nothing)
    app.connection = f"job killed by {killed}, exit code {code}" if killed else f"job ended, exit code {code}"
    app.log_line(f"the job was {ended_words(-(code - 128))}" if killed else f"the job ended with exit code {code}",
                 "bold")
    follow_job(app)
    for out in app.screen_stack[0].query("#repl-out"):  # the last line's answer was the running job's: the
        out.update("")  # line's placeholder says the end (it stayed, stale)
    app.refresh_break()


def follow_job(app: Any) -> None:
    """What is on screen follows the job's state: the add box's note of a pause goes when
    the job goes on or ends, and a quit or Ctrl-C dialog says what its keys do now (closed
    at the end: it offered to continue the job, or `i` to interrupt it, and did nothing)."""
    state = str(app.status.get("state", ""))
    if state != "paused":
        pause_words.clear(app)
    if len(app.screen_stack) > 1 and isinstance(app.screen, ChoiceScreen):
        app.screen.job_is(state)


def ended_words(returncode: int) -> str:
    """How a process ended, from its return code (-N: killed by signal N, as a shell says
    it: 128 + N): 'killed by SIGKILL (exit code 137 / -9)', or 'ended with exit code 3'."""
    if returncode >= 0:
        return f"ended with exit code {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    return f"killed by {name} (exit code {128 - returncode} / {returncode})"


def on_replay(app: Any, data: Any) -> None:
    """A replay of the paused step, whoever asked for it (another client's too: this one
    said `press r to replay` beside it). A job's ranks each send theirs: the Log says each,
    naming its rank (it said the rank in view's alone: rank 1's, which names the bad input,
    never; the twelfth walk's 4); the Break panel shows the rank in view's (or r's answer)."""
    # The Log is the record: the replay and its verdict, whoever ran it (r, --on-break replay,
    # another client); it showed none (the walk's item 13)
    rank = data.get(FROM_RANK)
    for line in replay_lines(app, data):
        app.log_line(line, "magenta")
    LastBreak.of(app).replayed(data)  # (the end says the last break with it)
    brk = app.status.get("paused")
    if rank is not None and rank != getattr(app.source, "current", None):
        return
    if brk and data.get("step") == brk.get("step") and app.replay_result != data:
        app.replay_result = data
        app.refresh_break()


def replay_lines(app: Any, data: dict[str, Any]) -> list[str]:
    """A replay's lines in the Log: its summary and verdict; a replay of a step whose finding
    the Log said already, in one line saying who asked (`r` in the TUI, then `r` at an attached
    REPL, showed the same block twice with nothing saying whose: the nineteenth walk's 3). The
    TUI's own is the one its r's worker waits for (the event comes before r's answer)."""
    rank = data.get(FROM_RANK)
    named = f"replay of step {data.get('step')}{f' on rank {rank}' if rank is not None else ''}"
    said: dict[tuple[Any, Any], tuple[Any, Any]] = kept(app, "_replays_logged", dict)
    key, finding = (rank, data.get("step")), (data.get("summary"), data.get("verdict"))
    ours = any(w.group == "replay" and not w.is_finished for w in app.workers)
    if said.get(key) == finding:
        by = "" if ours else f" by {who_asked(data, 'another client')}"  # (the --on-break replay's too)
        return [f"{named} again{by}: the same finding"]
    said[key] = finding  # (another client's first replay says so too: the nineteenth walk's)
    return [f"{named}{'' if ours else f' ({who_asked(data)})'}: {data.get('summary')}",
            *([f"  {data['verdict']}"] if data.get("verdict") else [])]


# Every event of wire/events.py the TUI shows (`step` goes to the plots, `lost` ends the
# connection: app.py routes both); a test checks this table against the declaration.
HANDLERS = {"paused": on_paused, "resumed": on_resumed, "output": on_output, "change": on_change, "break": on_break,
            "finding": on_finding, "exited": on_exited, "replay": on_replay}


def apply(app: Any, event: str, data: Any) -> None:
    handler = HANDLERS.get(event)
    rank = data.get(FROM_RANK) if isinstance(data, dict) else None  # (a rank's, under torchrun: JobSource)
    if event == "break" and rank is not None:
        _rank_broke(app, data)
    if handler is not None:  # (a change, a break, ...: where the job's output says it, log_order)
        key = whose(data) if event == "break" and rank is not None else None  # (one break of the job)
        LogOrder.of(app, _show_line).event(app, event, lambda: handler(app, data), rank, key)


def break_shown(app: Any) -> dict[str, Any] | None:
    """The break the Break panel shows: the status's, or paused for another rank's break, with
    that rank's numbers under its name (rank_breaks)."""
    return RankBreaks.of(app).shown(app.status.get("paused"), getattr(app.source, "current", None))


def _rank_broke(app: Any, data: dict[str, Any]) -> None:
    """A rank's break, as it comes: the Break panel of a rank paused for it shows its numbers."""
    RankBreaks.of(app).came(data)
    brk = app.status.get("paused")
    if app.status.get("state") == "paused" and isinstance(brk, dict) and whose(brk) == whose(data):
        app.refresh_break()
