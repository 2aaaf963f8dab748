"""A break that fires while the Breaks panel (7) is open shows the Break panel unless a
text field has the focus (issue 45, the tenth walk's 5; tui/pause_words.py's rule). The walk
met slow_loader staying on Breaks and lr_explode jumping to the Break panel: on_paused
switched the tab alone, the focus stayed on the hidden Breaks table, and Textual, hiding
it, gave the focus to the add box beside it, which showed the Breaks panel again (a race:
won by one demo, lost by the other). A real job (slow_loader, `--break data_wait>0.3`)
under Pilot at 80x24: 7 (its table) or b then escape, then c, to the next break."""

from __future__ import annotations

import asyncio

import pytest
from conftest import DEMOS, text_of, wait_for
from textual.widgets import Input, TabbedContent

pytestmark = pytest.mark.slow


@pytest.mark.timeout(240)
@pytest.mark.parametrize("keys", [("7",), ("b", "escape")])
async def test_a_break_shows_the_break_panel_from_the_breaks_table(tui_at_break, keys):
    async with tui_at_break("--break", "data_wait>0.3", script=DEMOS / "slow_loader.py", size=(80, 24)) as (app, pilot):
        first = app.status["step"]
        for k in keys:
            await pilot.press(k)
        await wait_for(pilot, lambda: app.focused is not None and app.focused.id == "breaks-table", "the Breaks table")
        await pilot.press("c")
        await wait_for(pilot, lambda: app.status.get("state") == "paused" and app.status["step"] != first, "the next break")
        await wait_for(pilot, lambda: f"step {app.status['step']} · before_forward" in text_of(app, "#break-record"),
                       "the Break panel's record")
        await pilot.pause()
        await pilot.pause()
        assert app.query_one(TabbedContent).active == "break", (app.focused, app.query_one(TabbedContent).active)
        assert not isinstance(app.focused, Input), app.focused


@pytest.mark.timeout(240)
async def test_a_break_keeps_the_add_box_that_has_the_focus(tui_at_break):
    """The one exception: typing in a field (b, the add box) stays there, the pause said under it.
    The box has the focus before the job goes on (another client's c): pressed `c b` at once, a
    busy machine drew the next break before `b` was handled (the full suite's red)."""
    from stepdbg import client

    async with tui_at_break("--break", "data_wait>0.3", script=DEMOS / "slow_loader.py", size=(80, 24)) as (app, pilot):
        first = app.status["step"]
        await pilot.press("escape", "b")
        await wait_for(pilot, lambda: app.focused is not None and app.focused.id == "break-input", "the add box")

        def go_on() -> None:
            with client.connect() as other:
                other.cont()

        await asyncio.to_thread(go_on)
        await wait_for(pilot, lambda: app.status.get("state") == "paused" and app.status["step"] != first, "the next break")
        await wait_for(pilot, lambda: "the job paused at step" in text_of(app, "#break-error"), "the note under the box")
        assert app.query_one(TabbedContent).active == "breakpoints"
        assert app.focused is not None and app.focused.id == "break-input", app.focused
