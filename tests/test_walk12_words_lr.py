"""An LR set at a pause is said by the Break panel of every client, from the job's own record
(issue 45, the twelfth walk's 1): the window that set it said `lr 0.01 → 0.001 pinned`,
from the change event it got; a second TUI attached later showed the LR at the break alone,
as if nothing had been set (a skip, k, is said from the job's status since 2b44460). The
job's status carries the pause's LR change (views._lr_now) and the panel says it in the
change's words (change_text: the Log's, the console's). Real job, Pilot at 80x24; failed
before its fix."""

from __future__ import annotations

import pytest
from conftest import WAIT, text_of, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("private_runtime_dir")]

SET = "LR set to 0.001 and pinned (param group 0, was 0.01)"


def record(app) -> str:
    return " ".join(text_of(app, "#break-record").split())


@pytest.mark.timeout(WAIT * 2)
async def test_an_lr_set_at_a_pause_is_said_in_the_break_panel_of_every_client(tui_at_break):
    from textual.widgets import Input

    from stepdbg.client.async_client import AsyncClient
    from stepdbg_tui.app import StepdbgApp

    async with tui_at_break("--break", "step==2", script_args=("--steps", "6"), size=(80, 24)) as (app, pilot):
        await wait_for(pilot, lambda: "step 2 · before_forward" in record(app), "the break")
        assert "LR set" not in record(app), record(app)
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.focused, Input), "the LR dialog's field")
        await pilot.press(*"0.001", "enter")
        await wait_for(pilot, lambda: SET in record(app), "the LR set in this window's Break panel")
        other = await AsyncClient.connect()  # a second TUI, attached after the l
        later = StepdbgApp(other)
        try:
            async with later.run_test(size=(80, 24)) as pilot2:
                await wait_for(pilot2, lambda: "step 2 · before_forward" in record(later), "its Break panel")
                await wait_for(pilot2, lambda: SET in record(later), "the LR set in the second client's Break panel")
                said = record(later)
                assert "lr 0.01 " in said, said  # (the LR at the break, beside the one set)
                await pilot2.press("n")  # the next pause: its own record, the LR read there is the one set
                await wait_for(pilot2, lambda: "step 2 · after_forward" in record(later), "the next pause")
                await wait_for(pilot2, lambda: "lr 0.001" in record(later), "the LR read at the next pause")
                assert "LR set" not in record(later), record(later)
                later.exit(None)
        finally:
            await other.close()
