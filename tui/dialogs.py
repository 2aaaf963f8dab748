"""The app's modal dialogs: the learning rate, one line of input, quitting, the keys."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.binding import ActiveBinding, Binding
from textual.containers import Grid, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Footer, Input, Label, Static
from textual.widgets._toast import ToastRack

from stepdbg.client.info_text import num
from stepdbg.wire.ops import lr_typed

from . import toasts
from .fields import Field
from .help import HELP


class FieldDialog:
    """A dialog with a text field (fields.Field, whose keys act in the order typed): its footer
    says the dialog's own keys, which the field's tab and escape (not shown) hid (it was blank)."""

    _bindings: Any

    @property
    def active_bindings(self) -> dict[str, ActiveBinding]:
        own = {k: ActiveBinding(self, bs[0], True) for k, bs in self._bindings.key_to_bindings.items() if bs[0].show}
        return {**super().active_bindings, **own}  # type: ignore[misc]


PIN_WORDS = {True: "pinned: kept before every step", False: "not pinned: a scheduler may change it"}  # (fits 80 columns)


class PinBox(Checkbox):
    """The LR dialog's pin box: space turns it on and off, Enter sets the LR (Checkbox's
    own Enter toggled it, and the dialog stayed open: a walk's item 8), its words say on or
    off (the glyph was the same both ways, only its colour differed)."""

    inherit_bindings = False
    BINDINGS = [Binding("space", "toggle_button", "pin on/off"), Binding("enter", "screen.set", "set", show=False)]

    def watch_value(self) -> None:
        super().watch_value()
        self.BUTTON_INNER = "X" if self.value else " "  # (the glyph says it too, not its colour alone)
        self.label = PIN_WORDS[self.value]


class LrScreen(FieldDialog, ModalScreen[tuple[float, bool] | None]):
    """Ask for a learning rate and whether to pin it."""

    DEFAULT_CSS = """
    LrScreen { align: center middle; }
    LrScreen > Vertical { width: 72; max-width: 100%; height: auto; border: thick $accent; padding: 1 2; background: $surface; }
    LrScreen #lr-error { color: $error; width: 100%; }
    """
    # Its own footer, over the app's (whose c, n, s... do not apply here: the walk's item 26).
    BINDINGS = [Binding("enter", "set", "set"), Binding("tab", "app.focus_next", "next field"),
                Binding("escape", "dismiss(None)", "cancel")]
    AUTO_FOCUS = "#lr-value"

    def __init__(self, current: float | None, group: int | None) -> None:
        super().__init__()
        self.current = current
        self.group = group

    def compose(self) -> ComposeResult:
        with Vertical():
            g = "all groups" if self.group is None else f"group {self.group}"
            # (as the panels say a number: 0.0003, 1e-05; `0.0003000000142492354` from a float32 LR)
            yield Label(f"learning rate for {g}" + ("" if self.current is None else f" (now {num(self.current)})"))
            yield Field(placeholder="e.g. 1e-4", id="lr-value")  # (a burst's keys act in the order typed: fields.py)
            yield PinBox(PIN_WORDS[True], True, id="lr-pin")
            yield Label("", id="lr-error", markup=False)  # it quotes what was typed
            yield Button("set", variant="primary", id="lr-ok")
        yield Footer()

    def action_set(self) -> None:  # (Enter on the pin box; in the field it submits)
        self.submit()

    @on(Input.Submitted)
    @on(Button.Pressed, "#lr-ok")
    def submit(self) -> None:
        raw = self.query_one("#lr-value", Input).value.strip()
        try:
            lr = lr_typed(raw)
        except ValueError as e:
            self.query_one("#lr-error", Label).update(str(e) if raw else "type a learning rate, e.g. 1e-4")
            return
        self.dismiss((lr, self.query_one("#lr-pin", Checkbox).value))


class AskScreen(FieldDialog, ModalScreen[str | None]):
    """One line of input, stripped. A line `check` refuses (ValueError) keeps the dialog and
    the text, the reason under it, as the LR dialog does (the ranks dialog closed on `5,x`, a
    toast said why, and the next keys acted as commands)."""

    DEFAULT_CSS = """
    AskScreen { align: center middle; }
    AskScreen > Vertical { width: 64; max-width: 100%; height: auto; border: thick $accent; padding: 1 2; background: $surface; }
    AskScreen Label { width: 100%; }  /* a long question wraps, not cut */
    AskScreen #ask-error { color: $error; }
    """
    BINDINGS = [Binding("escape", "dismiss(None)", "cancel")]
    AUTO_FOCUS = "Input"

    def __init__(self, question: str, check: Callable[[str], object] = str) -> None:
        super().__init__()
        self.question = question
        self.check = check

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.question)
            yield Field()
            yield Label("", id="ask-error", markup=False)  # it quotes what was typed
        yield Footer()

    @on(Input.Submitted)
    def submit(self, event: Input.Submitted) -> None:
        answer = event.value.strip()
        try:
            self.check(answer)
        except ValueError as e:
            self.query_one("#ask-error", Label).update(str(e))
            return
        self.dismiss(answer)


class ChoiceScreen(ModalScreen[str | None]):
    """A question answered by a button or its key: the button's id, or None for cancel. It
    opens with the focus on the button that harms nothing (AUTO_FOCUS: the job left as it
    is), which Enter presses and its words name (the quit and Ctrl-C dialogs opened with no
    button focused, and Enter did nothing: the closing walk's 8). Opening, it takes the
    toasts down: they stood over its buttons (u pressed four times: four toasts, the
    closing walk's 6); toasts.DIALOG_CSS keeps those that come while it is open under its buttons."""

    DEFAULT_CSS = toasts.DIALOG_CSS

    def on_mount(self) -> None:
        # The button Enter presses looks the default (primary), the others do not: `c: continue it`
        # was painted primary while Enter was on `l: leave it paused` (the closing walk of 05:50's 14).
        self.query_one(self.AUTO_FOCUS or "Button", Button).variant = "primary"
        self.app.clear_notifications()  # (the screen under it, seen through it, keeps its own till told)
        for rack in self.app.screen_stack[0].query(ToastRack).results(ToastRack):
            rack.show(self.app._notifications)

    def action_pick(self, choice: str) -> None:
        self.dismiss(choice)

    def job_is(self, state: str) -> None:
        """The job's state changed while the question is asked: at its end the question is
        gone (the Break panel says the end, and q closes the window)."""
        if state.startswith("exited") and self.is_current:
            self.dismiss(None)

    @on(Button.Pressed)
    def pressed(self, event: Button.Pressed) -> None:
        self.dismiss(None if event.button.id == "cancel" else event.button.id)


class QuitScreen(ChoiceScreen):
    """What happens to the job when the UI goes: continue it (paused), leave it as it is, or
    end it. Running, `continue` and `leave it running` did the same (two buttons, one choice:
    the closing walk's 17): a job running is offered leave it running, end, cancel."""

    DEFAULT_CSS = """
    QuitScreen { align: center middle; }
    QuitScreen > Grid { grid-size: 2; grid-gutter: 1; width: 64; height: auto; border: thick $accent;
                        padding: 1 2; background: $surface; }
    QuitScreen Label { column-span: 2; width: 1fr; }
    QuitScreen Button { width: 1fr; }
    """
    BINDINGS = [Binding("c", "pick('continue')", "continue"), Binding("l", "pick('stay')", "leave it"),
                Binding("e", "pick('end')", "end"), Binding("escape", "dismiss(None)", "cancel")]
    AUTO_FOCUS = "#stay"  # (the job as it is)

    def __init__(self, state: str) -> None:
        super().__init__()
        self.state = state

    def compose(self) -> ComposeResult:
        with Grid():
            yield Label(self.question(), id="question")
            yield Button("c: continue it", id="continue")
            yield Button(self.leave_words(), id="stay")
            yield Button("e: end it (exit code 3)", id="end", variant="error")
            yield Button("cancel", id="cancel")
        yield Footer()

    def on_mount(self) -> None:
        self.show_state()

    def paused(self) -> bool:
        return self.state == "paused"

    def question(self) -> str:
        return f"Quit stepdbg. What happens to the job?\nEnter: l, it stays {'paused' if self.paused() else 'running'}"

    def leave_words(self) -> str:
        """l leaves the job as it is: paused, or running (it said `leave it paused` of a job
        running, which went on running: the sixth walk's 2)."""
        return f"l: leave it {'paused' if self.paused() else 'running'} (re-attach later)"

    def show_state(self) -> None:
        """The words and buttons for the job's state: `continue` only where it is paused."""
        self.query_one("#question", Label).update(self.question())
        self.query_one("#stay", Button).label = self.leave_words()
        self.query_one("#continue", Button).display = self.paused()
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.paused() or parameters != ("continue",)

    def job_is(self, state: str) -> None:
        self.state = state
        self.show_state()
        super().job_is(state)


class CtrlCScreen(ChoiceScreen):
    """Ctrl-C in the TUI: interrupt the job as Ctrl-C at its terminal would, or quit the UI.
    A second Ctrl-C interrupts the job, as a second Ctrl-C does at a terminal (it did nothing:
    the closing walk's 18); Enter cancels."""

    DEFAULT_CSS = """
    CtrlCScreen { align: center middle; }
    CtrlCScreen > Grid { grid-size: 1; grid-gutter: 1; width: 64; height: auto; border: thick $accent;
                         padding: 1 2; background: $surface; }
    CtrlCScreen Button { width: 1fr; }
    """
    BINDINGS = [Binding("i,ctrl+c", "pick('interrupt')", "interrupt the job"), Binding("q", "pick('quit')", "quit"),
                Binding("escape", "dismiss(None)", "cancel")]
    AUTO_FOCUS = "#cancel"  # (the job as it is)

    def compose(self) -> ComposeResult:
        with Grid():
            yield Label("Ctrl-C. Which do you mean?\nEnter: cancel; Ctrl-C again: interrupt the job")
            yield Button("i: interrupt the job (its own Ctrl-C handling runs)", id="interrupt", variant="error")
            yield Button("q: quit the UI (then: continue, leave paused or end)", id="quit")
            yield Button("cancel (escape, Enter)", id="cancel")
        yield Footer()


class HelpScroll(VerticalScroll):
    """The help's scroll, where the terminal is shorter than the help. Its border says which
    lines show and whether that is the end, and its thumb is in the accent colour: the walk
    read the thumb as mid-way at the end (a capture without colours shows only the thumb's
    top edge, mid-way, and the thumb itself was navy on black)."""

    def on_mount(self) -> None:
        self.watch(self, "scroll_y", self.say_where)

    def on_resize(self) -> None:
        self.call_after_refresh(self.say_where)

    def say_where(self) -> None:
        total, shown = self.virtual_size.height, self.scrollable_content_region.height
        top = round(self.scroll_y)
        self.border_subtitle = "" if total <= shown else (
            f"lines {top + 1}–{min(total, top + shown)} of {total}"
            + (" · the end" if top >= self.max_scroll_y else " · ↓ more"))


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > HelpScroll { width: 84; max-width: 100%; height: auto; max-height: 100%;
                              border: thick $accent; padding: 1 2; background: $surface;
                              scrollbar-background: $panel; scrollbar-color: $accent;
                              scrollbar-color-hover: $accent-lighten-1; scrollbar-color-active: $accent-lighten-2; }
    """
    BINDINGS = [Binding("escape,question_mark,h,q", "dismiss(None)", "close")]
    AUTO_FOCUS = "HelpScroll"  # its keys scroll at once

    def compose(self) -> ComposeResult:  # scrolls (↑↓, PgUp/PgDn) where the terminal is shorter than the help
        with HelpScroll():
            yield Static(HELP)
        yield Footer()
