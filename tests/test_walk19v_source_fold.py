"""The Break panel's source view keeps the chosen frame's line in view (issue 45's eighteenth
walk, 2): after `r` the replay's words above the source grow the panel, and `u` to the
script's `<module>` left its line, `❱ 66 main()`, below the fold at 80x24. Now u and d scroll
the panel to the frame's line. A real job of demos/nan_log.py under Pilot at 80x24."""

from __future__ import annotations

import re

import pytest
from conftest import DEMOS, marked_line, wait_for
from tui_walk import screen_text, settled

pytestmark = pytest.mark.timeout(300)

SCRIPT = DEMOS / "nan_log.py"


def chosen_line(app) -> int | None:
    """The number of the source line marked ❱ on screen, None where it is not on screen."""
    m = re.search(r"❱\s+(\d+)\s", screen_text(app))
    return int(m.group(1)) if m else None


async def test_u_and_d_after_a_replay_keep_the_frames_line_in_view(tui_at_break):
    main_call = next(n for n, ln in enumerate(SCRIPT.read_text().splitlines(), 1) if ln.strip() == "main()")
    backward = marked_line(SCRIPT, "nan-here") and next(
        n for n, ln in enumerate(SCRIPT.read_text().splitlines(), 1) if ln.strip() == "loss.backward()")
    async with tui_at_break("--break", "nan", script=SCRIPT) as (app, pilot):
        await pilot.press("r")
        await wait_for(pilot, lambda: "replay: " in screen_text(app), "the replay's words")
        await settled(pilot, app)
        await pilot.press("u")
        await settled(pilot, app)
        assert chosen_line(app) == main_call, screen_text(app)  # (it was below the fold)
        await pilot.press("d")
        await settled(pilot, app)
        assert chosen_line(app) == backward, screen_text(app)
