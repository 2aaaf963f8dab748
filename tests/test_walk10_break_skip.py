"""The Break panel tells the pause's whole state (issue 45, the tenth walk's 1, 2 and 4).

1. A skip asked at a pause (k) was said in a toast alone: the Break panel showed nothing
   (an LR change showed there), and a second TUI attached later had no sign of it. The
   job's status says the step whose update will be skipped (views._skip_pending), and every
   client's Break panel says it.
2. `k` at a break where nothing was bad (data_wait, step==N) said "(the loss your script
   prints for step 2 is the one it computed, still the bad one)": the words fit the break
   (a loss that is non-finite, or not).
4. At a break before the forward the panel said a bare `loss -   grad_norm -`: it says
   they are not measured yet (before the forward), at 80 columns.
Real jobs under Pilot at 80x24; the console's own output for 2."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import FIXTURE, ROOT, WAIT, text_of, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("private_runtime_dir")]

SKIP = "step 2's update will be skipped"


def record(app) -> str:
    return " ".join(text_of(app, "#break-record").split())


@pytest.mark.timeout(WAIT * 2)
async def test_a_skip_is_said_in_the_break_panel_of_every_client(tui_at_break):
    from stepdbg.client.async_client import AsyncClient
    from stepdbg_tui.app import StepdbgApp

    async with tui_at_break("--break", "step==2", script_args=("--steps", "6"), size=(80, 24)) as (app, pilot):
        await wait_for(pilot, lambda: "step 2 · before_forward" in record(app), "the break")
        said = record(app)
        assert "loss and grad_norm not measured yet (before the forward)" in said, said  # (4)
        assert "loss -" not in said and "grad_norm -" not in said, said
        assert SKIP not in said, said
        await pilot.press("k")
        await wait_for(pilot, lambda: SKIP in record(app), "the skip in the Break panel")
        other = await AsyncClient.connect()  # a second TUI, attached after the k
        later = StepdbgApp(other)
        try:
            async with later.run_test(size=(80, 24)) as pilot2:
                await wait_for(pilot2, lambda: "step 2 · before_forward" in record(later), "its Break panel")
                await wait_for(pilot2, lambda: SKIP in record(later), "the skip in the second client's Break panel")
                later.exit(None)
        finally:
            await other.close()


def test_a_skip_at_a_break_of_no_bad_value_does_not_call_the_loss_bad():
    """The console's confirmation (change_said, the job's stderr line's words) of `skip` at
    a step==2 break (before the forward: no loss yet) and at a NaN's break."""
    env = {**os.environ, "STEPDBG_CONSOLE": "1"}
    calm = subprocess.run([sys.executable, "-m", "stepdbg", "--no-tui", "--break", "step==2", "--on-break", "pause", sys.executable,
                           str(FIXTURE), "--steps", "4"], input="skip\nc\n", capture_output=True, text=True,
                          cwd=ROOT, timeout=WAIT, env=env)
    assert "(the loss your script prints for step 2 is the one it computes)" in calm.stderr, calm.stderr
    assert "still the bad one" not in calm.stderr, calm.stderr
    nan = subprocess.run([sys.executable, "-m", "stepdbg", "--no-tui", "--on-break", "pause", sys.executable, str(FIXTURE), "--steps", "5",
                          "--nan-at", "2"], input="skip\nc\n", capture_output=True, text=True, cwd=ROOT,
                         timeout=WAIT, env=env)
    assert "is the one it computed, still the bad one)" in nan.stderr, nan.stderr
