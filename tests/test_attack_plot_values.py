"""The Plots take any value a step record or a break carries (issue 43's rule: the job is the
user's own process). A JSON integer too large for a float, as a step's loss or a break's
grad norm, raised OverflowError in the Plots' `show` (`math.isfinite`, `:.3g`) and the TUI
ended with it; it is now a value that is not finite: not drawn, the caption says its step."""

from __future__ import annotations

import fake_source
import pytest
from conftest import wait_for
from fake_source import HISTORY, FakeSource
from tui_walk import screen_text

from stepdbg_tui.app import StepdbgApp

pytestmark = pytest.mark.timeout(60)

HUGE = 10 ** 400  # a JSON integer of 401 digits: Python reads it whole; float() cannot hold it


async def test_a_value_too_large_for_a_float_is_said_not_raised(monkeypatch):
    history = [*HISTORY[:-1], {**HISTORY[-1], "loss": HUGE, "lr": [HUGE]}]
    monkeypatch.setitem(fake_source.ANSWERS, "history", lambda src, last: history[-last:])
    src = FakeSource(paused=True)
    src.paused = {**src.paused, "step": 30, "scalars": {"loss": 0.93, "grad_norm": HUGE}}
    app = StepdbgApp(src, clock=lambda: 1754.0)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: "step 30" in screen_text(app), "the break")
        await pilot.press("6")
        await wait_for(pilot, lambda: "grad norm: steps 0–29" in screen_text(app), "the grad norm's plot")
        shown = " ".join(screen_text(app).split())
        assert "not finite at step 29 (not drawn)" in shown.split("loss: steps 0–28", 1)[1], shown
        assert "at the break: inf" in shown.split("grad norm: steps 0–29", 1)[1], shown
