"""Two breaks at one step, phase, condition and line are two breaks in the Log (the attack on
rank_breaks' key, commit 3ef7878): stepdbg.breakpoint() in a block's forward, the block used
twice a step, pauses twice in step 0 at the same line; the TUI keyed a job's own break by its
(step, rank, phase, condition, file, line), so the second pause's break was taken for the
first said again: the Log had one `break at step 0 [breakpoint()]`, and the window paused at
the second with no break said for it. A real served job (conftest's tui_at_break), 80x24."""

from __future__ import annotations

from pathlib import Path

from conftest import wait_for
from test_tui_fixes import real
from test_walk_breaks_seen import log_text
from tui_walk import settled

SCRIPT = Path(__file__).parent / "fixtures" / "breakpoint_in_block.py"


@real
async def test_a_second_pause_at_the_same_line_in_one_step_is_said(tui_at_break):
    async with tui_at_break(script=SCRIPT) as (app, pilot):
        first = app.status["paused"]
        assert first["step"] == 0 and first["condition"] == "breakpoint()", first
        await pilot.press("c")
        await wait_for(pilot, lambda: app.status.get("state") == "paused"
                       and (app.status.get("paused") or {}).get("at") != first["at"], "the second pause of step 0")
        assert app.status["paused"]["step"] == 0, app.status["paused"]
        app.action_panel("log")
        await settled(pilot, app)
        await wait_for(pilot, lambda: log_text(app).count("break at step 0 [breakpoint()]") == 2,
                       f"both pauses of step 0 said in the Log: {log_text(app)}")
