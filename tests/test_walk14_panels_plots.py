"""The Plots panel shows the break's value of a step not finished (issue 45, the closing
walk's 14): at a grad_norm break the Break panel's hint sends the person to Plots (6),
which ended at the step before the break (the history holds finished steps) and drew no
value of the break's step. The caption says it (`at the break: X`) and the plot has its
point at the red line; once the step is in the history, the history's value is drawn."""

from __future__ import annotations

import pytest
from conftest import wait_for
from fake_source import HISTORY, FakeSource
from tui_walk import screen_text

from stepdbg_tui.app import StepdbgApp
from stepdbg_tui.plots import PlotsPanel

pytestmark = pytest.mark.timeout(60)

BREAK = {"step": 30, "phase": "before_optimizer_step", "condition": "grad_norm>100",
         "reason": "grad_norm 1234.5 > 100", "scalars": {"loss": 0.93, "grad_norm": 1234.5, "data_wait": 0.0002,
                                                          "lr": [0.01]}}


async def test_the_plots_show_the_breaks_value_of_a_step_not_finished():
    src = FakeSource(paused=True)
    src.paused = {**src.paused, **BREAK}
    app = StepdbgApp(src, clock=lambda: 1754.0)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: "see Plots (6)" in screen_text(app), "the hint to the Plots")
        assert HISTORY[-1]["step"] == 29  # (the break's step is not finished)
        await pilot.press("6")
        await wait_for(pilot, lambda: "grad norm: steps 0–29" in screen_text(app), "the grad norm's plot")
        shown = " ".join(screen_text(app).split())
        assert "break at step 30 (red line), at the break: 1.23e+03" in shown, shown
        assert "loss: steps 0–29" in shown and "at the break: 0.93" in shown, shown
        plot = app.query_one(PlotsPanel)
        assert plot.at_break(app.history, "grad_norm") == 1234.5
        finished = [*app.history, {**HISTORY[-1], "step": 30, "grad_norm": 1234.5}]
        assert plot.at_break(finished, "grad_norm") is None  # (the history's own value then)
