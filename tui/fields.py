"""A text field of the app (the Tensor panel's name and slice, the Breaks panel's add box):
Tab and shift+Tab go to the next (previous) text field of its screen, never to a table or
a panel, whose keys drive the job. Tab went to the next widget that takes the focus: from
the slice field that was the REPL line, and from the REPL line the panel, where the next
letter typed (`s`) stepped the job (the tenth walk's 1). Escape leaves a field; the REPL
line's Tab completes (repl_field.ReplLine).

A field runs its own keys (backspace, ctrl+u, enter, tab, ...) when they reach it, in the
order typed: Textual types a letter when it reaches the field but runs a field's binding
only once the key has bubbled up to the app, so a burst (`BSpace BSpace BSpace p space y
Enter` in one terminal read) typed the letters first and ran `xyz` (the eleventh walk's 1).
So do the keys a field leaves by (escape: keys again, on the panel shown; Tab: the next field):
the keys typed after them in the same read had been handed to the field already, and were
typed into it (`Escape c` left `c` in the line, the job not continued); they go where the focus
is now, in order (the twelfth walk's 1). Escape and a key in one read reach a terminal app as
that key with alt (`\x1bl`: alt+l; tmux sends it so for an Escape typed within its escape-time,
500 ms, of the next key), and Textual reads Escape and a digit as WezTerm's macOS Option+digit
(`\x1b5`: `∞`): in a field of the main screen each is Escape, then the key, which goes where
escape put the focus (alt+l typed `l` into the line; Escape 5 typed `∞` into the Tensor
panel's name, and the Tab after it went round the fields, never to the Mem table: the twelfth
walk's 3). (A `∞` typed as itself on a Mac's Option+5 is read so too.) In a dialog, escape
and a Tab with no other field are the dialog's (it closes; its next widget).

A field made with `empties=True` (the Breaks panel's add box) is emptied at Enter, as the key
is run, so what is typed next is a spec of its own: emptied once the job had answered the add,
the keys typed meanwhile (`loss>8` Enter `stale_grad` Enter) were glued to the spec still in
it, and the second Enter sent `loss>8stale_grad` (the closing walk of 05:50's 2)."""

from __future__ import annotations

from typing import Any

from textual._ansi_sequences import ANSI_SEQUENCES_KEYS
from textual.actions import SkipAction
from textual.binding import Binding
from textual.events import Key
from textual.keys import _character_to_key
from textual.widgets import Input

# The characters Textual reads Escape and a key as (`\x1b5`: `∞`), and that key.
AFTER_ESCAPE = {v: k[1] for k, v in ANSI_SEQUENCES_KEYS.items() if len(k) == 2 and k[0] == "\x1b" and isinstance(v, str)}


def after_escape(event: Key) -> str | None:
    """The key typed after Escape where the terminal's read makes one key of the two, else None."""
    if event.key.startswith("alt+") and event.is_printable and len(event.character or "") == 1:
        return event.character
    return AFTER_ESCAPE.get(event.character or "")


class Field(Input):
    BINDINGS = [Binding("tab", "next_field(1)", "next field", show=False),
                Binding("shift+tab", "next_field(-1)", "previous field", show=False),
                Binding("escape", "app.leave_field", "keys again", show=False)]  # (repl_line.ReplActions)
    left = False  # its own key took the focus away: the keys typed after it go where the focus is

    def __init__(self, *args: Any, empties: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.empties = empties  # emptied at Enter (its Submitted holds what was typed)

    async def action_submit(self) -> None:
        await super().action_submit()  # (posts Submitted with the value typed up to Enter)
        if self.empties:
            self.value = ""

    def on_focus(self) -> None:
        self.left = False  # (the keys that come now are typed here; a break's tab change leaves them here)

    def action_next_field(self, delta: int) -> None:
        """The focus on the text field `delta` away in its screen's focus order (round)."""
        fields = [w for w in self.screen.focus_chain if isinstance(w, Input)]
        if self not in fields or len(fields) < 2:
            raise SkipAction()  # (a dialog's one field: its screen's Tab)
        self.screen.set_focus(fields[(fields.index(self) + delta) % len(fields)])

    async def _on_key(self, event: Key) -> None:
        """A key of the field's own bindings runs now, between the letters typed before and after
        it; a key typed after one that took the focus away goes where the focus is now."""
        if self.left and self.app.focused is not self:
            event.stop()
            event.prevent_default()
            self._hand_on(Key(event.key, event.character))
            return
        key = after_escape(event)
        if key and event.key not in self._bindings.key_to_bindings and await self.app.run_action("app.leave_field", self):
            event.stop()
            event.prevent_default()
            self.left = True
            self._hand_on(Key(_character_to_key(key), key))
            return
        if not event.is_printable:
            for binding in self._bindings.key_to_bindings.get(event.key, ()):
                if not binding.priority and await self.app.run_action(binding.action, self):
                    self.left = self.app.focused is not self
                    event.stop()
                    event.prevent_default()
                    return  # (else Input's own _on_key runs next: Textual calls each class's)

    def _hand_on(self, key: Key) -> None:
        """`key`, typed after the focus left this field, to where the focus is now."""
        (self.app.focused or self.app.screen)._forward_event(key)
