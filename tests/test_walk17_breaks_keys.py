"""The Breaks panel (7) says where the keys go (issue 45's seventeenth walk, 1): its hint
said `b: type a spec below, Enter adds it` while the table had the focus; a newcomer typed
`nan` and `n` stepped the job, `cnsqk` stepped it, opened Quit and Enter closed the TUI.
With the table's focus the hint says the keys act on the job, and how to type (b or Tab);
with the box's, what Enter and escape do. A real job under Pilot at 80x24."""

from __future__ import annotations

from test_tui_fixes import real
from test_walk10_tui_fields import at_break
from textual.widgets import Input
from tui_walk import screen_text, settled


@real
async def test_the_breaks_hint_says_where_the_keys_go(tui_at_break):
    async with tui_at_break("--break", "step==2", size=(80, 24)) as (app, pilot):
        await at_break(app, pilot)
        await pilot.press("7")
        await settled(pilot, app)
        shown = screen_text(app, skip=())
        assert "keys act on the job here (n steps it)" in shown and "b or Tab: type a spec" in shown, shown
        assert "b: type a spec below, Enter adds it" not in shown, shown
        await pilot.press("tab")
        await settled(pilot, app)
        assert app.focused is app.query_one("#break-input", Input), app.focused
        shown = screen_text(app, skip=())
        assert "Enter adds the spec typed" in shown and "keys act on the job" not in shown, shown
        step = app.status.get("step"), app.status.get("phase")
        await pilot.press(*"nan")
        await settled(pilot, app)
        assert app.query_one("#break-input", Input).value == "nan" and (app.status.get("step"), app.status.get("phase")) == step
        await pilot.press("escape")
        await settled(pilot, app)
        assert "keys act on the job here" in screen_text(app, skip=()), screen_text(app, skip=())
