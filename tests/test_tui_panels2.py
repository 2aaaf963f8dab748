"""Panels a newcomer's walk at 80x24 met (issue 45, items 10-19): each looked at where the
person looks, the TUI under Pilot attached to a real job of its own (conftest's
tui_at_break); each failed before its fix."""

from __future__ import annotations

from conftest import DEMOS, text_of, wait_for
from test_tui_fixes import real
from textual.widgets import Input
from tui_walk import settled


@real
async def test_a_name_typed_in_the_tensor_panel_replaces_the_one_shown(tui_at_break):
    """3, then a name typed: the field kept `loss` with the cursor at its end, and typing
    `x` asked for `lossx` (item 10). Focused again (escape, 3), the same."""
    async with tui_at_break("--break", "nan", script=DEMOS / "nan_log.py") as (app, pilot):
        await pilot.press("3")
        field = app.query_one("#tensor-name", Input)
        await wait_for(pilot, lambda: "loss" in text_of(app, "#tensor-summary"), "the loss")
        await settled(pilot, app)
        assert app.focused is field
        await pilot.press("x", "enter")
        await settled(pilot, app)
        assert field.value == "x", field.value
        await wait_for(pilot, lambda: text_of(app, "#tensor-summary").startswith("x "), "x's summary")
        await pilot.press("escape", "3", *"loss")
        await settled(pilot, app)
        assert field.value == "loss", field.value

