"""The REPL line's field (repl_line.py runs what it holds). Its Tab completes, as `stepdbg
attach --repl`'s does, and the focus stays on the line: Tab went to the panel, and the
next letter typed (`s` of `loss`) stepped the job (the tenth walk's 1). Its ghost
suggestion (Right or Tab takes it) completes the name being typed, wherever on the line."""

from __future__ import annotations

import os
import re

from textual.binding import Binding
from textual.suggester import Suggester
from textual.widgets import Static

from .fields import Field
from .repl_complete import AFTER_DOT, AFTER_INDEX, NONE, NOT_AFTER_INDEX, attribute_names
from .repl_line import USAGE

LINE_WORDS = [w for w in USAGE if len(w) > 1]  # the line's commands, for Tab (not its one-letter words)


LAST_NAME = re.compile(r"(?<![\w.])[A-Za-z_]\w*$")  # the name being typed (not an attribute after a dot)


class LastName(Suggester):
    """The ghost suggestion: the name being typed (the line's last word: `p los`, not only a
    line that is one name) completed from `words`, the first in order."""

    def __init__(self, words: list[str]) -> None:
        super().__init__(case_sensitive=True)
        self.words = words

    async def get_suggestion(self, value: str) -> str | None:
        m = LAST_NAME.search(value)
        found = next((w for w in self.words if m and w.startswith(m.group()) and w != m.group()), None)
        return None if found is None or m is None else value + found[len(m.group()):]


class ReplLine(Field):
    """The REPL line. Its Tab completes, as `stepdbg attach --repl`'s does, and the focus
    stays on the line: Tab went to the panel, and the next letter typed (`s` of `loss`)
    stepped the job (the tenth walk's 1). A Tab that cannot complete says why under the
    line; escape leaves it."""

    BINDINGS = [Binding("tab", "complete", "complete", show=False),  # (up, down: run as typed, fields.Field)
                Binding("up", "app.recall_line(-1)", "earlier lines", show=False),
                Binding("down", "app.recall_line(1)", "later lines", show=False)]
    names: list[str] = []  # the paused frame's names (with the line's commands: what Tab completes)

    def on_mount(self) -> None:
        self.set_names([])

    def set_names(self, names: list[str]) -> None:
        self.names = sorted(set(names) | set(LINE_WORDS))
        self.suggester = LastName(self.names)

    async def action_complete(self) -> None:
        """The name before the cursor completed (after a dot: an attribute of the object
        before it, read in the job: repl_complete): whole where one name begins so, else as
        far as the names that begin so agree, and those names said under the line."""
        dot = AFTER_DOT.search(self.value[:self.cursor_position])
        if dot is not None:
            at = self.cursor_position
            found = await attribute_names(self.app.source, dot.group(1), dot.group(2))
            if isinstance(found, str):
                self.answer(f"Tab: {found}")
            elif self.cursor_position == at:  # (not typed on meanwhile)
                self.completed(dot.group(2), found, f"no attribute of {dot.group(1)} begins with {dot.group(2)!r}")
            return
        if AFTER_INDEX.search(self.value[:self.cursor_position]):
            self.answer(f"Tab: {NOT_AFTER_INDEX}")
            return
        m = LAST_NAME.search(self.value[:self.cursor_position])
        found = [w for w in self.names if m and w.startswith(m.group())]
        self.completed(m.group() if m else "", found if m else [], NONE + (f": none begins with {m.group()!r}" if m else ""))

    def completed(self, typed: str, found: list[str], none: str) -> None:
        common = os.path.commonprefix(found)
        if len(common) > len(typed):
            self.insert_text_at_cursor(common[len(typed):])
        if len(found) > 1:
            self.answer("Tab: " + ", ".join(found[:12]) + (", …" if len(found) > 12 else ""))
        elif found:  # one: completed, and the list of an earlier Tab goes (`model.`'s stayed under `opt.param_groups`)
            self.answer("")
        elif not found:
            self.answer(none + "; escape leaves the line (keys act on the job again)")

    async def action_submit(self) -> None:
        """The line goes to the app and the field empties now: what is typed after Enter in
        the same burst starts the next line (emptied when the app took the line, it was lost)."""
        await super().action_submit()
        self.value = ""

    def answer(self, words: str) -> None:
        """`words` under the line, where its answers go."""
        for out in self.screen.query("#repl-out").results(Static):
            out.update(words)
