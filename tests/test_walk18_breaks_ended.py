"""The Breaks panel (7) after the job's end (issue 45's eighteenth walk, 4): it still said
`keys act on the job here (n steps it) · b or Tab: type a spec below`, and `nan` Enter in the
add box did nothing and said nothing. After the end it says the breakpoints take no change.
A real job under Pilot at 80x24."""

from __future__ import annotations

import pytest
from conftest import wait_for
from tui_walk import screen_text, settled

pytestmark = pytest.mark.timeout(300)


async def test_after_the_end_the_breaks_panel_says_they_take_no_change(tui_at_break):
    async with tui_at_break("--break", "step==2") as (app, pilot):
        await pilot.press("c")
        await wait_for(pilot, lambda: str(app.status.get("state", "")).startswith("exited"), "the job's end")
        await pilot.press("7")
        await settled(pilot, app)
        shown = " ".join(screen_text(app, skip=()).split())
        assert "the job has ended: its breakpoints as they were; they take no change now" in shown, shown
        assert "keys act on the job here" not in shown, shown
