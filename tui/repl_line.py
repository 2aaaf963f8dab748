"""The app's REPL line (e): Python in the paused frame, plus the console's words (lr X
[pin], break add SPEC, p EXPR, rewind [STEP], until N, info WHAT, w, u [N], d [N], diff
ranks, save); a line that begins with a command's word and is neither it nor Python says what
the command takes. Its history is walked with up and down."""

from __future__ import annotations

import ast
import difflib
import shlex
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.actions import SkipAction
from textual.events import Key
from textual.widgets import Input, Static, TabbedContent

from stepdbg.client.commands import UNTIL_USAGE, added_words, change_words
from stepdbg.client.info_text import INFO
from stepdbg.client.replicas import diff_ranks_async
from stepdbg.wire.change_text import rewind_answer
from stepdbg.wire.ops import lr_typed
from stepdbg.wire.rank_diff import USAGE as RANKS_USAGE
from stepdbg.wire.rank_diff import tolerances

from .asking import ask
from .break_panel import ended_words
from .log_order import LogOrder
from .panel_table import BY_ID, keys_land, one_process_words
from .panel_table import shown as panels_shown
from .panels import BreakpointsPanel, check_spec, render_summary
from .repl_answer import RUNNING, answer
from .repl_complete import NONE

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


# The line's words while the job is paused (app.py's at the start) and while it runs.
PLACEHOLDERS = {"paused": "e: Python in the paused frame (p EXPR, lr X pin, break add SPEC, ...)",
                "running": "e: the job runs; type pause for Python; lr X, break add SPEC work now"}


class ReplActions(_AppBase):
    """The REPL line of StepdbgApp (app.py): e focuses it, Enter runs it, up and down recall."""

    repl_history: LineHistory
    evaluating: bool
    if TYPE_CHECKING:  # StepdbgApp's own
        def active_panel(self) -> str: ...

    def on_mount(self) -> None:  # (Textual runs each class's on_mount: the app's own too)
        self.watch(self, "status", self._line_after_the_end)

    def _line_after_the_end(self, status: dict[str, Any]) -> None:
        """The line's words follow the job: once it has ended they no longer invite Python in
        its frame (walk 4's item 15), and while it runs there is no paused frame (the closing
        walk's 20: they said `Python in the paused frame` of a running job); within 80 columns."""
        state = str(status.get("state", ""))
        # On the main screen, while there is one (the end may come as the window closes).
        for line in self.screen_stack[0].query("#repl").results(Input) if self.screen_stack else []:
            if state.startswith("exited"):
                line.placeholder = f"the job {ended_words(state)}: the panels keep its last state; q closes"
            elif state in PLACEHOLDERS:
                line.placeholder = PLACEHOLDERS[state]

    def on_key(self, event: Key) -> None:  # (Textual runs each class's on_key: the app's own too)
        """A letter that reached the app while a field has the focus: typed with the key that
        put the focus there, in one burst (`elos`: the letters went to the panel that had the
        focus when they came, and `l` opened the LR dialog), it goes into the field."""
        field = self.focused
        if isinstance(field, Input) and event.is_printable and event.character:
            field.insert_text_at_cursor(event.character)
            event.stop()

    def action_focus_repl(self) -> None:  # at once: focus() waits for the app's next turn, and letters typed
        self.set_focus(self.query_one("#repl", Input))  # with `e` in one burst drove the job (`l`: the LR dialog)

    def action_leave_field(self) -> None:
        """Escape in a field of the main screen: keys are keys again, on the panel shown (on no
        widget the focus showed nowhere); in the Breaks panel on its table (space, delete). In
        a dialog its escape is the dialog's."""
        if self.screen is not self.screen_stack[0]:
            raise SkipAction()
        if getattr(self.focused, "id", None) == "repl":  # Tab's words under the line were the line's: they go
            out = self.query_one("#repl-out", Static)  # with it (`...; escape leaves the line` stayed, the walk's 13)
            if isinstance(out.content, str) and out.content.startswith(("Tab: ", NONE)):
                out.update("")
        self.set_focus(keys_land(self.query_one(BY_ID[self.active_panel()].cls)))

    def action_recall_line(self, delta: int) -> None:  # up (-1) and down on the line (repl_field.ReplLine)
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
    out.update(f"» {line}")  # (the last line's answer, not an older one's: one said in a toast left it)
    state = str(app.status.get("state", ""))
    if state.startswith("exited") or app.gone:  # (the request would only say the connection closed)
        out.update(f"» {line}\n{app.gone or 'the job has ' + ended_words(state)}: nothing runs in it now")
        return
    command = LINE_COMMANDS.get(word)
    if command is not None and await command(app, out, line, word, rest):
        return
    if word in USAGE and not _parses(line):  # (`info nothing`, `until x`: a command's word, not Python)
        out.update(f"» {line}\n{usage(word, rest)}")
        return
    await _evaluate(app, out, line)


def _parses(line: str) -> bool:
    try:
        ast.parse(line)
    except SyntaxError:
        return False
    return True


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
        error = check_spec(spec)
        rows = [] if error else await ask(UnderTheLine(out, line), "breakpoints", app.source.breakpoints())
        if rows is None:
            return True
        error = error or await panel.add(app.source, spec)  # (the console's words, the Log's: one place)
        out.update(f"» {line}\n{error or added_words(spec, [r['spec'] for r in rows])}")
    elif rest.startswith(("rm ", "remove ")):
        spec = rest.partition(" ")[2].strip()
        if await ask(UnderTheLine(out, line), "breakpoint", app.source.remove_break(spec)) is not None:
            out.update(f"» {line}\n{change_words({'what': 'break_remove', 'spec': spec})}")
            await panel.load(app.source, app.status, app.history)
    elif rest.startswith(("on ", "off ")):  # (the Breaks panel's space, typed)
        on, spec = rest.startswith("on "), rest.partition(" ")[2].strip()
        if await ask(UnderTheLine(out, line), "breakpoint", app.source.enable_break(spec, on)) is not None:
            out.update(f"» {line}\n{change_words({'what': 'break_enable', 'spec': spec, 'enabled': on})}")
            await panel.load(app.source, app.status, app.history)
    else:
        return False
    return True


async def _rewind(app: Any, out: Static, line: str, word: str, rest: str) -> bool:
    if rest and not rest.isdigit():  # (`rewind abc` rewound to the newest snapshot)
        return False
    r = await ask(UnderTheLine(out, line), "rewind",
                  LogOrder.resuming(app, app.source.rewind(int(rest) if rest.isdigit() else None), after="change"))
    if r is not None:
        out.update(f"» {line}\n{rewind_answer(r)}")
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
    if s is not None:  # (its answer had no `» p loss` line where every other answer has one)
        out.update(Text.assemble(f"» {line}\n", render_summary(s)))
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


SAVE_USAGE = "save: the paused step's evidence bundle (stepdbg-stepN/ under --bundle-dir), for stepdbg replay PATH"

# The console's stepping words are keys here. Typed on this line they are Python first (a
# frame's `c` is shown); where Python has no such name, the answer says which key it is.
_KEYS = {"c": "c", "continue": "c", "cont": "c", "n": "n", "next": "n", "s": "s", "step": "s", "q": "q",
         "quit": "q", "abort": "q", "detach": "q", "r": "r", "replay": "r", "skip": "k", "pause": "p",
         "interrupt": "ctrl+c", "h": "?", "help": "?", "rank": "t", "on": "o"}
# What each of the line's commands takes, said where a line begins with its word and is not
# it (nor Python); the console's `info` topics and this line's are one list.
USAGE = {
    "lr": "lr X [pin]: set the learning rate, e.g. lr 3e-4, or lr 3e-4 pin to keep it against schedulers",
    "break": "break add SPEC, break rm SPEC, break off SPEC or break on SPEC, e.g. break add grad_norm>100 (the Breaks "
             "panel, 7, lists them)",
    "rewind": "rewind [STEP]: back to the newest snapshot before this step, or before step STEP (a number); the job runs on",
    "w": "w: the paused stack (nothing after it); u [N] selects the frame N out, d [N] N in",
    "p": "p EXPR: a tensor's summary, e.g. p loss or p model.0.weight.grad",
    "until": UNTIL_USAGE,
    "locals": "locals: the selected frame's locals, shown in the Break panel (1); nothing after it",
    "info": "", "diff": RANKS_USAGE, "save": SAVE_USAGE, "ranks": "ranks: the Ranks panel (0) of a distributed job",
    "compare": "compare EXPR is the console's (stepdbg attach --repl): EXPR on every rank",
    **dict.fromkeys(_KEYS, ""),
}
USAGE["where"] = USAGE["u"] = USAGE["d"] = USAGE["up"] = USAGE["down"] = USAGE["bt"] = USAGE["w"]


async def _evaluate(app: Any, out: Static, line: str) -> None:
    out.update(f"» {line}\n{RUNNING}")  # (until the answer: the echo alone said nothing of a line running 30 s)
    r = await ask(UnderTheLine(out, line), "eval", app.source.evaluate(line))
    if r is not None:
        text = (r.get("output") or "") + (r.get("error") or "") + (r.get("value") or "")
        word = line.strip()
        if word in USAGE and ("NameError" in (r.get("error") or "") or "SyntaxError" in (r.get("error") or "")):
            text = usage(word, "")  # (`c`, `until`: a command's word where the frame has no such name)
        elif word.isidentifier() and f"NameError: name '{word}' is not defined" in (r.get("error") or ""):
            near = difflib.get_close_matches(word, sorted(USAGE), 3)  # (a lone word showed Python's traceback,
            text = (f"{word}: not a command of this line, nor a name in the paused frame"  # the eighteenth walk's 7)
                    + (f"; did you mean {' or '.join(near)}?" if near else "") + " (? lists the keys and its words)")
        answer(app, out, line, text)


def usage(word: str, rest: str) -> str:
    """What the command `word` takes, in words, where the line was not it (`info nothing`,
    `until x` showed Python's SyntaxError); the console's words that are keys here say the key."""
    key = _KEYS.get(word)
    if key is not None:
        return (f"{word} is the console's word; here it is the key {key}, pressed outside this line "
                "(Escape leaves it; ? lists the keys)")
    if word == "info":
        what = rest.split()[0] if rest.split() else ""
        return f"info what? {', '.join(INFO_TOPICS)} (not {what!r})"
    return USAGE[word]


# The console's `info WHAT` and `locals` are panels here: the line names the panel and opens it.
_SHOWN_BY = {"model": "model", "opt": "optimizer", "optimizer": "optimizer", "mem": "memory", "memory": "memory",
             "threads": "threads", "breaks": "breakpoints", "ranks": "ranks", "locals": "break",
             "history": "plots", "timings": "plots", "source": "break", "status": "break", "torchinfo": "model"}
INFO_TOPICS = list(dict.fromkeys([*INFO, "breaks", "ranks", "locals"]))  # (the console's, then this line's)


async def _panel(app: Any, out: Static, line: str, word: str, rest: str) -> bool:
    what = rest.split()[0] if word == "info" and rest.strip() else ("locals" if word == "locals" else "model")
    if word == "locals" and rest.strip() or what not in _SHOWN_BY:
        return False  # (Python, or an `info` this line does not know: said as Python says it)
    panel = BY_ID[_SHOWN_BY[what]]
    if panel not in panels_shown(app.is_job):  # (said in a toast, the line's answer was the line before's)
        out.update(f"» {line}\n{one_process_words(panel)}")
        return True
    said = f"» {line}\nthe {panel.name} panel ({panel.key}) shows it"
    if word == "locals":  # (below the break, the source and the stack: out of sight at 80x24, and not said)
        said = f"» {line}\nthe {panel.name} panel ({panel.key}) shows them, scrolled to them (PageUp: the break)"
    if app.query_one(TabbedContent).active == panel.id:
        out.update(said)
    else:
        app.repl_after_tab = (panel.id, said)  # (the tab's change clears the line's answer: this one stays)
    app.action_panel(panel.id)
    app.set_focus(app.query_one("#repl", Input))  # (the line keeps the focus: what is typed next is a line, walk 4 item 2)
    if word == "locals":
        shown = app.query_one(panel.cls)
        app.call_after_refresh(lambda: shown.scroll_to_widget(shown.query_one("#break-locals"), top=True,
                                                              animate=False))
    return True


async def _until(app: Any, out: Static, line: str, word: str, rest: str) -> bool:
    """`until N`: the console's, here too (it was Python: a SyntaxError)."""
    if not rest.isdigit():
        return False
    if app.status.get("state") != "paused":
        out.update(f"» {line}\nthe job is not paused: until N runs on from a pause (p pauses it)")
        return True
    out.update(f"» {line}\nrunning to step {rest}")  # (a refusal, 'not ahead', takes its place)
    await ask(UnderTheLine(out, line), "until", LogOrder.resuming(app, app.source.run_to_step(int(rest))))
    return True


async def _save(app: Any, out: Static, line: str, word: str, rest: str) -> bool:
    """`save`: the paused step's evidence bundle, as the console's (it said `save is the
    console's`: the seventeenth walk's 5); its path, or why it was not written."""
    if rest:
        return False
    out.update(f"» {line}\nsaving the evidence bundle…")
    r = await ask(UnderTheLine(out, line), "save", app.source.save())
    if r is not None:
        out.update(f"» {line}\n" + (f"evidence bundle: {r['path']}\nreplay it: stepdbg replay {shlex.quote(r['path'])}"
                                    if r.get("saved") else f"evidence bundle not saved: {r.get('error')}"))
    return True


async def _pause(app: Any, out: Static, line: str, word: str, rest: str) -> bool:
    """`pause`: p's, as the console's (the placeholder said to pause, and `pause` answered
    `eval: the job is running; pause it first`); at a pause p says it is paused already."""
    if rest:
        return False
    out.update(f"» {line}")  # (p says the rest: the header's PAUSING, its toast, then the pause)
    app.action_pause()
    return True


LINE_COMMANDS = {"pause": _pause, "lr": _lr, "break": _break, "rewind": _rewind, "w": _frames, "where": _frames, "u": _frames,
                 "d": _frames, "p": _print, "info": _panel, "locals": _panel, "diff": _diff, "until": _until,
                 "save": _save}
