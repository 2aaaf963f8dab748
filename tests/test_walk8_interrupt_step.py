"""Ctrl-C, then i, on a running job (not paused): the Log's change names the step the
header names at the end (issue 45, the eighth walk's item 2). The Log said `change at
step 36` under a header's `step 35 · job ended`: a change made between steps carried the
next step's number, never begun, and the TUI's guess from its status (step events come
10 a second) missed it; a Ctrl-C inside step 36 ended a job the header said ended at 35."""

from __future__ import annotations

import re

import pytest
from conftest import WAIT, wait_for
from test_tui_walk2_log import log_words
from tui_walk import header_text

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("private_runtime_dir")]


@pytest.mark.timeout(WAIT * 2)
async def test_a_ctrl_c_to_a_running_job_is_said_at_the_step_the_header_says(tui_at_break):
    async with tui_at_break("--break", "step==0", script_args=("--steps", "1000000"), size=(160, 48)) as (app, pilot):
        await pilot.press("c")
        await wait_for(pilot, lambda: len(app.history) > 20, "the job running on")
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: app.screen is not app.screen_stack[0], "the Ctrl-C dialog")
        await pilot.press("i")
        await wait_for(pilot, lambda: "job ended" in header_text(app), "the job's end")
        await pilot.press("9")
        await wait_for(pilot, lambda: "the job ended with exit code" in log_words(app), "the Log's end")
        said, header = log_words(app), header_text(app)
        change = re.search(r"change (at|after) step (\d+): Ctrl-C", said)
        end = re.search(r"step (\d+) · job ended", header)
        assert change and end, (said, header)
        at, n, last = change.group(1), int(change.group(2)), int(end.group(1))
        # The header never says less than the Log. (Made at step n, the job ends there or, the
        # signal handled a few steps on when the machine is busy, later: 544 then 547 was seen.)
        assert last >= n if at == "at" else last >= n, (change.group(0), header)
