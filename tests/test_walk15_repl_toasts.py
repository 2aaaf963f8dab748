"""Toasts and the words above the REPL line at 80x24 after the closing walk of issue 45 (its
6, 12): the TUI under Pilot attached to a real job, toasts on, the drawn screen read."""

from __future__ import annotations

from pathlib import Path

from conftest import wait_for
from test_tui_fixes import real
from tui_walk import screen_text, settled

DEMOS = Path(__file__).resolve().parent.parent / "demos"


def one_line(text: str) -> str:
    return " ".join(text.split())


@real
async def test_n_at_an_exception_s_break_is_said_whole_and_once(tui_at_break):
    """The closing walk's 6: `n` at shape_error's exception break toasted `next phase: n: at an
    uncaught exception ... q ends the job (exit code 3)`, its last words under the screen's
    bottom, its key said twice."""
    async with tui_at_break(script=DEMOS / "shape_error.py", notifications=True) as (app, pilot):
        await pilot.press("n")
        await settled(pilot, app)
        drawn = screen_text(app, skip=())
        assert "q ends the job (exit code 3)" in one_line(drawn), drawn
        assert "n: n:" not in one_line(drawn) and "next phase: n:" not in one_line(drawn), drawn


@real
async def test_p_at_a_pause_and_until_s_pause_are_said_once(tui_at_break):
    """The closing walk's 12: `p` at a pause said `the job is paused already: ...` above the
    REPL line and in a toast; `until 5` on the line said `the job paused at step 5 · ...`
    there and in a toast: the same words twice, 4 or 5 of 24 rows."""
    async with tui_at_break("--break", "step==3", script=DEMOS / "nan_log.py", notifications=True) as (app, pilot):
        await pilot.press("p")
        await settled(pilot, app)
        drawn = one_line(screen_text(app, skip=()))
        assert drawn.count("the job is paused already") == 1, screen_text(app, skip=())
        app.clear_notifications()
        await pilot.press("e", *"until 5", "enter")
        await wait_for(pilot, lambda: (app.status.get("paused") or {}).get("step") == 5, "the pause at step 5")
        await settled(pilot, app)
        drawn = one_line(screen_text(app, skip=()))
        assert drawn.count("the job paused at step 5") == 1, screen_text(app, skip=())
