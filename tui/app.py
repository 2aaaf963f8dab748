"""StepdbgApp: the Textual front end. It gets its connection injected (``StepdbgApp(source)``)
and only knows what the protocol carries; it never imports torch.

Wire events become Textual messages in one worker; widgets react to messages and
never touch the connection; every request runs in a worker so nothing blocks the UI.
"""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import ScrollableContainer
from textual.events import Key, Resize
from textual.reactive import reactive
from textual.widgets import DataTable, Footer, Input, RichLog, Static, TabbedContent, TabPane, Tabs

from stepdbg.client.connection import gone_words

from . import job_events, rank_replays, source_fold
from .asking import ask
from .break_panel import BreakPanel
from .controls import AFTER_THE_END, OUTPUT_ENDS_WITHIN, ControlActions, MainScreen
from .dialogs import HelpScreen
from .fitted import focus_mark
from .header import JobHeader, rank_views
from .job_gone import gone_header, same_job
from .keys import EscapeThenKey
from .messages import HISTORY_KEPT, ConnectionLost, JobEvent, StepSummary, with_records
from .panel_table import BY_ID, PANELS, keys_land, one_process_words, shown
from .panels import LogPanel, ModelPanel, TensorPanel, first_parameter_words, module_expression
from .plots import PlotsPanel
from .repl_field import ReplLine
from .repl_line import LineHistory, ReplActions
from .source import Source

RANKS_EVERY = 1.0  # seconds between Ranks (and a running job's Threads) panel refreshes while shown
# ---------------------------------------------------------------------- the app


class StepdbgApp(ControlActions, ReplActions, EscapeThenKey, App[str | None]):
    """The debugger UI over one job. Returns the quit choice: continue, stay, end, or None."""

    TITLE = "stepdbg"
    ENABLE_COMMAND_PALETTE = False
    AUTO_FOCUS = None  # keys drive the debugger until a field is chosen (e, b, or a click)
    CSS = """
    #header { height: 1; background: $boost; padding: 0 0 0 1; }  /* (its last column too: the host fits more often) */
    TabbedContent { height: 1fr; }
    .hint { color: $text-muted; width: 100%; }
    #repl { height: 3; }
    #panels.-many-ranks Tab, #panels.-narrow Tab { padding: 0 1 0 0; }  /* 80 columns: 1 Break stays whole */
    #repl-out { height: auto; max-height: 6; padding: 0 1; color: $text-muted; }
    """ + "".join(focus_mark(p) for p in ("TensorPanel", "PlotsPanel", "ThreadsPanel", "MemoryPanel"))  # (seen)
    BINDINGS = [
        # Short words (pause is in the help): the footer fits 80 columns.
        Binding("c", "cont", "cont"),
        Binding("p", "pause", "pause", show=False),
        Binding("n", "next_phase", "phase"),
        Binding("s", "next_step", "step"),
        Binding("r", "replay", "replay"),
        Binding("D", "diff", "diff", show=False),
        Binding("l", "set_lr", "LR"),
        Binding("k", "skip", "skip"),
        Binding("R", "rewind", "rewind", show=False),
        Binding("u", "frame(1)", "frame out", show=False),
        Binding("d", "frame(-1)", "frame in", show=False),
        Binding("b", "breakpoints", "breaks"),
        Binding("e", "focus_repl", "REPL", show=False),
        Binding("q", "quit_job", "quit"),
        Binding("ctrl+c", "interrupt", "interrupt", show=False),
        Binding("question_mark", "help", "help"), Binding("h", "help", "help", show=False),  # (h: the console's)
        Binding("ctrl+r", "reconnect", "reconnect", show=False),
        Binding("t", "next_rank", "next rank", show=False),
        Binding("o", "rank_set", "ranks for commands", show=False),
        *[Binding(p.key, f"panel('{p.id}')", p.name, show=False) for p in PANELS],
    ]

    status: reactive[dict[str, Any]] = reactive(dict, always_update=True)  # step, phase, state, the break
    connection: reactive[str] = reactive("connected")  # connected, or why not
    repl_after_tab: tuple[str, str] | None = None  # (panel id, what the REPL line said when it opened that panel)

    def __init__(self, source: Source, clock: Callable[[], float] = time.time,
                 reconnect: Callable[[], Awaitable[Source]] | None = None) -> None:
        super().__init__()
        self.source = source
        self.reconnect = reconnect  # makes a new source for the same job (ctrl+r after a loss)
        self.is_job = source.many_ranks  # a distributed job: a Ranks panel, t and o
        self.clock = clock
        self.replay_result: dict[str, Any] | None = None
        self.findings: list[dict[str, Any]] = []  # rule-based findings pushed by the agent
        self.history: list[dict[str, Any]] = []
        self.arrived: list[dict[str, Any]] | None = None  # step records handled while the history is asked for
        self.repl_history = LineHistory()
        self.evaluating = False  # a REPL line runs in the job (ctrl+c interrupts it)
        self.quit_choice: str | None = None
        self.set_reactive(StepdbgApp.status, dict(source.status_at_attach or {}))
        self.log_buffer: list[tuple[str, str]] = []  # (stream, line) printed before the UI came up
        self.said_as_event: set[str] = set()  # streams whose last line the Log shows from its event
        self.output_shown = False  # the job's output reaches the Log (launched here, or --forward-output)
        self.output_ended: threading.Event | None = None  # set once a launched job's output is all read
        self.child: subprocess.Popen[Any] | None = None  # a job launched here (its end when the connection goes)
        self.interrupted = False  # this window sent the job Ctrl-C (ctrl+c, i)
        self._mounted = False
        self.footer_at_end = False  # the footer was drawn without the keys that drive the job

    # ------------------------------------------------------------------ layout

    def get_default_screen(self) -> MainScreen:
        return MainScreen()

    def compose(self) -> ComposeResult:
        yield JobHeader(id="header")
        with TabbedContent(id="panels", classes="-many-ranks" if self.is_job else ""):
            for p in shown(self.is_job):
                with TabPane(f"{p.key} {p.title}", id=p.id):
                    yield p.widget()
        yield Static(id="repl-out", markup=False)  # what was typed, as typed ([ is not markup)
        yield ReplLine(placeholder="e: Python in the paused frame (p EXPR, lr X pin, break add SPEC, ...)", id="repl")
        yield Footer()

    def on_mount(self) -> None:
        self._mounted = True
        # Tab goes round the panel's widgets and the REPL line, never the tab bar (a detour
        # where the focus showed nowhere); the number keys and a click choose the tab.
        self.query_one(TabbedContent).query_one(Tabs).can_focus = False
        self.query_one(TensorPanel).can_focus = True  # keys land on it (its fields take typing): escape goes there
        for stream, line in self.log_buffer:
            self.log_line(line, "red" if stream == "stderr" else "")
        job_events.at_attach(self)
        self.refresh_header()
        self.set_interval(1.0, self.refresh_header)
        self.set_interval(RANKS_EVERY, self.tick_panels)
        if self.status.get("state") == "paused":  # attached at a pause: Down and PageDown scroll the Break panel
            self.action_panel("break")
        self.pump_events()
        self.refresh_all()

    def refresh_header(self) -> None:
        elapsed = max(0.0, self.clock() - (self.source.session.get("started") or self.clock()))
        # On the main screen (App.query_one would search a dialog on top); none while starting or closing.
        for header in self.screen_stack[0].query("#header").results(JobHeader) if self.screen_stack else []:
            header.show(self.source.session, self.status, elapsed, self.connection, rank_views(self.source, self.status))

    def watch_status(self) -> None:
        if self._mounted:
            self.refresh_header()
            ended = str(self.status.get("state", "")).startswith("exited")
            if ended != self.footer_at_end:  # the keys that drive the job leave the footer (once: it is drawn again)
                self.footer_at_end = ended
                self.refresh_bindings()

    def watch_connection(self) -> None:
        if self._mounted:
            self.refresh_header()

    # ------------------------------------------------------------------ events from the job

    @work(group="events")
    async def pump_events(self) -> None:
        try:
            async for ev in self.source.iter_events():
                if ev.get("event") == "lost":
                    raise ConnectionError(ev.get("data") or "the connection closed")
                if ev.get("event") == "exited" and self.output_ended is not None:  # its lines, then the end
                    await asyncio.to_thread(self.output_ended.wait, OUTPUT_ENDS_WITHIN)
                if ev.get("event") == "step":
                    self.post_message(StepSummary(ev["data"]))
                else:
                    self.post_message(JobEvent(ev.get("event", "?"), ev.get("data")))
                if ev.get("event") == "exited":
                    break
        except Exception as e:  # the connection broke
            self.post_message(ConnectionLost(str(e)))

    def on_job_event(self, msg: JobEvent) -> None:
        job_events.apply(self, msg.event, msg.data)
        if msg.event == "exited" and isinstance(msg.data, dict) and msg.data.get("breakpoints") is not None:
            for panel in self.screen_stack[0].query(BY_ID["breakpoints"].cls).results() if self.screen_stack else ():
                panel.show(msg.data["breakpoints"])  # (the job's last word on them)

    def on_step_summary(self, msg: StepSummary) -> None:
        records = msg.records()
        if not records:  # (a malformed step event: messages.step_records)
            return
        d = records[-1]
        self.history = with_records(self.history, records)  # every step the job ran, as its own history has it
        if self.arrived is not None:
            self.arrived.extend(records)
        if self.status.get("state") != "paused" and not str(self.status.get("state", "")).startswith("exited"):
            # (a late summary must not hide the pause, nor the end)
            self.status = {**self.status, "step": d["step"] + 1, "phase": "between steps"}
        if self.active_panel() == "plots":  # ("" once the app closes: a late step's query ended it with NoMatches)
            for plots in self.screen_stack[0].query(PlotsPanel).results(PlotsPanel):
                plots.show(self.history, None)

    def on_connection_lost(self, msg: ConnectionLost) -> None:
        if self.child is not None:  # launched here: its parent knows its end (a kill -9 let its agent say nothing)
            self.launched_job_gone(msg.reason)
        else:
            self.connection_lost(msg.reason)

    def connection_lost(self, reason: str) -> None:
        self.connection = f"connection lost: {reason}"  # (the header says it: the toast says what now, and the Log
        self.log_line(self.connection, "red")  # keeps it whole; it said the header's words again, and its own twice)
        self.tell_lost(self.lost_words())  # (ctrl+r only where the job may be there)

    @work(exclusive=True, group="reconnect")
    async def action_reconnect(self) -> None:
        if self.reconnect is None or self.connection == "connected":
            return
        self.see_if_gone()  # a job ended, or gone, is said so, and nothing tried (it said `reconnecting…`)
        if (self.gone or str(self.status.get("state", "")).startswith("exited")) and self.job_ended("reconnect to"):
            return
        self.notify("reconnecting…")
        gone = gone_header(self.source.session)  # (an end's words, its exit
        gone = gone if self.connection.startswith("connection lost") else self.connection  # code, stay)
        try:
            source = await self.reconnect()
        except Exception as e:
            self.refuse(f"reconnect failed: {getattr(e, 'message', None) or e}", severity="error")  # (stays)
            if gone_words(self.source.session) is not None:  # the header says it too (it said `connection
                self.connection = gone  # lost` on, its pid given way; the toast that said `gone` went)
            return
        if not same_job(self.source.session, source.session):  # the only session left is another job's
            await source.close(then="stay")
            self.connection = gone
            self.notify(f"the job (pid {self.source.session.get('pid')}) is gone: not attaching to another one "
                        f"(pid {source.session.get('pid')}); `stepdbg attach` chooses", severity="error", timeout=10)
            return
        self.source = source
        self.connection = "connected"
        self.pump_events()
        self.refresh_all()
        self.notify("reconnected")

    def log_line(self, line: str, style: str = "") -> None:
        job_events.log_line(self, line, style)

    # ------------------------------------------------------------------ requests (workers)

    async def ask(self, what: str, coro: Any) -> Any:
        """Await one request; errors become notifications, never crashes."""
        return await ask(self, what, coro)

    @work(exclusive=True, group="refresh")
    async def refresh_all(self) -> None:
        st = await self.ask("status", self.source.status())
        if st:
            self.status = st
        # The answer is the history when the job read it: steps sent after that may be handled
        # before the answer is, and go on top of it.
        self.arrived = []
        try:
            hist = await self.ask("history", self.source.get_history(HISTORY_KEPT))
            if hist is not None:
                self.history = with_records(hist, self.arrived)
        finally:
            self.arrived = None
        await self._refresh_break()
        await self._refresh_panel(self.active_panel())

    @work(exclusive=True, group="break")
    async def refresh_break(self) -> None:
        await self._refresh_break()

    async def _refresh_break(self) -> None:
        brk = job_events.break_shown(self)  # (paused for another rank's break: that rank's numbers)
        src = frames = locals_ = None
        if brk:
            src = await self.ask("source", self.source.source(4))
            frames = await self.ask("stack", self.source.frames())
            locals_ = await self.ask("locals", self.source.frame_locals())
        ended = self.status.get("state", "")
        # On the main screen (a dialog may be on top), and none once the app closes (a quit
        # while the answers were on their way ended the app with NoMatches).
        main = self.screen_stack[0] if self.screen_stack else None
        for panel in main.query(BreakPanel).results(BreakPanel) if main else []:
            panel.show(brk, rank_replays.shown(self), src, self.findings, ended=ended if ended.startswith("exited") else None,
                       frames=frames, locals_=locals_, output_shown=self.output_shown, interrupted=self.interrupted)
            source_fold.follow_frame(panel, brk, frames)  # (u, d: the frame's line in view)
        if brk and self.status.get("state") == "paused":  # (Tab's names, asked unbidden: a refusal is said
            try:  # nowhere; `c` pressed while the break's answers came said `names: ...pause it first`, CI)
                names = list(await self.source.attribute_names("", ""))  # (read running none of your code)
            except Exception:
                names = None
            main = self.screen_stack[0] if self.screen_stack else None
            if names and main:
                for repl in main.query("#repl").results(ReplLine):  # (Tab completes them)
                    repl.set_names(names)

    def active_panel(self) -> str:
        """The id of the panel shown on the main screen ("" once the app closes)."""
        tabs = self.screen_stack[0].query(TabbedContent).results(TabbedContent) if self.screen_stack else []
        return next((t.active for t in tabs), "")

    async def _refresh_panel(self, pid: str) -> None:
        """Panel `pid` asks the source for what it shows (none once the app closes: a quit while
        the status was on its way ended the app with NoMatches)."""
        main = self.screen_stack[0] if self.screen_stack and pid in BY_ID else None
        for panel in main.query(BY_ID[pid].cls).results(BY_ID[pid].cls) if main else []:
            await panel.load(self.source, self.status, self.history)

    def tick_panels(self) -> None:
        """The Ranks panel follows the job while it is shown (waits and countdowns move), and
        the Threads and Breaks panels a running job (it showed the stacks of when it was opened,
        or of the pause the job had left; a quiet breakpoint's last step stayed at the pause's)."""
        active = self.active_panel()
        if active == "ranks" or active in ("threads", "breakpoints") and self.status.get("state") == "running" and (
                self.connection == "connected"):
            self.load_panel(active)

    @on(TabbedContent.TabActivated)
    def tab_changed(self, event: TabbedContent.TabActivated) -> None:
        pane = next((n for n in self.focused.ancestors if isinstance(n, TabPane)), None) if self.focused else None
        if pane is not None and pane is not event.pane:  # the focus was in the panel now hidden (a break came):
            self.set_focus(keys_land(self.query_one(BY_ID[event.pane.id or ""].cls)))  # on the one shown, where keys
            # are keys (its number key: its field)
        if event.pane.id == "log":  # its lines wait for its width, which a scroll in the same frame
            log = self.query_one(LogPanel).query_one(RichLog)  # kept Textual from telling it: told here
            self.call_after_refresh(lambda: log.post_message(Resize(log.size, log.virtual_size, log.container_size)))
        kept, self.repl_after_tab = self.repl_after_tab, None  # (a REPL line that opened this panel: its answer)
        # the last answer was the panel left's (at 80x24 it took 3 lines of every panel)
        self.query_one("#repl-out", Static).update(kept[1] if kept and kept[0] == event.pane.id else "")
        self.load_panel(event.pane.id or "")

    @work(exclusive=True, group="panel")
    async def load_panel(self, pid: str) -> None:
        await self._refresh_panel(pid)

    # ------------------------------------------------------------------ actions

    def action_panel(self, pid: str, field: str = "") -> None:  # a number key: its table or scroll (Tensor: its name)
        if BY_ID[pid] not in shown(self.is_job):
            self.notify(one_process_words(BY_ID[pid]), severity="warning")
            return
        tabs, panel = self.query_one(TabbedContent), self.query_one(BY_ID[pid].cls)
        opening = tabs.active != pid
        tabs.active = pid
        # A panel opens at its top, its focus where it is (at 80x24 the Memory panel opened scrolled
        # to its table, the lines above it out of reach); its keys scroll from there.
        field = field or BY_ID[pid].field
        self.set_focus(self.query_one(field) if field else keys_land(panel), scroll_visible=False)
        if opening and isinstance(panel, ScrollableContainer):
            panel.scroll_home(animate=False)

    def action_breakpoints(self) -> None:  # b: 7, and the add box has the focus (7 alone: its table)
        self.action_panel("breakpoints", "#break-input")

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    # ------------------------------------------------------------------ inputs

    @on(Input.Submitted, "#tensor-name")
    @on(Input.Submitted, "#tensor-index")
    def tensor_submitted(self, event: Input.Submitted) -> None:
        if (fields := (panel := self.query_one(TensorPanel)).fields(event))[0]:
            self.run_worker(panel.open(self.source, *fields), group="tensor", exclusive=True)

    @on(DataTable.RowSelected, "#model-table")
    @on(DataTable.RowSelected, "#mem-largest")
    def open_in_tensor_panel(self, event: DataTable.RowSelected) -> None:
        """A module's first parameter (Model panel), or one of the largest tensors (Memory)."""
        name = str(event.row_key.value)
        module = self.query_one(ModelPanel).rows.get(name) if event.data_table.id == "model-table" else None
        self.query_one("#tensor-name", Input).value = module_expression(name) if module else name
        self.query_one(TabbedContent).active = "tensor"  # keys stay keys (2 goes back); its hint says so
        if module and not module.get("params"):
            self.query_one(TensorPanel).say(f"{name} ({module['type']}) has no parameters: nothing to inspect "
                                            "(its output is " + str(module.get("output_shape") or "-") + ")")
            return
        label, panel = first_parameter_words(name, module) if module else None, self.query_one(TensorPanel)
        # (the slice typed in its field too: it was not applied, the fifth walk's 5)
        self.run_worker(panel.open(self.source, *panel.fields(), label), group="tensor", exclusive=True)

    @on(DataTable.RowSelected, "#ranks-table")
    def rank_selected(self, event: DataTable.RowSelected) -> None:
        self.action_next_rank(int(str(event.row_key.value)))

    @on(Input.Submitted, "#repl")
    def repl_submitted(self, event: Input.Submitted) -> None:
        line = event.value.strip()  # (the line emptied itself on Enter: repl_field.ReplLine)
        if line:
            self.run_line(line)

    def on_key(self, event: Key) -> None:
        focused = self.focused
        action = next((b.action for b in self.BINDINGS if isinstance(b, Binding) and b.key == event.key), "")
        name = action.split("(")[0]
        if not isinstance(focused, Input) and name in AFTER_THE_END and not self.check_action(name, ()):
            self.job_ended(AFTER_THE_END[name])  # its binding is off after the end: says why, not nothing
            event.stop()
