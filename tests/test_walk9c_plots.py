"""The grad-norm plot says why its first steps are missing (issue 45, a newcomer's walk):
the job measures the gradient norm only while a front end is attached or a breakpoint
reads it (each a host read on an accelerator: Session.needs_grad_norm), so the TUI
attached to a served job at step 4 drew `grad norm: step 4` under `loss: steps 0–4`, the
first steps gone without a word. The caption now says from which step it was measured
and why. A real served job, the TUI (Pilot) attached at its step-4 break."""

from __future__ import annotations

import pytest
from conftest import text_of, wait_for
from tui_walk import screen_text

WHY = "the job measures it only while a front end is attached or a breakpoint reads it"  # (plots.ON_DEMAND)

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("private_runtime_dir")]


async def test_the_grad_norm_plot_says_it_was_measured_from_the_attach(start_job):
    from stepdbg.client.async_client import AsyncClient
    from stepdbg_tui.app import StepdbgApp

    job = start_job("--break", "step==4", script_args=("--steps", "8"))
    job.info()
    while "step 3 loss" not in (line := job.proc.stdout.readline()):  # steps 0-3 ran with nobody attached
        assert line, job.proc.stderr.read()
    client = await AsyncClient.connect()
    app = StepdbgApp(client)
    try:
        async with app.run_test(size=(200, 50)) as pilot:
            await wait_for(pilot, lambda: app.status.get("state") == "paused", "the break at step 4")
            await pilot.press("s")  # step 4 runs with a front end: its norm is measured
            await wait_for(pilot, lambda: any(h.get("step") == 4 for h in app.history), "step 4's record")
            await wait_for(pilot, lambda: app.status.get("state") == "paused", "the pause at step 5")
            await pilot.press("6")
            await wait_for(pilot, lambda: "grad norm: step 4," in text_of(app, "#plot-grad_norm-label"), "the plot")
            why = f"measured from step 4: {WHY}"
            assert why in text_of(app, "#plot-grad_norm-label"), text_of(app, "#plot-grad_norm-label")
            assert text_of(app, "#plot-loss-label").startswith("loss: steps 0–4"), text_of(app, "#plot-loss-label")
            await wait_for(pilot, lambda: why in screen_text(app), "the Plots on screen")
            app.exit(None)
    finally:
        await client.close(then="end")
