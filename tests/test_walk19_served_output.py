"""Issue 45's eighteenth walk's leftovers, 5: a TUI attached to a `stepdbg serve` job said
nowhere that the job's own output (its prints) goes to the terminal it was served from: the
newcomer waited for them in the Log. The Log says it once, at the attach, where the window does
not get that output; served with --forward-output it comes to the Log, and no such line is
said. A real served job under Pilot at 80x24, its Log as drawn."""

from __future__ import annotations

import pytest
from conftest import wait_for
from textual.widgets import RichLog
from tui_walk import settled

SAID = ("the job's own output (its prints) goes to the terminal that started it, not to this Log "
        "(a job started by stepdbg serve --forward-output sends it here)")
pytestmark = pytest.mark.timeout(300)


def log_text(app) -> str:
    return " ".join("\n".join(strip.text for strip in app.query_one("LogPanel RichLog", RichLog).lines).split())


@pytest.mark.parametrize("forwarded", [False, True], ids=["served", "forward-output"])
async def test_the_log_says_where_a_served_jobs_output_goes(tui_at_break, forwarded):
    args = ("--break", "step==2", *(("--forward-output",) if forwarded else ()))
    async with tui_at_break(*args, script_args=("--steps", "4")) as (app, pilot):
        await pilot.press("9")
        await settled(pilot, app)
        if forwarded:
            await pilot.press("c")  # (its prints come to the Log)
            await wait_for(pilot, lambda: "step 2 loss" in log_text(app), "the job's print in the Log")
            assert "goes to the terminal that started it" not in log_text(app), log_text(app)
        else:
            await wait_for(pilot, lambda: "paused at step 2" in log_text(app), "the Log's lines")
            assert log_text(app).count(SAID) == 1, log_text(app)
