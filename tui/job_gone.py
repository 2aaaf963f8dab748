"""A job whose process ended without a word (kill -9: its agent said nothing) while the app was
attached: the connection is lost and the job is gone. As at its end, the keys that drove it
leave the footer and say why when pressed, and nothing offers ctrl+r (the footer kept c, n, s
and r, each answering that the job was gone, and the toast said `ctrl+r reconnects`: the
twelfth walk's 2). ctrl+r says it, as after an end: nothing to reconnect to."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.widgets import Input

from stepdbg.client.connection import gone_words

from .break_panel import BreakPanel
from .job_events import ended_words

if TYPE_CHECKING:
    from textual.app import App

    _AppBase = App[str | None]
else:
    _AppBase = object


RECONNECTS = "ctrl+r reconnects"  # (the toast of a lost connection, while the job may be there)
LOST_TOASTS = (f"{RECONNECTS}; q quits", "q quits")  # what lost_words says before the job is known gone


def gone_header(session: dict[str, Any]) -> str:
    """The header's words for a job whose process is gone (its end unknown)."""
    return f"connection lost: job (pid {session.get('pid')}) gone"


class GoneWatch(_AppBase):
    """A mixin of StepdbgApp (through controls.ControlActions): `gone` says the job is gone."""

    source: Any
    status: dict[str, Any]
    connection: str
    is_job: bool
    reconnect: Any
    gone: str | None = None  # in words (stepdbg.client.connection.gone_words), once gone

    if TYPE_CHECKING:  # StepdbgApp's own
        def log_line(self, line: str, style: str = "") -> None: ...

    def on_mount(self) -> None:  # (Textual runs each class's on_mount: the app's own too)
        self.set_interval(1.0, self.see_if_gone)  # (a killed job's process may end just after its socket)

    def see_if_gone(self, tell: bool = True) -> None:
        """Whether the connection is lost and the job's process of this machine has ended (not
        a distributed job's: one rank's process is not the job). `tell`: a loss's toast says it
        (not where the caller's own toast will: a toast is added when its message is handled,
        so two told at once were both shown)."""
        if self.gone is None and self.connection != "connected" and not self.is_job and \
                not str(self.status.get("state", "")).startswith("exited"):
            self.gone = self.gone_words()
            if self.gone is not None:
                self.connection = gone_header(self.source.session)  # (the header says it)
                self.refresh_bindings()  # (controls.ControlActions.check_action)
                # The Log says it, as the header (it said only `connection lost: the connection to the
                # job closed`), and the Break panel no longer invites r: the seventeenth walk's 2
                self.log_line(self.gone, "bold")
                for panel in self.screen_stack[0].query(BreakPanel).results(BreakPanel) if self.screen_stack else []:
                    panel.job_gone()
                # The REPL line no longer invites Python in the paused frame (it did: the closing walk's 11)
                for line in self.screen_stack[0].query("#repl").results(Input) if self.screen_stack else []:
                    line.placeholder = f"the job (pid {self.source.session.get('pid')}) is gone: the panels keep " \
                                       "its last state; q closes"
                # The loss's toast offered ctrl+r (or, with nothing to reconnect to, said only `q
                # quits`) while the process was not yet reaped (CI, a parent slow to wait): it now
                # says the job is gone, and offers nothing
                if tell and any(n.message in LOST_TOASTS for n in getattr(self, "_notifications", ())):
                    self.tell_lost(f"{self.gone}; q quits")

    def tell_lost(self, words: str) -> None:
        """One toast says what now, the connection lost: an earlier loss's toast goes (a loss
        may be told twice: the job was said gone twice, CI's red of 2026-11-27)."""
        for toast in self.lost_toasts(words):
            self._unnotify(toast)  # type: ignore[attr-defined]
        self.notify(words, severity="error")

    def lost_toasts(self, *also: str) -> list[Any]:
        """The toasts that say the connection is lost, or the job gone, and what now (and `also`)."""
        said = (*LOST_TOASTS, *((f"{self.gone}; q quits",) if self.gone else ()), *also)
        return [n for n in getattr(self, "_notifications", ()) if n.message in said]

    def gone_words(self) -> str | None:
        """How the job is gone: a job launched here, as its parent knows it (killed by SIGKILL,
        exit code 137; a toast said `exit code unknown` under a header's 137: the closing walk's
        11); else that its process has ended; None while it runs."""
        child = getattr(self, "child", None)
        if child is not None:
            code = child.poll()
            return None if code is None else f"the job (pid {child.pid}) {ended_words(code)}"
        return gone_words(self.source.session)

    def lost_words(self) -> str:
        """What now, the connection lost: q, and ctrl+r where the job may still be there."""
        self.see_if_gone(tell=False)
        return f"{self.gone}; q quits" if self.gone else f"{RECONNECTS}; q quits" if self.reconnect else "q quits"


def same_job(before: dict[str, Any], after: dict[str, Any]) -> bool:
    """Whether a reconnect found the job it had lost (its session id and pid), not another."""
    return (before.get("id"), before.get("pid"), before.get("host")) == (
        after.get("id"), after.get("pid"), after.get("host"))
