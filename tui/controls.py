"""The app's controls of the job: stepping, replay, changes, the paused stack, Ctrl-C,
quitting and the ranks in view. A mixin of StepdbgApp (app.py): each asks the source and shows the answer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual import work
from textual.widgets import DataTable, TabbedContent

from .break_panel import ELSEWHERE, BreakPanel
from .dialogs import AskScreen, CtrlCScreen, LrScreen, QuitScreen
from .messages import JobEvent

if TYPE_CHECKING:
    from textual.app import App

    _AppBase = App[str | None]
else:
    _AppBase = object


class ControlActions(_AppBase):
    """The actions behind c n s p r D l k R u d q t o and ctrl+c."""

    source: Any
    status: dict[str, Any]
    connection: str
    evaluating: bool
    quit_choice: str | None
    replay_result: dict[str, Any] | None
    is_job: bool
    output_shown: bool
    interrupted: bool | str  # True: this window sent the job Ctrl-C; break_panel.ELSEWHERE: another client did

    if TYPE_CHECKING:  # StepdbgApp's own
        async def ask(self, what: str, coro: Any) -> Any: ...
        async def _refresh_break(self) -> None: ...
        async def _refresh_panel(self, pid: str) -> None: ...
        def action_panel(self, pid: str) -> None: ...
        def log_line(self, line: str, style: str = "") -> None: ...
        def refresh_all(self) -> None: ...

    def _resume(self, what: str, coro: Any) -> None:
        state = str(self.status.get("state", ""))
        if state.startswith("exited"):  # (not "the job is not paused": it is gone)
            self.notify(f"the job has {state.replace('exited (', 'ended (exit code ')}: nothing to {what}",
                        severity="warning")
            coro.close()
            return
        if state != "paused":
            self.notify("the job is not paused", severity="warning")
            coro.close()
            return
        self.run_worker(self.ask(what, coro), group="control")

    def action_cont(self) -> None:
        self._resume("continue", self.source.cont())

    def action_next_phase(self) -> None:
        self._resume("next phase", self.source.next_phase())

    def action_next_step(self) -> None:
        self._resume("next step", self.source.next_step())

    def action_pause(self) -> None:
        self.run_worker(self.ask("pause", self.source.pause()), group="control")
        self.notify("pausing at the next pause point…")

    def action_replay(self) -> None:
        if self.status.get("state") != "paused":
            self.notify("replay needs a paused step", severity="warning")
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
        if self.status.get("state") != "paused":
            self.notify("diff needs a paused step", severity="warning")
            return
        self.do_diff()

    @work(exclusive=True, group="diff")
    async def do_diff(self) -> None:
        self.notify("running the step twice from the same state…")
        result = await self.ask("diff", self.source.diff_step())
        if result is not None:
            if not self.output_shown:  # (where the job's output reaches the Log, its own `stepdbg: diff: ...` says it)
                self.log_line(f"diff: {result['summary']}")
            self.notify(result["summary"], title="diff", timeout=30)

    def action_set_lr(self) -> None:
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
            self.notify(f"LR set to {lr:g}{' (pinned)' if pin else ''}")
            await self._refresh_panel(self.query_one(TabbedContent).active)

    @work(group="control")
    async def action_skip(self) -> None:
        if await self.ask("skip", self.source.skip_step()) is not None:
            self.notify("this step's update will not be applied")

    @work(group="control")
    async def action_rewind(self) -> None:  # R: back to the newest snapshot before this step, then on
        r = await self.ask("rewind", self.source.rewind())
        if r is not None:
            self.notify(f"rewinding to the snapshot of step {r['to_step']} where step {r['step']} ends")

    def action_quit_job(self) -> None:
        if self.connection != "connected":
            self.exit(None)
            return

        def done(choice: str | None) -> None:
            if choice is not None:
                self.quit_choice = choice
                self.exit(choice)

        self.push_screen(QuitScreen(), done)

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
        if self.status.get("state") != "paused":
            self.notify("the job is not paused", severity="warning")
            return
        frames = await self.ask("stack", self.source.frames(move))
        if frames:
            sel = next(f for f in frames if f["selected"])
            self.notify(f"frame {sel['function']}() at {sel['file'].rsplit('/', 1)[-1]}:{sel['line']}", timeout=3)
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

        def done(answer: str | None) -> None:
            if answer is None:
                return
            from stepdbg.client.job import parse_ranks

            try:
                self.source.targets = None if answer in ("", "all") else parse_ranks(answer, len(self.source.clients))
            except ValueError as e:
                self.notify(str(e), severity="error")
                return
            self.notify(f"stepping and changes go to ranks {'all' if self.source.targets is None else self.source.targets}")

        self.push_screen(AskScreen("send stepping, LR, skip and breakpoints to ranks (e.g. 0,2-3 or all)"), done)
