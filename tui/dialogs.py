"""The app's modal dialogs: the learning rate, one line of input, quitting, the keys."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Label, Static

from stepdbg.wire.ops import lr_typed

from .panel_table import help_lines

# Each line fits 72 columns: the dialog's inside at an 80-column terminal (a longer line
# wrapped to the left edge, out of its column).
HELP = f"""\
[b]keys[/b]   (escape, ? or q closes this; ↑↓ PgUp PgDn scroll it)
  c       continue                 p   pause at the next pause point
  n       next phase               s   same pause point, next step
  r       replay the step under anomaly detection: the op, module, line
  D       diff: the step twice from the same state; where the runs part
          (module, op, line) and the randomness that moved (the Log)
  l       set the learning rate (once or pinned)
  k       skip this step's update
  R       rewind to the newest snapshot before this step
          (--keep-every N; the Memory panel lists them)
  b       breakpoints: the add box takes what is typed, Enter adds it
  e       the REPL line: Python in the paused frame (↑↓ history)
  3       Tensor: its name field takes what is typed (Tab: the slice)
{help_lines()}
  u d     select the frame out (toward main) / in: the source, the
          locals and the REPL line follow
  q       quit: continue the job, leave it paused (to attach again)
          or end it
  ctrl+c  interrupt the job (its own Ctrl-C handling runs) or quit;
          in the REPL line: its code
  ctrl+r  reconnect after the connection was lost
  t       the next rank (a distributed job)
  0       Ranks: every rank's state (running, paused, in a collective
          with the time its timeout leaves, dead with its exit code)
  o       which ranks get stepping, LR, skip, breakpoints (0,2-3, all)
          `diff ranks` in the REPL line (e): the first parameter or
          gradient whose replicas differ across the ranks, and the ranks
  ?       this help
  escape  close a dialog, leave a field (keys are keys again; in
          Breaks its table: space turns one on/off, delete removes)"""


class LrScreen(ModalScreen[tuple[float, bool] | None]):
    """Ask for a learning rate and whether to pin it."""

    DEFAULT_CSS = """
    LrScreen { align: center middle; }
    LrScreen > Vertical { width: 72; max-width: 100%; height: auto; border: thick $accent; padding: 1 2; background: $surface; }
    LrScreen #lr-error { color: $error; width: 100%; }
    """
    BINDINGS = [Binding("escape", "dismiss(None)", "cancel")]
    AUTO_FOCUS = "#lr-value"

    def __init__(self, current: float | None, group: int | None) -> None:
        super().__init__()
        self.current = current
        self.group = group

    def compose(self) -> ComposeResult:
        with Vertical():
            g = "all groups" if self.group is None else f"group {self.group}"
            yield Label(f"learning rate for {g} (now {self.current})")
            yield Input(placeholder="e.g. 1e-4", id="lr-value")
            yield Checkbox("pin it (re-applied before every step; schedulers scaled)", True, id="lr-pin")
            yield Label("", id="lr-error", markup=False)  # it quotes what was typed
            yield Button("set", variant="primary", id="lr-ok")

    @on(Input.Submitted)
    @on(Button.Pressed, "#lr-ok")
    def submit(self) -> None:
        raw = self.query_one("#lr-value", Input).value.strip()
        try:
            lr = lr_typed(raw)
        except ValueError as e:
            self.query_one("#lr-error", Label).update(str(e))
            return
        self.dismiss((lr, self.query_one("#lr-pin", Checkbox).value))


class AskScreen(ModalScreen[str | None]):
    """One line of input."""

    DEFAULT_CSS = """
    AskScreen { align: center middle; }
    AskScreen > Vertical { width: 64; max-width: 100%; height: auto; border: thick $accent; padding: 1 2; background: $surface; }
    AskScreen Label { width: 100%; }  /* a long question wraps, not cut */
    """
    BINDINGS = [Binding("escape", "dismiss(None)", "cancel")]
    AUTO_FOCUS = "Input"

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.question)
            yield Input()

    @on(Input.Submitted)
    def submit(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip())


class ChoiceScreen(ModalScreen[str | None]):
    """A question answered by a button or its key: the button's id, or None for cancel."""

    def action_pick(self, choice: str) -> None:
        self.dismiss(choice)

    @on(Button.Pressed)
    def pressed(self, event: Button.Pressed) -> None:
        self.dismiss(None if event.button.id == "cancel" else event.button.id)


class QuitScreen(ChoiceScreen):
    """What happens to the job when the UI goes: continue, stay paused, or end."""

    DEFAULT_CSS = """
    QuitScreen { align: center middle; }
    QuitScreen > Grid { grid-size: 2; grid-gutter: 1; width: 64; height: auto; border: thick $accent;
                        padding: 1 2; background: $surface; }
    QuitScreen Label { column-span: 2; width: 1fr; }
    QuitScreen Button { width: 1fr; }
    """
    BINDINGS = [Binding("escape", "dismiss(None)", "cancel"), Binding("c", "pick('continue')", show=False),
                Binding("l", "pick('stay')", show=False), Binding("e", "pick('end')", show=False)]

    def compose(self) -> ComposeResult:
        with Grid():
            yield Label("Quit stepdbg. What happens to the job?")
            yield Button("c: continue it", id="continue", variant="primary")
            yield Button("l: leave it paused (re-attach later)", id="stay")
            yield Button("e: end it (exit code 3)", id="end", variant="error")
            yield Button("cancel", id="cancel")


class CtrlCScreen(ChoiceScreen):
    """Ctrl-C in the TUI: interrupt the job as Ctrl-C at its terminal would, or quit the UI."""

    DEFAULT_CSS = """
    CtrlCScreen { align: center middle; }
    CtrlCScreen > Grid { grid-size: 1; grid-gutter: 1; width: 64; height: auto; border: thick $accent;
                         padding: 1 2; background: $surface; }
    CtrlCScreen Button { width: 1fr; }
    """
    BINDINGS = [Binding("escape", "dismiss(None)", "cancel"), Binding("i", "pick('interrupt')", show=False),
                Binding("q", "pick('quit')", show=False)]

    def compose(self) -> ComposeResult:
        with Grid():
            yield Label("Ctrl-C. Which do you mean?")
            yield Button("i: interrupt the job (its own Ctrl-C handling runs)", id="interrupt", variant="error")
            yield Button("q: quit the UI (then: continue, leave paused or end)", id="quit", variant="primary")
            yield Button("cancel (escape)", id="cancel")


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 84; max-width: 100%; height: auto; max-height: 100%;
                                  border: thick $accent; padding: 1 2; background: $surface; }
    """
    BINDINGS = [Binding("escape,question_mark,q", "dismiss(None)", "close")]
    AUTO_FOCUS = "VerticalScroll"  # its keys scroll at once

    def compose(self) -> ComposeResult:  # scrolls (↑↓, PgUp/PgDn) where the terminal is shorter than the help
        with VerticalScroll():
            yield Static(HELP)
