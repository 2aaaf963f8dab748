"""The Breaks panel's quiet note follows the job to its end (issue 45, the closing walk of
05:50's 8): nan_log, `s` at the break, `7`, then `c`: at `job ended` the panel still said
`nan: quiet since step 30: stays true (through step 31), ...` while the job said it held
on 29 more steps. A real job under Pilot at 80x24; failed before its fix."""

from __future__ import annotations

from pathlib import Path

from conftest import wait_for
from test_tui_fixes import real
from test_walk10_tui_fields import at_break
from tui_walk import screen_text

NAN = Path(__file__).parent.parent / "demos" / "nan_log.py"


@real
async def test_the_quiet_note_says_the_last_step_the_breakpoint_held_at_the_end(tui_at_break):
    async with tui_at_break("--break", "nan", script=NAN, size=(80, 24)) as (app, pilot):
        await at_break(app, pilot)
        await pilot.press("escape", "s")
        await wait_for(pilot, lambda: app.status.get("state") == "paused" and app.status.get("step") == 31,
                       "the next step's pause")
        await pilot.press("7")
        await wait_for(pilot, lambda: "through step 31" in screen_text(app), "the quiet note at step 31")
        await pilot.press("c")
        await wait_for(pilot, lambda: str(app.status.get("state", "")).startswith("exited"), "the end")
        last = app.status["step"]
        await wait_for(pilot, lambda: "through step 31" not in screen_text(app), f"a note past step 31: {screen_text(app)}")
        assert f"nan: quiet since step 30: stays true (through step {last})" in screen_text(app), screen_text(app)
