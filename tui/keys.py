"""Escape and a key in one terminal read, outside a text field (the closing walk's 9).

A terminal sends Escape and the key typed just after it as one key with alt (`\\x1bq`:
alt+q; tmux so sends `Escape q` given in one go, or typed within its escape-time), and
Textual reads Escape and a digit as one character (`\\x1b5`: `∞`): fields.after_escape.
In a text field fields.Field makes them Escape, then the key; outside one the key was lost:
no binding is alt+q, so `Escape q` on the Break panel opened no quit dialog, and in a
dialog neither closed it nor acted. Here, outside a field, each is Escape (its binding: a
dialog closes), then the key, on the screen and widget that Escape left the focus on."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.events import Key
from textual.keys import _character_to_key
from textual.widgets import Input

from .fields import after_escape

if TYPE_CHECKING:
    from textual.app import App

    _AppBase = App[str | None]
else:
    _AppBase = object


class EscapeThenKey(_AppBase):
    """A mixin of StepdbgApp: Escape and a key read as one, outside a field, are both keys."""

    async def on_key(self, event: Key) -> None:  # (Textual runs each class's on_key: the app's own too)
        key = after_escape(event)
        if key is None or isinstance(self.focused, Input):
            return  # (in a field: fields.Field's)
        event.stop()
        event.prevent_default()
        await self._check_bindings("escape")  # (a dialog's: it closes, at once)
        then = Key(_character_to_key(key), key)
        if not await self._check_bindings(then.key, priority=True):
            (self.focused or self.screen)._forward_event(then)
