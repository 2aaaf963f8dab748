"""The app's screen (StepdbgApp's default, app.py): its footer says the keys that work in the
field that has the focus, and its tabs fit the terminal's width."""

from __future__ import annotations

from textual.binding import ActiveBinding, Binding
from textual.events import Resize
from textual.screen import Screen
from textual.widgets import Input, Tab, Tabs

from . import toasts
from .no_job import no_job

# The keys a field takes, for the footer while it has the focus (at 80x24 it was blank: a
# field takes the letters, so every key of the app left it): (key, words), by the field's id.
FIELD_KEYS = {
    "repl": (("enter", "run it"), ("up", "earlier lines"), ("escape", "keys again"), ("tab", "complete")),
    "tensor-name": (("enter", "show it"), ("escape", "keys again"), ("tab", "the slice")),
    "tensor-index": (("enter", "show it"), ("escape", "keys again"), ("tab", "next field")),
    "break-input": (("enter", "add it"), ("escape", "the table"), ("tab", "next field")),
}
# The fields whose Enter changes the job: after its end, or once it is gone, Enter does nothing
# there and the footer does not offer it (`⏎ add it` under a box whose placeholder said no spec
# is added: the nineteenth walk's 3). (The app draws the footer again at the end and the loss.)
CHANGE_THE_JOB = {"break-input"}


class MainScreen(Screen[None]):
    """The app's screen: its footer says the keys that work in the field that has the focus."""

    DEFAULT_CSS = toasts.CSS

    def on_resize(self, event: Resize) -> None:
        """Where the tabs are wider than the terminal (81 columns at 80: the tab bar scrolled
        a column, the first tab's first letter cut, on panels 5 to 9: the fifth walk's 12),
        each loses a column of its padding (as a distributed job's ten always do)."""
        for tabs in self.query("#panels"):
            wide = sum(len(tab.label.plain) + 2 for tab in tabs.query(Tab))
            tabs.set_class(event.size.width < wide, "-narrow")

    def on_screen_resume(self) -> None:  # (a resize under a dialog made the tabs -narrow: the closing walk of 05:50's 17)
        for tabs in self.query(Tabs).results(Tabs):  # the underline goes under the active tab as drawn now
            tabs.call_after_refresh(tabs._highlight_active, False)

    @property
    def active_bindings(self) -> dict[str, ActiveBinding]:
        bindings = super().active_bindings
        field = self.focused
        keys = FIELD_KEYS.get(field.id or "", ()) if isinstance(field, Input) else ()
        if field is not None and field.id in CHANGE_THE_JOB and no_job(self.app):
            keys = tuple((key, words) for key, words in keys if key != "enter")
        # (the field's own binding acts; shown first here: a click on it presses the key)
        shown = {key: ActiveBinding(self, Binding(key, f"field_key('{key}')", words), True) for key, words in keys}
        return {**shown, **{k: b for k, b in bindings.items() if k not in shown}}
