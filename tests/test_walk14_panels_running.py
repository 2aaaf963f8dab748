"""While the job runs the REPL line does not invite Python in a paused frame, and k's toast
names the step it skips (issue 45, the closing walk's 20): the line said `e: Python in the
paused frame` of a running job; k while running said `skip: the parameters and the
optimizer's state stay as they are`, naming no step (no Break panel says it then)."""

from __future__ import annotations

import pytest
from conftest import wait_for
from fake_source import FakeSource
from tui_walk import screen_text

from stepdbg_tui.app import StepdbgApp

pytestmark = pytest.mark.timeout(20)


async def test_the_repl_lines_words_say_the_job_runs_and_k_names_the_step():
    src = FakeSource(paused=False)
    app = StepdbgApp(src, clock=lambda: 1754.0)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await wait_for(pilot, lambda: "e: the job runs" in screen_text(app), "the line's words")
        assert "paused frame" not in screen_text(app)
        await pilot.press("k")
        await wait_for(pilot, lambda: "skip: " in screen_text(app), "k's toast")
        assert "skip: step 30's update will be skipped" in screen_text(app), screen_text(app)
        src.push("paused", {**src.status_at_attach, "step": 31, "phase": "before_forward", "condition": "pause",
                            "reason": "paused (p)"})
        await wait_for(pilot, lambda: "paused frame" in screen_text(app), "the line's words at a pause")
