"""The closing walk's dialogs and toasts (issue 45: 6, 8, 17, 18), in the Pilot picture at
80x24 over the fake job: each failed before its fix.

6: `u` four times at the outermost frame stacked four identical toasts, over the quit
dialog's buttons once it opened, and never said the frame was the outermost.
8: the quit and Ctrl-C dialogs opened with no button focused: Enter did nothing.
17: quit while the job runs offered `continue it` and `leave it running`, one choice.
18: a second Ctrl-C with the Ctrl-C dialog open did nothing."""

from __future__ import annotations

import pytest
from conftest import wait_for
from fake_source import FakeSource
from textual.widgets import Button
from tui_walk import screen_text, settled

from stepdbg_tui.app import StepdbgApp
from stepdbg_tui.dialogs import CtrlCScreen, QuitScreen

pytestmark = pytest.mark.timeout(60)


def words(app: StepdbgApp) -> str:
    return " ".join(screen_text(app, skip=()).split())


async def quit_dialog(pilot, app: StepdbgApp) -> str:
    """q, the quit dialog open and settled: its words."""
    await pilot.press("q")
    await wait_for(pilot, lambda: isinstance(app.screen, QuitScreen), "the quit dialog")
    await settled(pilot, app)
    return words(app)


async def test_u_at_the_outermost_frame_says_so_once_and_the_quit_dialog_opens_clear_of_toasts():
    app = StepdbgApp(FakeSource(paused=True), clock=lambda: 1754.0)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await settled(pilot, app)
        for _ in range(4):
            await pilot.press("u")
            await settled(pilot, app)
        shown = words(app)
        assert shown.count("frame <module>() at nan_log.py:67: the outermost") == 1, shown  # (one toast, not four)
        shown = await quit_dialog(pilot, app)
        assert "outermost" not in shown and "c: continue it" in shown, shown  # (no toast over its buttons)


async def test_the_quit_dialog_of_a_paused_job_opens_on_leave_it_paused_and_enter_presses_it():
    app = StepdbgApp(FakeSource(paused=True), clock=lambda: 1754.0)
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot, app)
        shown = await quit_dialog(pilot, app)
        assert "Enter: l, it stays paused" in shown and "l: leave it paused" in shown, shown
        assert isinstance(app.focused, Button) and app.focused.id == "stay", app.focused
        await pilot.press("enter")
        await settled(pilot, app)
    assert app.return_value == "stay"


async def test_the_quit_dialog_of_a_running_job_offers_distinct_choices():
    app = StepdbgApp(FakeSource(paused=False), clock=lambda: 1754.0)
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot, app)
        shown = await quit_dialog(pilot, app)
        assert "continue" not in shown and "l: leave it running" in shown and "e: end it" in shown, shown
        assert "Enter: l, it stays running" in shown, shown
        await pilot.press("c")  # (nothing: c is not offered)
        await settled(pilot, app)
        assert isinstance(app.screen, QuitScreen)
        await pilot.press("enter")
        await settled(pilot, app)
    assert app.return_value == "stay"


async def test_the_ctrl_c_dialog_opens_on_cancel_and_a_second_ctrl_c_interrupts_the_job():
    src = FakeSource(paused=True)
    app = StepdbgApp(src, clock=lambda: 1754.0)
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot, app)
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: isinstance(app.screen, CtrlCScreen), "the Ctrl-C dialog")
        await settled(pilot, app)
        shown = words(app)
        assert "Enter: cancel; Ctrl-C again: interrupt the job" in shown, shown
        assert isinstance(app.focused, Button) and app.focused.id == "cancel", app.focused
        await pilot.press("enter")
        await settled(pilot, app)
        assert not isinstance(app.screen, CtrlCScreen) and "interrupt_job" not in [c[0] for c in src.calls]
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: isinstance(app.screen, CtrlCScreen), "the Ctrl-C dialog")
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: ("interrupt_job", ()) in src.calls, "the job interrupted")
        assert not isinstance(app.screen, CtrlCScreen)
