"""A replay of a step the Log has said, run by the job's --on-break replay (a second break at
the same step, its action a replay, after the TUI's `r` at the first): the Log said `replay of
step 30 again by another client`, though no client asked. It says who did, as a first replay's
line does (who_asked). The TUI under Pilot at 160x48, the Log as drawn."""

from __future__ import annotations

import pytest
from conftest import wait_for
from fake_source import FakeSource
from test_tui_walk2_log import log_words

from stepdbg.wire.replay_text import ON_BREAK
from stepdbg_tui.app import StepdbgApp
from stepdbg_tui.messages import JobEvent

pytestmark = pytest.mark.timeout(60)

FINDING = {"step": 30, "summary": "fc2 (Linear) produced the first non-finite value", "verdict": "a model fault"}


async def test_the_on_break_replays_again_says_who_asked():
    app = StepdbgApp(FakeSource(paused=True), clock=lambda: 1754.0)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("9")
        app.post_message(JobEvent("replay", dict(FINDING)))
        await wait_for(pilot, lambda: "replay of step 30 (another client asked)" in log_words(app), "the first")
        app.post_message(JobEvent("replay", {**FINDING, "asked_by": ON_BREAK}))
        await wait_for(pilot, lambda: "replay of step 30 again" in log_words(app), "the second")
        words = log_words(app)
        assert "replay of step 30 again by the --on-break replay: the same finding" in words, words
        app.post_message(JobEvent("replay", dict(FINDING)))
        await wait_for(pilot, lambda: log_words(app).count("replay of step 30 again") == 2, "the third")
        assert "replay of step 30 again by another client: the same finding" in log_words(app)
