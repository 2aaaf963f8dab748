"""The Log says a rewind's change, then `resumed`, then what the job printed after it
(issue 45, the closing walk's leftovers): R at a pause rewinds and lets the job go on, but
it did not hold the Log as c, n, s and until do (LogOrder.resuming, 4841ae4), so a launched
job's lines after the resume (they come by its pipes, its events by the socket, either
first) went before `resumed`. The app gets them with the pipe first and the socket first,
and the Log (9) as drawn is read."""

from __future__ import annotations

import pytest
from conftest import wait_for
from fake_source import FakeSource
from test_walk9_ranks_log_order import out
from tui_walk import screen_text

from stepdbg.wire.change_text import change_said
from stepdbg_tui.app import StepdbgApp
from stepdbg_tui.messages import JobEvent

pytestmark = pytest.mark.timeout(120)

CHANGE = {"what": "rewind", "step": 30, "to_step": 25, "batches_skipped": 6, "rewinds": 1, "cause": "asked by a client"}


@pytest.mark.parametrize("pipe_first", [True, False])
async def test_r_says_the_rewind_then_resumed_then_the_jobs_lines(pipe_first):
    src = FakeSource(paused=True)
    src.torchrun = object()  # (a launched job: its output comes by the pipes, into the Log)
    app = StepdbgApp(src)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("9")
        await wait_for(pilot, lambda: app.status.get("state") == "paused", "the pause")
        await pilot.press("R")
        await wait_for(pilot, lambda: any(c[0] == "rewind" for c in src.calls), "the rewind asked")
        pipe = [out("stderr", f"stepdbg: change: {change_said(CHANGE)}"), out("stdout", "step 30 loss 1.234")]
        socket = [JobEvent("change", CHANGE), JobEvent("resumed", {"step": 30})]
        for message in (pipe + socket if pipe_first else socket + pipe):
            app.post_message(message)
        await wait_for(pilot, lambda: "resumed at step 30" in screen_text(app) and "step 30 loss 1.234" in screen_text(app),
                       "the resume and the job's line")
        rows = [r.strip(" ▊▎") for r in screen_text(app).splitlines()]
    at = {what: next(i for i, r in enumerate(rows) if r.startswith(what))
          for what in ("change at step 30: rewind to the snapshot of step 25", "resumed at step 30", "step 30 loss 1.234")}
    assert list(at.values()) == sorted(at.values()), "\n".join(rows)
