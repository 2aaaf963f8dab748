"""A job whose process ended without a word (kill -9: its agent said nothing) while the app was
attached: the connection is lost and the job is gone. As at its end, the keys that drove it
leave the footer and say why when pressed, and nothing offers ctrl+r (the footer kept c, n, s
and r, each answering that the job was gone, and the toast said `ctrl+r reconnects`: the
twelfth walk's 2). ctrl+r says it, as after an end: nothing to reconnect to."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stepdbg.client.connection import gone_words

if TYPE_CHECKING:
    from textual.app import App

    _AppBase = App[str | None]
else:
    _AppBase = object


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

    def on_mount(self) -> None:  # (Textual runs each class's on_mount: the app's own too)
        self.set_interval(1.0, self.see_if_gone)  # (a killed job's process may end just after its socket)

    def see_if_gone(self) -> None:
        """Whether the connection is lost and the job's process of this machine has ended (not
        a distributed job's: one rank's process is not the job)."""
        if self.gone is None and self.connection != "connected" and not self.is_job and \
                not str(self.status.get("state", "")).startswith("exited"):
            self.gone = gone_words(self.source.session)
            if self.gone is not None:
                self.connection = gone_header(self.source.session)  # (the header says it)
                self.refresh_bindings()  # (controls.ControlActions.check_action)

    def lost_words(self) -> str:
        """What now, the connection lost: q, and ctrl+r where the job may still be there."""
        self.see_if_gone()
        return f"{self.gone}; q quits" if self.gone else "ctrl+r reconnects; q quits" if self.reconnect else "q quits"
