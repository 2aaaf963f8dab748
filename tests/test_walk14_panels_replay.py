"""After r the Break panel's reason no longer asks for a replay (issue 45, the closing
walk's 22): a break whose reason ends `(replay the step to name it)` still said so with the
replay's answer under it. Once replayed, it points at the replay's lines."""

from __future__ import annotations

import pytest
from conftest import wait_for
from fake_source import FakeSource
from tui_walk import screen_text

from stepdbg_tui.app import StepdbgApp

pytestmark = pytest.mark.timeout(60)

DATA = "the model's input is already non-finite: it came with the data (replay the step to name it)"


async def test_the_break_reason_no_longer_asks_for_the_replay_once_replayed():
    src = FakeSource(paused=True)
    src.paused = {**src.paused, "reason": DATA}
    app = StepdbgApp(src, clock=lambda: 1754.0)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: "replay the step to name it" in screen_text(app), "the break")
        await pilot.press("r")
        await wait_for(pilot, lambda: "replay: " in screen_text(app), "the replay's answer")
        shown = " ".join(screen_text(app).split())
    assert "replay the step to name it" not in shown, shown
    assert "it came with the data (the replay below names it)" in shown, shown
