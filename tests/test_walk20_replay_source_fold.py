"""After `r` the Break panel keeps the paused line (❱) in view (issue 45's nineteenth walk,
2): the replay's words above the source grew the panel and pushed `❱ NN loss.backward()`
below the fold at 80x24 (a6c7cd5 made u and d follow the ❱ line, r did not). Now a replay
drawn in the panel scrolls it to the ❱ line, the replay's first words kept on screen where
both fit. A real job of demos/nan_log.py under Pilot at 80x24."""

from __future__ import annotations

import pytest
from conftest import DEMOS, wait_for
from test_walk19v_source_fold import chosen_line
from tui_walk import screen_text, settled

pytestmark = pytest.mark.timeout(300)

SCRIPT = DEMOS / "nan_log.py"


async def test_r_keeps_the_paused_line_in_view(tui_at_break):
    backward = next(n for n, ln in enumerate(SCRIPT.read_text().splitlines(), 1) if ln.strip() == "loss.backward()")
    async with tui_at_break("--break", "nan", script=SCRIPT) as (app, pilot):
        await wait_for(pilot, lambda: chosen_line(app) == backward, "the paused line, before r")
        await pilot.press("r")
        await wait_for(pilot, lambda: "replay: " in screen_text(app), "the replay's words")
        await settled(pilot, app)
        assert chosen_line(app) == backward and "replay: " in screen_text(app), screen_text(app)
