"""The app's REPL line (e): Python in the paused frame, plus a few console words
(lr X [pin], break add SPEC, p EXPR, rewind [STEP], w, u [N], d [N], diff ranks); its history is walked
with up and down."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.widgets import Input, Static, TabbedContent

from stepdbg.client.commands import change_words
from stepdbg.client.replicas import diff_ranks_async
from stepdbg.wire.ops import lr_typed
from stepdbg.wire.rank_diff import USAGE as RANKS_USAGE
from stepdbg.wire.rank_diff import tolerances

from .asking import ask
from .break_panel import ended_words
from .panel_table import BY_ID
from .panels import BreakpointsPanel, check_spec, render_summary

if TYPE_CHECKING:
    from textual.app import App

    _AppBase = App[str | None]
else:
    _AppBase = object


class LineHistory:
    """The lines typed so far and where up/down has walked to."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.pos = 0

    def add(self, line: str) -> None:
        self.lines.append(line)
        self.pos = len(self.lines)

    def recall(self, delta: int) -> str | None:
        """The line `delta` steps back (-1) or forward (+1); "" past the newest; None if empty."""
        if not self.lines:
            return None
        self.pos = max(0, min(len(self.lines), self.pos + delta))
        return self.lines[self.pos] if self.pos < len(self.lines) else ""


class ReplActions(_AppBase):
    """The REPL line of StepdbgApp (app.py): e focuses it, Enter runs it, up and down recall."""

    repl_history: LineHistory
    evaluating: bool

    def action_focus_repl(self) -> None:
        self.query_one("#repl", Input).focus()

    def recall_line(self, delta: int) -> None:
        repl = self.query_one("#repl", Input)
        value = self.repl_history.recall(delta)
        if value is not None:
            repl.value = value
            repl.cursor_position = len(value)

    def run_line(self, line: str) -> None:
        self.repl_history.add(line)
        self.run_worker(self._run_line(line), group="repl")

    async def _run_line(self, line: str) -> None:
        self.evaluating = True  # ctrl+c interrupts the line's code
        try:
            await run_line(self, line)
        finally:
            self.evaluating = False


class UnderTheLine:
    """Where a REPL line's request says its error: under the line, where its answer goes (a
    toast there covered the answers)."""

    def __init__(self, out: Static, line: str) -> None:
        self.out, self.line = out, line

    def notify(self, message: str, *, severity: Any = None, timeout: float | None = None) -> None:
        self.out.update(f"» {self.line}\n{message}")


async def run_line(app: Any, line: str) -> None:
    """Run one REPL line against the app's source; the answer goes under the line. A word
    that is a command with what it needs after it runs as the command, else the line is Python."""
    word, _, rest = line.partition(" ")
    out = app.query_one("#repl-out", Static)
    state = str(app.status.get("state", ""))
    if state.startswith("exited"):  # (the request would only say the connection closed)
        out.update(f"» {line}\nthe job has {ended_words(state)}: nothing runs in it now")
        return
    command = LINE_COMMANDS.get(word)
    if command is None or not await command(app, out, line, word, rest):
        await _evaluate(app, out, line)


# Each takes the app, where the answer goes, the line, its first word and the rest; returns
# False when the line is not this command after all (`lr` alone is Python).


async def _lr(app: Any, out: Static, line: str, word: str, rest: str) -> bool:
    if not rest:
        return False
    parts = rest.split()
    try:
        lr = lr_typed(parts[0])
    except ValueError as e:
        out.update(f"» {line}\n{e}")
        return True
    pin = "pin" in parts[1:]
    r = await ask(UnderTheLine(out, line), "set LR", app.source.set_lr(lr, pin=pin))
    if r:  # (the words the Log and the console say a change in)
        out.update(f"» {line}\n" + change_words({"what": "lr", "lr": lr, "pinned": pin, "groups": r.get("groups")}))
    return True


async def _break(app: Any, out: Static, line: str, word: str, rest: str) -> bool:
    panel = app.query_one(BreakpointsPanel)
    if rest.startswith("add "):
        spec = rest[4:].strip()
        error = check_spec(spec) or await panel.add(app.source, spec)
        out.update(f"» {line}\n{error or f'breakpoint {spec} added'}")
    elif rest.startswith(("rm ", "remove ")):
        spec = rest.partition(" ")[2].strip()
        if await ask(UnderTheLine(out, line), "breakpoint", app.source.remove_break(spec)) is not None:
            out.update(f"» {line}\nremoved breakpoint {spec}")
            await panel.load(app.source, app.status, app.history)
    else:
        return False
    return True


async def _rewind(app: Any, out: Static, line: str, word: str, rest: str) -> bool:
    r = await ask(UnderTheLine(out, line), "rewind", app.source.rewind(int(rest) if rest.isdigit() else None))
    if r is not None:
        out.update(f"» {line}\nrewinding to the snapshot of step {r['to_step']} where step {r['step']} ends")
    return True


async def _frames(app: Any, out: Static, line: str, word: str, rest: str) -> bool:
    if rest and (word in ("w", "where") or not rest.isdigit()):
        return False
    move = (int(rest) if rest else 1) * {"u": 1, "d": -1}.get(word, 0)
    frames = await ask(UnderTheLine(out, line), "stack", app.source.frames(move))
    if frames is not None:
        sel = next((i for i, f in enumerate(frames) if f["selected"]), 0)
        start = max(0, min(sel - 1, len(frames) - 4))  # four lines fit: the selected one among them
        out.update(f"» {line}\n" + "\n".join(
            f"{'>' if f['selected'] else ' '} {f['function']}()  {f['file']}:{f['line']}"
            for f in frames[start:start + 4]))
        app.refresh_break()
    return True


async def _print(app: Any, out: Static, line: str, word: str, rest: str) -> bool:
    if not rest:
        return False
    s = await ask(UnderTheLine(out, line), f"tensor {rest}", app.source.summary(rest))
    if s is not None:
        out.update(render_summary(s))
    return True


async def _diff(app: Any, out: Static, line: str, word: str, rest: str) -> bool:
    """`diff ranks [--atol X] [--rtol Y]`: every rank's replicas compared (D runs the step's diff)."""
    mode, _, more = rest.partition(" ")
    if not rest:
        return False  # (Python: a variable named diff)
    if mode != "ranks":
        out.update(f"» {line}\ndiff {mode}? here: {RANKS_USAGE}; D runs the step twice from the same state; "
                   "diff compile is the console's (stepdbg attach)")
        return True
    try:
        atol, rtol = tolerances(more.split())
    except ValueError as e:
        out.update(f"» {line}\n{e}")
        return True
    walk = diff_ranks_async(app.source, atol, rtol, lambda far: out.update(f"» {line}\n{far}…"))
    r = await ask(UnderTheLine(out, line), "diff ranks", walk)
    if r is not None:
        out.update(f"» {line}\ndiff ranks: {r['summary']}")
    return True


# The console's stepping words are keys here. Typed on this line they are Python first (a
# frame's `c` is shown); where Python has no such name, the answer says which key it is.
_KEYS = {"c": "c", "continue": "c", "cont": "c", "n": "n", "next": "n", "s": "s", "step": "s", "q": "q",
         "quit": "q", "r": "r", "replay": "r"}


async def _evaluate(app: Any, out: Static, line: str) -> None:
    r = await ask(UnderTheLine(out, line), "eval", app.source.evaluate(line))
    if r is not None:
        text = (r.get("output") or "") + (r.get("error") or "") + (r.get("value") or "")
        key = _KEYS.get(line.strip())
        if key is not None and ("NameError" in (r.get("error") or "") or "SyntaxError" in (r.get("error") or "")):
            text = (f"{line.strip()} is the console's word; here it is the key {key}, pressed outside this line "
                    "(Escape leaves it; ? lists the keys)")
        out.update(f"» {line}\n{last_lines(text)}")


# The console's `info WHAT` and `locals` are panels here: the line names the panel and opens it.
_SHOWN_BY = {"model": "model", "opt": "optimizer", "optimizer": "optimizer", "mem": "memory", "memory": "memory",
             "threads": "threads", "breaks": "breakpoints", "ranks": "ranks", "locals": "break",
             "history": "plots", "timings": "plots"}


async def _panel(app: Any, out: Static, line: str, word: str, rest: str) -> bool:
    what = rest.split()[0] if word == "info" and rest.strip() else ("locals" if word == "locals" else "model")
    if word == "locals" and rest.strip() or what not in _SHOWN_BY:
        return False  # (Python, or an `info` this line does not know: said as Python says it)
    panel = BY_ID[_SHOWN_BY[what]]
    said = f"» {line}\nthe {panel.name} panel ({panel.key}) shows it"
    if app.query_one(TabbedContent).active == panel.id:
        out.update(said)
    else:
        app.repl_after_tab = (panel.id, said)  # (the tab's change clears the line's answer: this one stays)
    app.action_panel(panel.id)
    return True


LINE_COMMANDS = {"lr": _lr, "break": _break, "rewind": _rewind, "w": _frames, "where": _frames, "u": _frames,
                 "d": _frames, "p": _print, "info": _panel, "locals": _panel, "diff": _diff}


def last_lines(text: str, n: int = 4) -> str:
    """What fits under the REPL line: the last `n` lines (a traceback's error is its last)."""
    lines = text.rstrip().splitlines()
    return "\n".join((["…"] if len(lines) > n else []) + [ln[:2000] for ln in lines[-n:]])
