"""A text field of the app (the Tensor panel's name and slice, the Breaks panel's add box):
Tab and shift+Tab go to the next (previous) text field of its screen, never to a table or
a panel, whose keys drive the job. Tab went to the next widget that takes the focus: from
the slice field that was the REPL line, and from the REPL line the panel, where the next
letter typed (`s`) stepped the job (the tenth walk's 1). Escape leaves a field; the REPL
line's Tab completes (repl_field.ReplLine).

A field runs its own keys (backspace, ctrl+u, enter, tab, ...) when they reach it, in the
order typed: Textual types a letter when it reaches the field but runs a field's binding
only once the key has bubbled up to the app, so a burst (`BSpace BSpace BSpace p space y
Enter` in one terminal read) typed the letters first and ran `xyz` (the eleventh walk's 1)."""

from __future__ import annotations

from textual.binding import Binding
from textual.events import Key
from textual.widgets import Input


class Field(Input):
    BINDINGS = [Binding("tab", "next_field(1)", "next field", show=False),
                Binding("shift+tab", "next_field(-1)", "previous field", show=False)]

    def action_next_field(self, delta: int) -> None:
        """The focus on the text field `delta` away in its screen's focus order (round)."""
        fields = [w for w in self.screen.focus_chain if isinstance(w, Input)]
        if self in fields and len(fields) > 1:
            self.screen.set_focus(fields[(fields.index(self) + delta) % len(fields)])

    async def _on_key(self, event: Key) -> None:
        """A key of the field's own bindings runs now, between the letters typed before and after it."""
        if not event.is_printable:
            for binding in self._bindings.key_to_bindings.get(event.key, ()):
                if not binding.priority and await self.app.run_action(binding.action, self):
                    event.stop()
                    event.prevent_default()
                    return  # (else Input's own _on_key runs next: Textual calls each class's)
