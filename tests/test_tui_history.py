"""The Plots equal the job's history (issue 45, item 2): no step record is lost between
the agent's step events and the app's history, however the app's turns fall."""

from __future__ import annotations

import asyncio

import fake_source
import pytest
from conftest import WAIT, text_of
from fake_source import HISTORY
from test_tui_fixes import no_exception_on_screen, real, wait_for
from test_tui_keys import started
from tui_walk import header_text

from stepdbg_tui.app import StepdbgApp
from stepdbg_tui.messages import StepSummary

LATER = [{**h, "step": h["step"] + 30} for h in HISTORY]  # steps 30-59, after the fake's history


def loss_label(app: StepdbgApp) -> str:
    return text_of(app, "#plot-loss-label")


@pytest.mark.timeout(60)
async def test_step_events_the_app_had_no_time_for_leave_every_step_on_the_plots():
    """Three step events queued before the app's turn (as on a loaded machine): Textual keeps
    the last and drops the others, whose records it must carry. The Plots said steps 30-59
    with 30-49 missing from the history (the older events' records went with them)."""
    src, app, ctx = await started(size=(80, 24), paused=False)
    async with ctx as pilot:
        await wait_for(pilot, lambda: len(app.history) == 30, "the history")
        await pilot.press("6")
        await wait_for(pilot, lambda: loss_label(app).startswith("loss: steps 0–29"), "the plots")
        for first in range(0, 30, 10):  # posted in one turn of the loop, as pump_events does when it runs ahead
            chunk = LATER[first:first + 10]
            app.post_message(StepSummary({**chunk[-1], "earlier": chunk[:-1]}))
        await wait_for(pilot, lambda: app.history[-1]["step"] == 59, "step 59")
        assert [h["step"] for h in app.history] == list(range(60))
        await wait_for(pilot, lambda: loss_label(app).startswith("loss: steps 0–59"), "the plots to step 59")
        no_exception_on_screen(app)


@pytest.mark.timeout(60)
async def test_steps_sent_while_the_history_is_on_its_way_stay(monkeypatch):
    """The job reads its history for the app (steps 0-29), then sends steps 30-34, which the
    app handles before the answer: they stay on top of it (the answer replaced them)."""
    holder: list[StepdbgApp] = []

    async def history(src, last):
        answer = HISTORY[-last:]  # what the job had when it read it
        chunk = LATER[:5]
        src.push("step", {**chunk[-1], "earlier": chunk[:-1]})
        for _ in range(int(WAIT / 0.01)):  # until the app has handled it (a guard, never a measure)
            if holder and holder[0].history and holder[0].history[-1]["step"] == 34:
                break
            await asyncio.sleep(0.01)
        return answer

    monkeypatch.setitem(fake_source.ANSWERS, "history", history)
    src, app, ctx = await started(size=(80, 24), paused=False)
    holder.append(app)
    async with ctx as pilot:
        await wait_for(pilot, lambda: ("history", (500,)) in src.calls and app.arrived is None, "the answer")
        assert [h["step"] for h in app.history] == list(range(35))
        await pilot.press("6")
        await wait_for(pilot, lambda: loss_label(app).startswith("loss: steps 0–34"), "the plots")


@real
async def test_after_c_to_the_end_the_plots_cover_every_step(tui_at_break):
    """Paused at step 5 of 60, Plots (6), c: after the end the loss plot covers steps 0–59
    (it said steps 0-29, or missed steps in the middle on a loaded machine)."""
    async with tui_at_break("--break", "step==5", script_args=("--steps", "60")) as (app, pilot):
        await pilot.press("6", "c")
        await wait_for(pilot, lambda: "ended" in header_text(app), "the end")
        await wait_for(pilot, lambda: loss_label(app).startswith("loss: steps 0–59"), "the plots to step 59")
        assert [h["step"] for h in app.history] == list(range(60))
        no_exception_on_screen(app)


@pytest.mark.timeout(60)
async def test_steps_whose_loss_is_not_finite_are_said_above_the_plot():
    """After a NaN at step 30 the job runs to 59 with a NaN loss: the Plots say those steps
    are not finite (they said `loss: steps 0–29`, as if the job had stopped there)."""
    src, app, ctx = await started(size=(80, 24), paused=False)
    async with ctx as pilot:
        await wait_for(pilot, lambda: len(app.history) == 30, "the history")
        await pilot.press("6")
        nan = [{**h, "loss": "nan"} for h in LATER]  # (the wire's strict JSON says a NaN so)
        app.post_message(StepSummary({**nan[-1], "earlier": nan[:-1]}))
        await wait_for(pilot, lambda: "not finite" in loss_label(app), "the words")
        assert loss_label(app).startswith("loss: steps 0–29") and loss_label(app).endswith(
            "not finite at steps 30–59 (not drawn)"), loss_label(app)
