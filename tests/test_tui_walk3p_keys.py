"""Keys the third newcomer's walk met (issue 45, item 26): the TUI under Pilot at 80x24,
attached to a real job of its own (conftest's tui_at_break); failed before its fix."""

from __future__ import annotations

from conftest import DEMOS, text_of, wait_for
from test_tui_fixes import real
from textual.widgets import Input, TabbedContent
from tui_walk import screen_text, settled


@real
async def test_a_dialogs_footer_names_its_own_keys_and_the_help_names_tab_and_enter(tui_at_break):
    """l: under the LR dialog the footer still said `c cont  n phase  s step ...`, keys that
    do nothing there; ? did not name Tab, nor Enter on a row; 3 then 4 typed a 4 into the
    name field with nothing on screen saying that number keys type there."""
    async with tui_at_break("--break", "nan", script=DEMOS / "nan_log.py") as (app, pilot):
        await pilot.press("l")
        await wait_for(pilot, lambda: "learning rate for" in screen_text(app), "the LR dialog")
        await settled(pilot, app)
        footer = screen_text(app, skip=()).splitlines()[-1]
        assert "cancel" in footer and "cont" not in footer and "phase" not in footer, footer
        await pilot.press("escape", "question_mark")
        await wait_for(pilot, lambda: "keys" in screen_text(app), "the help")
        await settled(pilot, app)
        shown = " ".join(screen_text(app).split())
        assert "Tab the next field or table" in shown and "Enter in a field: runs it; on a row:" in shown, shown
        step = app.status["paused"]["step"]
        await pilot.press("escape", "3")  # (its name field: there number keys type, but one typed first)
        await wait_for(pilot, lambda: "loss" in text_of(app, "#tensor-summary"), "the loss")
        await pilot.press("x", "4")  # (a digit typed first is a number key: the twentieth walk's 1)
        await settled(pilot, app)
        assert app.query_one(TabbedContent).active == "tensor" and app.query_one("#tensor-name", Input).value == "x4"
        assert "escape: keys again (here number keys type)" in screen_text(app), screen_text(app)
        assert app.status["state"] == "paused" and app.status["paused"]["step"] == step, app.status
