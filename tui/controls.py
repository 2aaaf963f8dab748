"""The app's controls of the job: stepping, replay, changes, the paused stack, Ctrl-C,
quitting and the ranks in view. A mixin of StepdbgApp (app.py): each asks the source and shows the answer."""

from __future__ import annotations

import asyncio
import subprocess
import threading
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import work
from textual.notifications import Notify, SeverityLevel
from textual.widget import Widget
from textual.widgets import DataTable, Static, TabbedContent

from stepdbg.wire.change_text import SKIP_KEEPS, change_said, rewind_answer
from stepdbg.wire.rank_words import ranks_words, targets_words

from . import job_events, rank_replays, toasts
from .break_panel import ELSEWHERE, BreakPanel
from .dialogs import AskScreen, CtrlCScreen, LrScreen, QuitScreen
from .job_gone import GoneWatch
from .main_screen import MainScreen
from .messages import JobEvent

__all__ = ["AFTER_THE_END", "OUTPUT_ENDS_WITHIN", "ControlActions", "MainScreen"]  # (app.py's)

# The longest the end waits for the job's last lines (a launched job's output comes by its
# pipes, its end by the socket, sooner); a child that outlives the job may hold the pipes.
OUTPUT_ENDS_WITHIN = 5.0


def _ended(child: subprocess.Popen[Any] | None, within: float) -> int | None:
    """`child`'s return code once it ends within `within` seconds, else None (it runs)."""
    try:
        return None if child is None else child.wait(within)
    except subprocess.TimeoutExpired:
        return None


PAUSING = "pausing at the next pause point…"  # p's toast, while the header says PAUSING (p)

# The actions that drive or change the job: after its end, out of the footer and refused in words.
AFTER_THE_END = {"cont": "continue", "pause": "pause", "next_phase": "step", "next_step": "step", "replay": "replay",
                 "diff": "diff", "set_lr": "set the LR of", "skip": "skip", "rewind": "rewind", "frame": "step through",
                 "breakpoints": "break in"}


class ControlActions(GoneWatch):
    """The actions behind c n s p r D l k R u d q t o and ctrl+c."""

    source: Any
    status: dict[str, Any]
    connection: str
    evaluating: bool
    quit_choice: str | None
    replay_result: dict[str, Any] | None
    is_job: bool
    output_shown: bool
    child: subprocess.Popen[Any] | None
    output_ended: threading.Event | None
    interrupted: bool | str  # True: this window sent the job Ctrl-C; break_panel.ELSEWHERE: another client did

    if TYPE_CHECKING:  # StepdbgApp's own
        async def ask(self, what: str, coro: Any) -> Any: ...
        async def _refresh_break(self) -> None: ...
        async def _refresh_panel(self, pid: str) -> None: ...
        def action_panel(self, pid: str) -> None: ...
        def log_line(self, line: str, style: str = "") -> None: ...
        def refresh_all(self) -> None: ...
        def refresh_header(self) -> None: ...
        def connection_lost(self, reason: str) -> None: ...

    def notify(self, message: str, *, title: str = "", severity: Any = "information", timeout: float | None = None,
               markup: bool = True) -> None:
        """A toast, as tui/toasts.py's rule has it: a few seconds, no blank rows, room kept."""
        super().notify(toasts.make_room(self, message), title=title, severity=severity, timeout=toasts.standing(timeout), markup=markup)

    def _on_notify(self, event: Notify) -> None:  # (then App's own: it shows the toast)
        toasts.once(self, event.notification)

    def set_focus(self, widget: Widget | None, scroll_visible: bool = True) -> None:
        """The focus on `widget` on its own screen: under a dialog it waits there for the dialog
        to close (an answer that came while the LR dialog was open put the dialog's focus on
        the Break panel under it: its keys and escape went nowhere, the fifth walk's 2)."""
        if widget is not None and widget.screen is not self.screen:
            widget.screen.set_focus(widget, scroll_visible=False)
            return
        super().set_focus(widget, scroll_visible)

    def job_ended(self, what: str) -> bool:
        """Whether the job has ended; if so, says that `what` no longer applies, and what still
        works (not `Connection lost`, nor `the job is not paused`: it is gone)."""
        state = str(self.status.get("state", ""))
        if not state.startswith("exited"):
            if self.connection == "connected":
                return False
            if self.gone:
                self.refuse(f"{self.gone}: nothing to {what}. The panels still show its last values; q quits")
                return True
            again = "; ctrl+r reconnects" if getattr(self, "reconnect", None) else ""
            self.refuse(f"not connected to the job ({self.connection}): nothing to {what}{again}. q quits")
            return True
        self.refuse(f"the job has {state.replace('exited (', 'ended (exit code ')}: nothing to {what}. "
                    "The panels still show its last values; q quits")
        return True

    refused: str | None = None  # the words of the last refusal's toast (refuse)

    def refuse(self, words: str, severity: SeverityLevel = "warning") -> None:
        """Why a key does nothing, where the person looks, in one place: typed on the REPL line,
        under it, where it stays (an error's words red); a key pressed on a panel, in a toast
        (said under the REPL line alone, the eighteenth walk's leftovers 3, c and ctrl+r after a
        kill -9: the walker, looking at the panel, saw nothing). One refusal's toast at a time:
        the next one takes its place (each press added one, with the line's copy: the seventeenth
        walk's 1). What goes on mattering (`o`'s ranks: `information`) stays under the line."""
        if severity == "information" or getattr(self.focused, "id", None) == "repl":
            self.say(Text(words, style="red" if severity == "error" else ""))
            return
        # (and the loss's toast: a refusal while the connection is lost says it, and what now)
        for old in [n for n in self._notifications if n.message == self.refused] + \
                (self.lost_toasts() if self.connection != "connected" else []):
            self._unnotify(old, refresh=False)
        self.refused = toasts.one_label(words)  # (as the toast says them: notify)
        self.notify(words, severity=severity)

    def say(self, words: str | Text) -> None:
        """`words` under the REPL line, where they stay until the next answer (a long one, or
        one that must stay: a toast stands a few seconds, over the panel's first lines)."""
        for out in self.screen_stack[0].query("#repl-out").results(Static) if self.screen_stack else []:
            out.update(words)

    def not_paused(self, what: str) -> None:
        """Says why there is nothing to `what`: the job runs, or it is ending (resumed from an
        uncaught exception's break: it said `not paused` of a job that ended)."""
        ending = self.status.get("ending")
        self.refuse(f"the job is ending (its {ending} was not caught): nothing to {what}" if ending else
                    "the job is running already" if what == "continue" else f"the job is running: {what} needs a pause (p)")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """After the job's end (or once it is gone) the keys that drive it leave the footer (they
        say why if pressed)."""
        return not (action in AFTER_THE_END and (str(self.status.get("state", "")).startswith("exited") or self.gone))

    def _resume(self, what: str, coro: Any) -> None:
        state = str(self.status.get("state", ""))
        if self.job_ended(what):
            coro.close()
            return
        if state != "paused":
            self.not_paused(what)
            coro.close()
            return
        self.run_worker(self.ask(what, job_events.LogOrder.resuming(self, coro)), group="control")  # (log_order)

    def action_cont(self) -> None:
        self._resume("continue", self.source.cont())

    def action_next_phase(self) -> None:
        self._resume("next phase", self.source.next_phase())

    def action_next_step(self) -> None:
        self._resume("next step", self.source.next_step())

    def action_pause(self) -> None:
        if self.job_ended("pause"):
            return
        if self.status.get("state") == "running":  # (the header says so until the pause comes)
            self.status = {**self.status, "pausing": True}
        self.run_worker(self.ask("pause", self.source.pause()), group="control")  # (at a pause: it stays there)
        if self.status.get("state") == "paused":  # ("pausing…" was said of a job paused already)
            self.notify("the job is paused already: c continues, n and s step")  # (short: a toast alone, once)
        else:
            self.notify(PAUSING)  # (it goes when the pause comes, or the end: it stayed, stale)

    def action_replay(self) -> None:
        if self.job_ended("replay"):
            return
        if self.status.get("state") != "paused":
            self.refuse("replay needs a paused step: p pauses the job")
            return
        if rank_replays.replayed_already(self):  # (a job's: it said so; r again replays)
            return
        self.do_replay()

    @work(exclusive=True, group="replay")
    async def do_replay(self) -> None:
        panel = self.query_one(BreakPanel)
        self.query_one(TabbedContent).active = "break"
        panel.loading = True  # a spinner where the answer will be (a toast outlived the replay)
        try:
            result = await self.ask("replay", self.source.replay())
        finally:
            panel.loading = False
        if result is not None:
            self.replay_result = result
            self.query_one(TabbedContent).active = "break"
            await self._refresh_break()

    def action_diff(self) -> None:
        if self.job_ended("diff"):
            return
        if self.status.get("state") != "paused":
            self.refuse("diff needs a paused step: p pauses the job")
            return
        self.do_diff()

    @work(exclusive=True, group="diff")
    async def do_diff(self) -> None:
        self.say("diff: running the step twice from the same state…")  # (its answer in its place, not a 30 s toast
        result = await self.ask("diff", self.source.diff_step())  # over the Break panel's first lines)
        if result is not None and not self.output_shown:  # (where the job's output reaches the Log, its own
            self.log_line(f"diff: {result['summary']}")  # `stepdbg: diff: ...` says it)
        self.say(f"diff: {result['summary']} (the Log, 9, keeps it)" if result is not None else "")

    def action_set_lr(self) -> None:
        if self.job_ended(AFTER_THE_END["set_lr"]):
            return
        group = None
        if self.query_one(TabbedContent).active == "optimizer":
            t = self.query_one("#opt-table", DataTable)
            if t.row_count:
                group = t.cursor_row
        brk = self.status.get("paused") or {}
        lrs = (brk.get("scalars") or {}).get("lr") or []
        current = lrs[group or 0] if len(lrs) > (group or 0) else None
        if brk.get("lr_now"):  # set at this pause: the one the next update uses
            current = brk["lr_now"]["lr"]

        def done(answer: tuple[float, bool] | None) -> None:
            if answer is not None:
                self.apply_lr(answer[0], group, answer[1])

        self.push_screen(LrScreen(current, group), done)

    @work(group="control")
    async def apply_lr(self, lr: float, group: int | None, pin: bool) -> None:
        r = await self.ask("set LR", self.source.set_lr(lr, group=group, pin=pin))
        if r is not None:
            said = toasts.lr_words(lr, r.get("groups"))  # (not the Break panel's 'LR set to ...' line again)
            self.notify(f"{said}: every update from now uses it (pinned: re-applied before each step)" if pin else
                        f"{said}: the next update uses it; a scheduler or the loop may change it later")
            await self._refresh_panel(self.query_one(TabbedContent).active)

    @work(group="control")
    async def action_skip(self) -> None:
        if self.job_ended("skip"):
            return
        r = await self.ask("skip", self.source.skip_step())
        if r is not None:
            # At a pause, what the Break panel does not say (it names the step: toasts.py's rule); running, the step too
            self.notify(f"skip: {'asked already' if r.get('already') else SKIP_KEEPS if self.status.get('state') == 'paused' else change_said(r)}")
            if r.get("already"):  # no change event comes: the Log says it here (a toast goes away)
                self.log_line(f"{job_events.change_words(r)} (asked already)", "cyan")

    @work(group="control")
    async def action_rewind(self) -> None:  # R: back to the newest snapshot before this step; the job runs on
        if self.job_ended("rewind"):
            return
        r = await self.ask("rewind", job_events.LogOrder.resuming(self, self.source.rewind(), after="change"))
        if r is not None:
            self.notify(rewind_answer(r))

    def action_quit_job(self) -> None:
        if self.connection != "connected":
            self.exit(None)
            return

        def done(choice: str | None) -> None:
            if choice is not None:
                self.quit_choice = choice
                self.exit(choice)

        self.push_screen(QuitScreen(str(self.status.get("state", ""))), done)

    def action_interrupt(self) -> None:
        """ctrl+c: stop code the REPL line runs in the job; else ask what Ctrl-C means here."""
        if self.evaluating:
            self.notify("interrupting the code in the job…")
            self.run_worker(self.ask("interrupt", self.source.interrupt()), group="interrupt")
            return
        if self.connection != "connected" or str(self.status.get("state", "")).startswith("exited"):
            self.action_quit_job()
            return

        def done(choice: str | None) -> None:
            if choice == "interrupt":
                self.interrupt_job()
            elif choice == "quit":
                self.action_quit_job()

        self.push_screen(CtrlCScreen(), done)

    def on_job_event(self, msg: JobEvent) -> None:
        """(After StepdbgApp's own handler.) A Ctrl-C another client sent the job (`stepdbg
        attach`'s interrupt), as the job's change says: at the end the Break panel says who
        interrupted it; it knew only this window's, and said `--forward-output` words."""
        if msg.event == "change" and isinstance(msg.data, dict) and msg.data.get("what") == "interrupt" \
                and not self.interrupted:
            self.interrupted = ELSEWHERE
        if msg.event in ("paused", "exited"):  # "pausing…" said, and done (or never to be)
            for toast in [n for n in self._notifications if n.message == PAUSING]:
                self._unnotify(toast)

    @work(group="lost")
    async def launched_job_gone(self, reason: str) -> None:
        """The connection to a job launched here went: if the job is gone, its end as its
        parent sees it, after its last lines (killed by SIGKILL, exit code 137: it said
        nothing, and the Log said nothing of it); else the connection's loss."""
        code = await asyncio.to_thread(_ended, self.child, OUTPUT_ENDS_WITHIN)
        if code is None:
            self.connection_lost(reason)
            return
        if self.output_ended is not None:
            await asyncio.to_thread(self.output_ended.wait, OUTPUT_ENDS_WITHIN)
        killed = job_events.ended_words(code).split(" (")[0].removeprefix("killed by ") if code < 0 else None
        job_events.on_exited(self, {"exit_code": 128 - code if code < 0 else code, "killed_by": killed})
        # (said: the header, the Log, the Break panel; a toast said the header's words again, 10 s)

    @work(group="control")
    async def interrupt_job(self) -> None:
        self.interrupted = True  # (the Break panel says so at the end, which may come before the answer)
        if await self.ask("Ctrl-C", self.source.interrupt_job()) is not None:
            self.notify("Ctrl-C sent to the job: its own Ctrl-C handling runs")
        elif not str(self.status.get("state", "")).startswith("exited"):
            self.interrupted = False  # refused: the job goes on

    # ------------------------------------------------------------------ the paused stack

    @work(group="control")
    async def action_frame(self, move: int) -> None:
        """u (move 1: out, toward main) and d (-1: in): select a frame of the paused stack;
        the Break panel's source and locals, the REPL line and the Tensor panel follow it."""
        if self.job_ended(AFTER_THE_END["frame"]):
            return
        if self.status.get("state") != "paused":
            self.not_paused(AFTER_THE_END["frame"])
            return
        frames = await self.ask("stack", self.source.frames(move))
        if frames:
            sel = next(f for f in frames if f["selected"])  # (at the stack's end: said, as the console does)
            end = f": the {'outer' if move > 0 else 'inner'}most, {'u' if move > 0 else 'd'} goes no further"
            self.notify(f"frame {sel['function']}() at {sel['file'].rsplit('/', 1)[-1]}:{sel['line']}"
                        f"{end if frames[0 if move > 0 else -1]['selected'] else ''}", timeout=3)
            self.action_panel("break")
            await self._refresh_break()

    # ------------------------------------------------------------------ ranks (a distributed job)

    def action_next_rank(self, rank: int | None = None) -> None:
        if not self.is_job:
            self.notify("t switches ranks in a distributed job; this is one process", severity="warning")
            return
        self.source.switch(self.source.current + 1 if rank is None else rank)
        self.replay_result = None
        self.notify(f"rank {self.source.current} in view")
        self.refresh_all()

    def action_rank_set(self) -> None:
        if not self.is_job:
            self.notify("o picks ranks in a distributed job; this is one process", severity="warning")
            return

        from stepdbg.client.job import parse_ranks

        world = len(self.source.clients)

        def targets(answer: str) -> list[int] | None:  # (a set refused is said in the dialog, kept open)
            return None if answer in ("", "all") else parse_ranks(answer, world)

        def done(answer: str | None) -> None:
            if answer is not None:  # (escape: None)
                self.source.targets = targets(answer)
                self.refuse(targets_words(self.source.targets), severity="information")
                self.refresh_header()  # (it and the Ranks panel say who gets commands from now)
                self.refresh_all()

        now = "every rank" if self.source.targets is None else ranks_words(self.source.targets)  # (what o would change)
        self.push_screen(AskScreen(f"send stepping, LR, skip and breakpoints to ranks (e.g. 0,2-3 or all); now: {now}",
                                   targets), done)
