"""The header as a newcomer's walk at 80x24 met it (issue 45, items 1 and 8), the TUI under
Pilot attached to a real job of its own (conftest's tui_at_break); each failed before its fix."""

from __future__ import annotations

import re

from conftest import DEMOS, wait_for
from test_tui_fixes import real
from tui_walk import header_step, header_text


@real
async def test_after_the_end_the_header_names_the_last_step_the_job_ran(tui_at_break):
    """Paused at step 30 of 60, then c: the job runs to its end. The header said `step 60 ·
    job ended` after steps 0 to 59 (the status's step, between steps, is the next one's
    number); now `step 59`, and the step it shows never went back on the way."""
    async with tui_at_break("--break", "nan", script=DEMOS / "nan_log.py", script_args=("--steps", "60")) as (
            app, pilot):
        seen: list[int] = []

        def ended() -> bool:
            step = header_step(app)
            if step is not None and (not seen or seen[-1] != step):
                seen.append(step)
            return "job ended" in header_text(app)

        await pilot.press("c")
        await wait_for(pilot, ended, "the job's end")
        assert "step 59 · job ended, exit code 0" in header_text(app), header_text(app)
        assert seen == sorted(seen), f"the header's step went back: {seen}"


@real
async def test_the_header_keeps_an_option_with_its_value_and_fills_its_width(tui_at_break):
    """`nan_log.py --steps 60` at 80 columns: the header showed `nan_log.py --steps` (the
    option without its value) and left out the host with room to spare (`… @ vm` after the
    end, `nan_log.py       00:00:17` paused). Now an option and its value show together or
    not at all (`…` says some are left out), and what fits is shown."""
    async with tui_at_break("--break", "nan", script=DEMOS / "nan_log.py", script_args=("--steps", "60")) as (
            app, pilot):
        session = app.source.session
        paused = header_text(app).rstrip()
        assert not re.search(r"--steps(?! 60)", paused), paused
        assert paused.startswith(f"pid {session['pid']}  nan_log.py "), paused
        await pilot.press("c")
        await wait_for(pilot, lambda: "job ended" in header_text(app), "the job's end")
        end = header_text(app).rstrip()
        assert f"pid {session['pid']}  nan_log.py --steps 60 @ {session['host']} " in end, end
